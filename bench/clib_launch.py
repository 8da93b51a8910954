"""Benchmark of generated C libraries. Prints a markdown table.

    python3 bench/clib_launch.py [--kernels 1000] [--arch sm_90a]

On a GPU machine: per-launch host cost of the generated typed wrapper and family entries vs a raw cuLaunchKernel
loop on the same cubin (queued behind a spin kernel, and steady state), dispatch over 8 specializations and over 64
shape-range specializations, and the
cold start (dlopen + first launch) of a library of N kernels. Everywhere: the time to build that N-cubin library
and its size vs the cubins' bytes. Needs nvcc/ptxas and a C compiler; no Python GPU packages.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.clib import Library, read_embedded_bundle
from kernelpack.core.abi import Abi, DType, Param, Pointer, Scalar
from kernelpack.core.binary import Binary
from kernelpack.core.cache import CompileCache

HERE = Path(__file__).parent
NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
PTXAS = shutil.which("ptxas") or str(Path(NVCC).parent / "ptxas")
CC = os.environ.get("CC", "cc")

BENCH_CU = r"""
extern "C" __global__ void noop(float* a, const float* b, const float* c, int n) {
    if (n < 0) a[threadIdx.x] = b[threadIdx.x] + c[threadIdx.x];
}
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
}
"""
ONE_CU = r"""
extern "C" __global__ void k_TEMPLATE(float* out) { out[threadIdx.x] = 1234.5f * threadIdx.x; }
"""


def device_arch() -> str | None:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    count, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if cuda.cuInit(0) or cuda.cuDeviceGetCount(ctypes.byref(count)) or count.value == 0:
        return None
    cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, 0)
    cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, 0)
    return f"sm_{major.value}{minor.value}{'a' if major.value >= 9 else ''}"


def cubin(src: str, arch: str, tmp: Path, name: str) -> bytes:
    cu, out = tmp / f"{name}.cu", tmp / f"{name}.cubin"
    cu.write_text(src)
    subprocess.run([NVCC, "-cubin", f"-arch={arch}", str(cu), "-o", str(out)], check=True)
    return out.read_bytes()


def many_cubins(n: int, arch: str, tmp: Path) -> list[bytes]:
    """n distinct one-kernel cubins (k0 .. k{n-1}), from one PTX template assembled in parallel."""
    cu, ptx = tmp / "one.cu", tmp / "one.ptx"
    cu.write_text(ONE_CU)
    subprocess.run([NVCC, "-ptx", f"-arch={arch.replace('sm_', 'compute_')}", str(cu), "-o", str(ptx)], check=True)
    text = ptx.read_text()

    def one(i: int) -> bytes:
        p, c = tmp / f"k{i}.ptx", tmp / f"k{i}.cubin"
        p.write_text(text.replace("k_TEMPLATE", f"k{i}").replace("0f449A5000", f"0f{0x449A5000 + i:08X}"))
        subprocess.run([PTXAS, f"-arch={arch}", str(p), "-o", str(c)], check=True)
        return c.read_bytes()

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        return list(pool.map(one, range(n)))


def big_library(n: int, arch: str, tmp: Path) -> tuple[dict[str, float], Path]:
    t0 = time.perf_counter()
    cubins = many_cubins(n, arch, tmp)
    t1 = time.perf_counter()
    abi = Abi((Param("out", Pointer(DType.f32)),))
    arts = [KernelArtifact(f"k{i}", f"k{i}", abi, (Binary(arch, c),)) for i, c in enumerate(cubins)]
    t2 = time.perf_counter()
    res = Library("big", *arts).build(tmp / "big", cache=CompileCache(None))  # a cold build: no cached object
    t3 = time.perf_counter()
    total = sum(map(len, cubins))
    stripped = tmp / "libbig.stripped.so"
    subprocess.run(["strip", "--strip-all", str(res.shared), "-o", str(stripped)], check=True)
    embedded = {b.sha256: b for a in read_embedded_bundle(res.shared) for b in a.binaries}
    stored = sum(min(len(b.zlib), len(b.data)) for b in embedded.values())  # the cubins as the library holds them
    return {"cubins": n, "compile_s": t1 - t0, "artifacts_s": t2 - t1, "build_s": t3 - t2, "cubin_bytes": total,
            "stored_bytes": stored, "so_bytes": res.shared.stat().st_size, "stripped_bytes": stripped.stat().st_size,
            "a_bytes": res.static.stat().st_size}, res.shared


def launch_library(arch: str, tmp: Path) -> tuple[Path, Path]:
    data = cubin(BENCH_CU, arch, tmp, "bench")
    f32 = DType.f32
    abi = [Param("a", Pointer(f32)), Param("b", Pointer(f32, True)), Param("c", Pointer(f32, True))]
    arts = [KernelArtifact("noop", "noop", Abi((*abi, Param("n", Scalar(DType.i32)))), (Binary(arch, data),))]
    for d in (128, 64, 32, 16, 8, 4, 2, 1):
        arts.append(KernelArtifact("noop8", "noop", Abi((*abi, Param("n", Scalar(DType.i32), d))),
                                   (Binary(arch, data),), variant=f"d{d}"))
    for i in range(64):  # shape-range dispatch: 64 disjoint ranges of n
        arts.append(KernelArtifact("range64", "noop", Abi((*abi, Param("n", Scalar(DType.i32)))),
                                   (Binary(arch, data),), variant=f"r{i}",
                                   ranges=[f"n in [{64 * i + 1}, {64 * i + 64}]"]))
    res = Library("bench", *arts).build(tmp / "benchlib")
    exe = tmp / "clib_bench"
    subprocess.run([CC, "-std=c99", "-O2", f"-I{res.include_dir}", str(HERE / "clib_bench.c"), "-o", str(exe),
                    f"-L{res.lib_dir}", "-lbench", f"-Wl,-rpath,{res.lib_dir}", "-ldl"], check=True)
    (tmp / "bench.cubin").write_bytes(data)
    return exe, tmp / "bench.cubin"


def _spread(v: list[float], fmt: str = "{:.3f}") -> str:
    return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))})"


def launch_rows(out: str) -> list[tuple[str, str, str]]:
    """Rows from clib_bench's interleaved output: per repetition the median over rounds of each case, then the
    median and range (min–max) over repetitions of each ratio."""
    queued: dict[tuple[int, str], list[float]] = {}
    steady: dict[tuple[int, str], float] = {}
    for line in out.splitlines():
        kind, rep, name, value = line.split()
        if kind == "queued_ns":
            queued.setdefault((int(rep), name), []).append(float(value))
        else:
            steady[(int(rep), name)] = float(value)
    reps = sorted({r for r, _ in queued})
    q = {(r, n): statistics.median(v) for (r, n), v in queued.items()}

    def per_rep(f) -> list[float]:  # type: ignore[no-untyped-def]
        return [f(r) for r in reps]

    raw_ns = per_rep(lambda r: q[(r, "raw")])
    return [
        (f"raw cuLaunchKernel, host ns/launch (queued behind a spin kernel; median (range) of {len(reps)} "
         f"interleaved repetitions)", _spread(raw_ns, "{:.0f}") + " ns", ""),
        ("typed wrapper / raw (queued)", _spread(per_rep(lambda r: q[(r, "typed")] / q[(r, "raw")])) + "×", "≤ 1.02×"),
        ("family entry, 1 specialization / raw (queued)",
         _spread(per_rep(lambda r: q[(r, "family1")] / q[(r, "raw")])) + "×", ""),
        ("dispatch over 8 specializations (family8 − typed8, queued)",
         _spread(per_rep(lambda r: q[(r, "family8")] - q[(r, "typed8")]), "{:+.0f}") + " ns", "≤ 50 ns"),
        ("dispatch over 64 range specializations (familyr64 − typedr64, queued; n fits the last)",
         _spread(per_rep(lambda r: q[(r, "familyr64")] - q[(r, "typedr64")]), "{:+.0f}") + " ns", "≤ 100 ns"),
        ("steady state typed / raw (back to back, GPU-bound)",
         _spread(per_rep(lambda r: steady[(r, "typed")] / steady[(r, "raw")])) + "×", "≤ 1.02×"),
        ("steady state raw / typed / family8, ns per launch (medians)",
         " / ".join(f"{statistics.median(per_rep(lambda r, n=n: steady[(r, n)])):.0f}"
                    for n in ("raw", "typed", "family8")), ""),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1000)
    ap.add_argument("--arch", default=None, help="target arch (default: the GPU's, else sm_90a)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    gpu = device_arch()
    arch = args.arch or gpu or "sm_90a"
    tmp = Path(tempfile.mkdtemp(prefix="kp-bench-"))
    rows: list[tuple[str, str, str]] = []
    try:
        big, big_so = big_library(args.kernels, arch, tmp)
        over = big["so_bytes"] - big["cubin_bytes"]
        rows += [
            (f"build a {args.kernels}-cubin library (generate + cc + ar)", f"{big['build_s']:.2f} s", "≤ 5 s"),
            (f"  (making the {args.kernels} artifacts: cubin parse + ABI verify)", f"{big['artifacts_s']:.2f} s", ""),
            ("libbig.so size vs cubins", f"{big['so_bytes']:,} B = {big['so_bytes'] / big['cubin_bytes']:.2f}× the "
             f"cubins' {big['cubin_bytes']:,} B ({'within' if over <= 64 * 1024 else 'over'} cubins + 64 KiB)",
             "≤ cubins + 64 KiB"),
            ("  cubins as stored (zlib) / everything else", f"{big['stored_bytes']:,} B / "
             f"{(big['so_bytes'] - big['stored_bytes']) / 1024:.1f} KiB "
             f"({(big['so_bytes'] - big['stored_bytes']) / args.kernels:.0f} B/kernel)", ""),
            ("  the same library after `strip --strip-all`", f"{big['stripped_bytes']:,} B", ""),
            ("libbig.a size", f"{big['a_bytes']:,} B", ""),
        ]
        if gpu:
            exe, cub = launch_library(arch, tmp)
            out = subprocess.run([str(exe), "launch", str(cub)], capture_output=True, text=True, check=True).stdout
            rows += launch_rows(out)
            colds = []
            for _ in range(5):
                r = subprocess.run([str(exe), "cold", str(big_so), f"big_k{args.kernels // 2}"], capture_output=True,
                                   text=True, check=True).stdout.split()
                colds.append(float(r[1]))
            rows.append((f"cold start: dlopen + first launch, {args.kernels}-kernel library (median of 5)",
                         f"{statistics.median(colds):.2f} ms", "≤ 50 ms"))
        else:
            rows.append(("launch costs and cold start", "skipped: no GPU/driver here", ""))
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"kernelpack C library benchmark, arch {arch}, {'GPU' if gpu else 'no GPU'}\n")
    print("| measurement | result | target |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
