"""Sizes of a kernel set as each delivery form carries it, and the compression of its binaries. Prints markdown.

    python bench/wheel_sizes.py BUNDLE.kpack [--library libNAME.so] [--name NAME] [--rounds 5]

BUNDLE is a built bundle (the liger-kernel corpus: ``python scripts/corpus.py --package liger`` writes
build/corpus/liger/liger.kpack and lib/lib/libliger.so). Reported: the binaries' raw size (every cubin/PTX as
compiled), the bundle, the C library, the wheel ``kernelpack wheel`` would write for it (the bundle, its stubs and
the runtime it carries; no --with-library) and the ``--split arch`` wheels (front + one provider per arch family);
the same cubins in one fatbin by ``fatbinary --compress-all --compress-mode=size`` (what nvcc --compress-mode=size
writes) when fatbinary is on PATH; each distinct binary compressed alone with zlib level 9 (what bundles store) and
with zstd level 19 (when the zstandard module is importable), and the time to expand them all in C: zlib through the
C library's own inflater (csrc/kp_inflate.c) and through the system zlib (Python's zlib module, as the Python runtime
expands blobs), zstd through the system libzstd.so.1 (when present) -- median of ``--rounds``, single thread.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

HARNESS = r"""
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kp_inflate.c"
/* a zlib stream expanded (and its Adler-32 checked) as kp_runtime.c expands a bundle's blob */
int kpb_inflate(const unsigned char* in, size_t n, unsigned char* out, size_t out_len) {
    return kp_inflate(in, n, out, out_len);
}
"""


def mib(n: float) -> str:
    return f"{n / 2**20:.2f} MiB"


def wheel_sizes(bundle_path: Path, name: str) -> tuple[int, list[tuple[str, int]]]:
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.runtime.module import KernelModule
    from kernelpack.wheel import split_wheels
    from kernelpack.wheel.archive import wheel_bytes
    from kernelpack.wheel.meta import WheelMeta
    from kernelpack.wheel.package import package_files
    from kernelpack.wheel.platform import check_platform, wheel_tag
    from kernelpack.wheel.runtime import carried_runtime

    data = bundle_path.read_bytes()
    bundle = Bundle.from_bytes(data, source=str(bundle_path))
    arch = check_platform(None)
    meta = WheelMeta(name, "1.0.0")
    # the single wheel, assembled as kernelpack.wheel._contents does without --with-library
    gen = package_files(KernelModule(bundle, str(bundle_path)), name, "1.0.0", (f"{name}.kpack",), with_library=False)
    carried = carried_runtime(name, arch)
    files = {f"{name}/{name}.kpack": data, f"{name}/py.typed": b"", f"{name}/__init__.py": gen.init.encode(),
             f"{name}/__init__.pyi": gen.stub.encode(),
             **{f"{name}/{gen.runtime}/{rel}": d for rel, d in carried.files.items()}}
    tag, _ = wheel_tag(carried.python_tag, arch, [carried.extension] if carried.extension else [])
    one = len(wheel_bytes(meta, tag, files, purelib=False))
    return one, [(fname, len(b)) for fname, b, *_ in split_wheels(meta, bundle, arch)]


def fatbin_size(cubins: list[tuple[str, bytes]], mode: str) -> int | None:
    tool = shutil.which("fatbinary")
    if tool is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        images = []
        for i, (arch, data) in enumerate(cubins):
            f = Path(tmp) / f"{i}.cubin"
            f.write_bytes(data)
            images.append(f"--image3=kind=elf,sm={arch.removeprefix('sm_')},file={f}")
        out = Path(tmp) / "all.fatbin"
        args = [tool, f"--create={out}", "--64", *images]
        args += ["--compress-all", f"--compress-mode={mode}"] if mode != "none" else ["--compress=false"]
        subprocess.run(args, check=True, capture_output=True)
        return out.stat().st_size


def c_decode_ms(streams: list[tuple[bytes, int]], zstd_frames: list[tuple[bytes, int]] | None,
                rounds: int) -> tuple[float, float | None]:
    """(zlib ms, zstd ms) to expand every stream once, in C."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("no C compiler to build the decode harness")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "h.c"
        src.write_text(HARNESS)
        so = Path(tmp) / "h.so"
        subprocess.run([cc, "-O2", "-shared", "-fPIC", f"-I{ROOT / 'src' / 'kernelpack' / 'csrc'}", str(src), "-o",
                        str(so)], check=True)
        lib = ctypes.CDLL(str(so))
        out = ctypes.create_string_buffer(max(n for _, n in streams))
        ins = [(ctypes.create_string_buffer(s, len(s)), len(s), n) for s, n in streams]

        def run_zlib() -> None:
            for buf, n, raw in ins:
                if lib.kpb_inflate(buf, ctypes.c_size_t(n), out, ctypes.c_size_t(raw)) != 0:
                    raise SystemExit("kp_inflate failed")

        z = _median(run_zlib, rounds)
        zs = None
        if zstd_frames is not None:
            try:
                zlib_ = ctypes.CDLL("libzstd.so.1")
            except OSError:
                return z, None
            zlib_.ZSTD_decompress.restype = ctypes.c_size_t
            zlib_.ZSTD_decompress.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t)
            zin = [(ctypes.create_string_buffer(s, len(s)), len(s), n) for s, n in zstd_frames]

            def run_zstd() -> None:
                for buf, n, raw in zin:
                    if zlib_.ZSTD_decompress(out, raw, buf, n) != raw:
                        raise SystemExit("ZSTD_decompress failed")

            zs = _median(run_zstd, rounds)
        return z, zs


def _median(fn, rounds: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--library", type=Path)
    ap.add_argument("--name", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    from kernelpack.bundle.kpack import Bundle

    bundle = Bundle.read(a.bundle)
    name = a.name or a.bundle.stem
    blobs: dict[str, tuple[str, bytes]] = {}
    for art in bundle:
        for b in art.binaries:
            blobs.setdefault(hashlib.sha256(b.data).hexdigest(), (str(b.arch) if b.kind == "cubin" else "", b.data))
    raw = sum(len(d) for _, d in blobs.values())
    print(f"{name}: {len(bundle)} specializations, {len(bundle.families())} families, {len(blobs)} distinct binaries\n")
    rows = [("binaries, raw (distinct cubins/PTX as compiled)", raw), ("bundle (.kpack)", a.bundle.stat().st_size)]
    if a.library:
        rows.append((f"C library ({a.library.name})", a.library.stat().st_size))
    one, parts = wheel_sizes(a.bundle, name)
    rows.append(("wheel (kernelpack wheel)", one))
    rows += [(f"--split arch: {fname}", size) for fname, size in parts]
    rows.append(("--split arch: all wheels", sum(s for _, s in parts)))
    cubins = [(arch, d) for arch, d in blobs.values() if arch]
    for mode in ("size", "default"):
        size = fatbin_size(cubins, mode)
        if size is not None:
            rows.append((f"the cubins as one fatbin, fatbinary --compress-all --compress-mode={mode}", size))
    print("| form | bytes | size |\n|---|---:|---:|")
    for label, n in rows:
        print(f"| {label} | {n:,} | {mib(n)} |")

    zl = [(zlib.compress(d, 9), len(d)) for _, d in blobs.values()]
    try:
        import zstandard
    except ImportError:
        zs = None
    else:
        cctx = zstandard.ZstdCompressor(level=19)
        zs = [(cctx.compress(d), len(d)) for _, d in blobs.values()]
    z_ms, zs_ms = c_decode_ms(zl, zs, a.rounds)
    libz_ms = _median(lambda: [zlib.decompress(c) for c, _ in zl], a.rounds)
    print(f"\nEach distinct binary compressed alone; expanding all {mib(raw)} once in C (median of {a.rounds}):\n")
    print("| codec | stored | of raw | C decode | throughput |\n|---|---:|---:|---:|---:|")
    print(f"| zlib 9 (kp_inflate.c) | {mib(sum(len(s) for s, _ in zl))} | "
          f"{sum(len(s) for s, _ in zl) / raw:.1%} | {z_ms:.1f} ms | {raw / 2**20 / z_ms * 1e3:.0f} MiB/s |")
    print(f"| zlib 9 (system zlib, as the Python runtime expands it) | same | same | {libz_ms:.1f} ms | "
          f"{raw / 2**20 / libz_ms * 1e3:.0f} MiB/s |")
    if zs is not None:
        dec = f"{zs_ms:.1f} ms | {raw / 2**20 / zs_ms * 1e3:.0f} MiB/s" if zs_ms else "- | -"
        print(f"| zstd 19 (libzstd) | {mib(sum(len(s) for s, _ in zs))} | {sum(len(s) for s, _ in zs) / raw:.1%} | "
              f"{dec} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
