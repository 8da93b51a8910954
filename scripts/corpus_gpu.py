#!/usr/bin/env python3
"""The corpus on the GPU machine: every compiled kernel launched from Python and C++, checked and timed.

    python scripts/corpus.py --package liger --gpu-prepare     # build machine: fills .gpu/corpus/
    python3 scripts/corpus_gpu.py                              # GPU machine (torch, Triton 3.6; no cuTile/CuTe)
    python3 scripts/corpus_gpu.py --case rms_norm --reps 5 --out report.md
    python3 scripts/corpus_gpu.py --shard 2/3                  # every 3rd Triton case from the 2nd
    python3 scripts/corpus_gpu.py --dsl cute                   # only the CuTe rows (or cutile, triton)

Triton kernels: liger's wrappers run on CUDA tensors; each launch runs liger's Triton JIT (the reference), then
kernelpack's Python runtime and the library's C entry through a C++ driver compiled here with g++ against the C
library, from the same starting state; every tensor argument must match, NaN-filled fresh tensors catch elements
never written. cuTile and CuTe kernels (neither DSL is on the GPU machine): the launch recorded at capture time
(argument dtypes, shapes, strides, scalars, grid; a CuTe host program's arguments) on fresh random inputs, C++ ==
Python bit for bit, and for CuTe kernels with a known op (rms_norm forward, scale-in-place, cross-entropy
forward) Python against a float64 torch reference. Time (corpus/gpu_timing.py): kernel time of back-to-back
launches queued behind a sleep kernel (the GPU has a backlog: the events measure GPU execution, not the host's
launch cost), package vs kernelpack (target: within 3%), and the host time per launch, apart. A failing kernel or
case is reported and the run continues. The markdown table goes to stdout and to --out.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=ROOT / ".gpu" / "corpus", help="what --gpu-prepare wrote")
    ap.add_argument("--package", default="liger")
    ap.add_argument("--case", action="append", default=[], help="only these Triton case ids")
    ap.add_argument("--dsl", action="append", choices=("triton", "cutile", "cute"), default=[],
                    help="only these DSLs' rows (default: all)")
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions per launch (0: no timing)")
    ap.add_argument("--shard", default="1/1", help="K/N: only every N-th Triton case starting at the K-th (the JIT "
                    "compiles each kernel on first launch: split the run to fit a command's time limit); cuTile "
                    "and CuTe rows come with shard 1")
    ap.add_argument("--out", type=Path, default=None, help="markdown report (default: $OUT/corpus_gpu.md when "
                    "$OUT is set, else <dir>/corpus_gpu.md)")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    for p in (args.dir / "site", ROOT / "src", ROOT):
        sys.path.insert(0, str(p))

    from corpus.cases import CORPUS, load_cases
    from corpus.gpu_check import read_manifest, render
    from corpus.gpu_run import Cpp, run_cute, run_recorded, run_triton, work_dir

    import kernelpack

    libs, entries = read_manifest(args.dir / "manifest.json")
    info = libs[args.package]
    lib_dir = args.dir / args.package / "lib"
    module = kernelpack.load(str(args.dir / info["shared"]))
    cpp = Cpp(lib_dir, info["name"], work_dir())
    if cpp.error:
        print(f"C++ driver: {cpp.error}", flush=True)
    _, cases = load_cases(CORPUS / "liger_triton.toml")
    k, n = (int(x) for x in args.shard.split("/"))
    cases = [c for i, c in enumerate(cases) if (not args.case or c.id in args.case) and i % n == k - 1]
    dsls = set(args.dsl or ("triton", "cutile", "cute"))
    rows = run_triton(cases, entries, module, cpp, args.reps) if "triton" in dsls else []
    if not args.case and k == 1:
        rows += run_recorded(entries, module, cpp) if "cutile" in dsls else []
        rows += run_cute(entries, module, cpp, min(args.reps, 10)) if "cute" in dsls else []
    table = render(rows)
    print(table)
    name = "corpus_gpu.md" if n == 1 else f"corpus_gpu_{k}of{n}.md"
    out = args.out or (Path(os.environ["OUT"]) / name if os.environ.get("OUT") else args.dir / name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
