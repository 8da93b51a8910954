#!/usr/bin/env python3
"""Time and peak memory of the fatbin decoders on the bombs and lenient inputs of issue 25 item 2, each in a fresh
child process under an address-space cap (RLIMIT_AS) and a time limit, through ``kernelpack.prebuilt.compile`` (the
path a user's fatbin takes). Prints one row per input and decoder: outcome, wall ms, peak RSS of the child.

    python scripts/fatbin_bombs.py                      # both decoders (the library one where installed)
    python scripts/fatbin_bombs.py --src /tmp/old/src   # another checkout's kernelpack (e.g. before the limits)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ["rle 2 KiB claiming 1 GiB", "rle 8 KiB claiming 4 GiB", "rle 8 KiB valid (255 MiB)",
         "rle 8 KiB valid (255 MiB) [read_fatbin]", "cpu 10 blocks (144 B)",
         "cpu 1,000 blocks (12 KB)", "cpu 175 KB valid", "checksum 32 MiB", "checksum 64 MiB",
         "lenient zstd", "lenient lz4"]

CHILD = r"""
import contextlib, json, resource, sys, time
cap, case, decoder = int(sys.argv[1]), sys.argv[2], sys.argv[3]
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
import fatbin_bombs as fb
from kernelpack import prebuilt
try:
    from kernelpack.frontends.prebuilt.decompress import decoders
    scope = decoders(decoder)
except ImportError:
    scope = contextlib.nullcontext()
ZSTD, LZ4 = fb.ZSTD, fb.LZ4

def one(data):
    if case.endswith("[read_fatbin]"):  # the decoders alone: the entry is a cubin (no PTX text made of it)
        from kernelpack.frontends.prebuilt.fatbin import read_fatbin
        return read_fatbin(data)
    return prebuilt.compile(data, {"k": "int n"})

def inputs():
    if case == "rle 2 KiB claiming 1 GiB":
        f, n = fb.rle_bomb(500); yield fb.fatbin([(f, ZSTD, n)])
    elif case == "rle 8 KiB claiming 4 GiB":
        f, n = fb.rle_bomb(2048); yield fb.fatbin([(f, ZSTD, min(n, 4 << 30))])
    elif case.startswith("rle 8 KiB valid (255 MiB)"):  # 128 KiB blocks: the most zstd expands 8 KiB to
        n = 2040 << 17
        f = fb.frame([fb.block("rle", b"a", rle_size=1 << 17, last=i == 2039) for i in range(2040)], size=n,
                     window_log=17)
        yield fb.fatbin([(f, ZSTD, n)], kind=2 if case.endswith("[read_fatbin]") else 1)
    elif case == "cpu 10 blocks (144 B)":
        f, n = fb.cpu_bomb(10); yield fb.fatbin([(f, ZSTD, n)])
    elif case == "cpu 1,000 blocks (12 KB)":
        f, n = fb.cpu_bomb(1000); yield fb.fatbin([(f, ZSTD, n)])
    elif case == "cpu 175 KB valid":  # blocks within every limit: 131,070 bytes from 12
        f, n = fb.cpu_bomb(14_580, 43_690, window_log=17); yield fb.fatbin([(f, ZSTD, n)])
    elif case.startswith("checksum"):  # the fallback verifies the first 32 MiB of content (CHECKSUM_MAX)
        import zstandard
        data = bytes(range(256)) * (int(case.split()[1]) << 12)
        f = zstandard.ZstdCompressor(write_checksum=True, write_content_size=True).compress(data)
        yield fb.fatbin([(f, ZSTD, len(data))])
    elif case == "lenient zstd":
        for f, n in fb.lenient_zstd().values(): yield fb.fatbin([(f, ZSTD, n)])
    else:
        for f, n in fb.lenient_lz4().values(): yield fb.fatbin([(f, LZ4, n)])

outcomes = []
t0 = time.perf_counter()
with scope:
    for data in inputs():
        try:
            one(data)
            outcomes.append("accepted")
        except BaseException as e:
            outcomes.append(f"{type(e).__name__}: {str(e)[-90:]}")
ms = (time.perf_counter() - t0) * 1000
print(json.dumps({"ms": ms, "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "outcomes": outcomes,
                  "input_bytes": [len(d) for d in inputs()]}))
"""


def run(src: Path, case: str, decoder: str, cap: int, timeout: float) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), str(ROOT / "tests")]), KERNELPACK_CACHE_DIR="off")
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, str(cap), case, decoder], capture_output=True, text=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"outcomes": [f"still running after {timeout:.0f} s (killed)"], "ms": timeout * 1000}
    if p.returncode != 0:
        return {"outcomes": [f"exit {p.returncode}: {p.stderr.strip()[-200:]}"]}
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the kernelpack package's parent folder")
    ap.add_argument("--decoders", nargs="*", default=["library", "python"])
    ap.add_argument("--cap-gib", type=float, default=3.0, help="address-space cap of each child (GiB)")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("cases", nargs="*", default=CASES)
    args = ap.parse_args()
    for case in args.cases:
        for decoder in args.decoders:
            r = run(args.src, case, decoder, int(args.cap_gib * (1 << 30)), args.timeout)
            print(f"{case:26s} {decoder:8s} {r.get('ms', 0):9.0f} ms {r.get('rss_mib', 0):8.0f} MiB  "
                  f"in={r.get('input_bytes', '')}  {r['outcomes']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
