"""Loading at scale: ``import kernelpack`` + ``kernelpack.load`` of a bundle of N specializations, and the first
launch of one of its kernels (which builds its family: that time is shown apart too) against a warm launch, in a
fresh process each; the same for the C library (dlopen + first launch, from tests' fake or the real driver). Prints
a markdown table.

    python bench/load_scale.py [--shapes 10000:1000 10000:100 100:10:19] [--arch sm_90a] [--fake DIR] [--rounds 5]
                               [--no-bytecode]

The bundle is synthesized cheaply: one small kernel compiled once, replicated as ``families`` families of
``specs / families`` specializations each, told apart by the divisibility of ``n`` (1, 2, 4, ...; past 2**30 a
device requirement on the SM count too), so dispatch is real and every specialization is distinct (they share one
cubin, so the first launch pays one cubin's parse and load, as a real family's first launch does). A shape's third
field picks the kernel: 2 parameters (``k(float* out, int n)``, the default) or 19 (8 pointers, 8 ints, 2 floats and
a 64-bit int, as kernels of the corpus take; specializations also differ in their pointers' alignment and another
int's divisibility, so each one parses more distinct parameters, as a real family's do).

With no GPU (or ``--fake DIR``, a directory holding tests' fake ``libcuda.so.1`` and
``libkpfakecuda.so``; built into a temp directory when not given) it runs on the fake driver: the numbers then
measure kernelpack's own host work, not the driver's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

KERNEL = 'extern "C" __global__ void k(float* out, int n) { if (threadIdx.x < n) out[threadIdx.x] = 1.0f; }\n'
_PARAMS19 = ", ".join([f"float* p{i}" for i in range(8)] + [f"int n{i}" for i in range(8)])
KERNEL19 = (f'extern "C" __global__ void k({_PARAMS19}, float a, float b, long long c) '
            '{ if (threadIdx.x < n0) p0[threadIdx.x] = a + b + (float)c; }\n')


def synth_bundle(out: Path, specs: int, families: int, arch: str, nparams: int = 2) -> Path:
    """A bundle of ``specs`` specializations in ``families`` families (``k0``, ``k1``, ...) from one compile of one
    small kernel (cached in ``out``) of ``nparams`` parameters (2 or 19): every specialization launches that
    cubin's entry."""
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.core.abi import Abi
    from kernelpack.core.cache import CompileCache
    from kernelpack.frontends.cuda import compile as cuda

    tag = "" if nparams == 2 else f"-p{nparams}"
    path = out / f"synth-{specs}-{families}-{arch}{tag}.kpack"
    if path.exists():
        return path
    if nparams not in (2, 19):
        raise SystemExit(f"--shapes: a kernel of 2 or 19 parameters, not {nparams}")
    src = out / f"synth{tag}.cu"
    src.write_text(KERNEL if nparams == 2 else KERNEL19)
    first = "n" if nparams == 2 else "n0"
    (base,) = cuda.compile(src, ["k"], arch=[arch], cache=CompileCache(out / "cache"))
    per = -(-specs // families)
    arts = []
    for f in range(families):
        for v in range(per):
            if len(arts) == specs:
                break
            params = tuple(dataclasses.replace(p, divisibility=_divisibility(p.name, first, v))
                           for p in base.abi.params)
            extra = {"requires": {"sm_count": 1 + v // 31}} if v >= 31 else {}
            arts.append(dataclasses.replace(base, name=f"k{f}", variant=f"v{v}", abi=Abi(params), **extra))
    Bundle.of(arts).write(path)
    return path


def _divisibility(name: str, first: str, v: int) -> int:
    """Specialization ``v``'s divisibility of parameter ``name`` (``first``: the one dispatch tells them apart by)."""
    if name == first:
        return 2 ** (v % 31)
    if name.startswith("p"):  # the 19-parameter kernel: odd variants take 16-byte aligned pointers
        return 16 if v % 2 else 1
    if name == f"n{1 + v % 7}":  # ... and one more int a multiple of 2
        return 2
    return 1


PY_CHILD = r"""
import sys, time, json
t0 = time.perf_counter()
import kernelpack
from kernelpack.runtime import driver
if sys.argv[2]:
    driver.use_library(sys.argv[2])
t1 = time.perf_counter()
mod = kernelpack.load(sys.argv[1])
t2 = time.perf_counter()
d = driver.get()
d.set_current(d.device(0).context)
buf = d.mem_alloc_async(1 << 20, 0, "bench")
t3 = time.perf_counter()
fam = mod[sys.argv[3]]  # the family's first use builds it (its artifacts, dispatch plans, docs)
t3b = time.perf_counter()
args = (buf, 1) if sys.argv[4] == "2" else (*[buf] * 8, 1, *[16] * 7, 1.0, 2.0, 3)
fam(*args, grid=1, block=32)
t4 = time.perf_counter()
warm = []
for _ in range(200):
    s = time.perf_counter(); fam(*args, grid=1, block=32); warm.append(time.perf_counter() - s)
warm.sort()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "build": t3b - t3, "first": t4 - t3,
                  "warm": warm[len(warm) // 2]}))
"""


def run_python(bundle: Path, lib: str, family: str, env: dict[str, str], nparams: int = 2) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", PY_CHILD, str(bundle), lib, family, str(nparams)], env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"python child failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


COLD_C = r"""
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "synth.h"
typedef int (*fn_i)(unsigned);
typedef int (*fn_get)(int*, int);
typedef int (*fn_ctx)(void**, int);
typedef int (*fn_set)(void*);
typedef int (*fn_alloc)(unsigned long long*, size_t);
typedef int (*fn_sync)(void);
/* cold LIB.so KERNEL [alloc]: dlopen + first launch of KERNEL, timed; "alloc" (a real GPU) first initialises the
   driver and allocates the buffer the kernel writes, as bench/clib_bench.c does, outside the timed part. */
int main(int argc, char** argv) {
    struct timespec t0, t1;
    unsigned long long buf = 0x10000;
    fn_sync sync = NULL;
    if (argc < 4) return 2;
    if (argc > 4 && !strcmp(argv[4], "alloc")) {
        void* cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        int dev = 0;
        void* ctx = NULL;
        if (!cu) return fprintf(stderr, "%s\n", dlerror()), 1;
        fn_i init = (fn_i)dlsym(cu, "cuInit");
        fn_get get = (fn_get)dlsym(cu, "cuDeviceGet");
        fn_ctx retain = (fn_ctx)dlsym(cu, "cuDevicePrimaryCtxRetain");
        fn_set set = (fn_set)dlsym(cu, "cuCtxSetCurrent");
        fn_alloc alloc = (fn_alloc)dlsym(cu, "cuMemAlloc_v2");
        sync = (fn_sync)dlsym(cu, "cuCtxSynchronize");
        if (!init || !get || !retain || !set || !alloc || !sync)
            return fprintf(stderr, "libcuda.so.1 lacks a driver entry point this harness needs\n"), 1;
        if (init(0) || get(&dev, 0) || retain(&ctx, dev) || set(ctx) || alloc(&buf, 1 << 20))
            return fprintf(stderr, "driver setup failed\n"), 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    void* h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!h) return fprintf(stderr, "%s\n", dlerror()), 1;
    kp_status (*fn)(const kp_launch*, float*) = (kp_status (*)(const kp_launch*, float*))dlsym(h, argv[3]);
    if (!fn) return fprintf(stderr, "no %s\n", argv[3]), 1;
    const kp_launch L = {{1, 1, 1}, {32, 1, 1}, 0, {0, 0, 0}, NULL, 0};
    kp_status s = fn(&L, (float*)(uintptr_t)buf);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (sync && sync()) return fprintf(stderr, "kernel failed\n"), 1;
    printf("cold_ms %.3f status %d\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e6, (int)s);
    return s != KP_SUCCESS;
}
"""


def clib_cold(work: Path, n: int, arch: str, env: dict[str, str], rounds: int, gpu: bool) -> float:
    """Median ms of dlopen + first launch of kernel ``synth_k{n/2}`` of an ``n``-kernel C library (one cubin, ``n``
    families of one specialization each), timed as bench/clib_bench.c's ``cold`` mode times it."""
    sys.path.insert(0, str(HERE))
    import clib_launch  # type: ignore[import-not-found]

    from kernelpack.bundle.artifact import KernelArtifact
    from kernelpack.clib import Library
    from kernelpack.core.abi import Abi, DType, Param, Pointer
    from kernelpack.core.binary import Binary
    from kernelpack.core.cache import CompileCache

    tmp = work / f"clib-{n}-{arch}"
    tmp.mkdir(exist_ok=True)
    so = tmp / "synth" / "lib" / "libsynth.so"
    if not so.exists():
        data = clib_launch.cubin('extern "C" __global__ void k(float* out) { out[threadIdx.x] = 1.0f; }', arch, tmp,
                                 "one")
        abi = Abi((Param("out", Pointer(DType.f32)),))
        arts = [KernelArtifact(f"k{i}", "k", abi, (Binary(arch, data),)) for i in range(n)]
        so = Library("synth", *arts).build(tmp / "synth", cache=CompileCache(None)).shared
    exe = tmp / "cold"
    if not exe.exists():
        (tmp / "cold.c").write_text(COLD_C)
        subprocess.run([clib_launch.CC, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror",
                        f"-I{so.parent.parent / 'include'}", str(tmp / "cold.c"), "-o", str(exe), "-ldl"], check=True)
    times = []
    for _ in range(rounds):
        cmd = [str(exe), "cold", str(so), f"synth_k{n // 2}", *(["alloc"] if gpu else [])]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"clib_bench cold failed: {r.stderr}{r.stdout}")
        times.append(float(r.stdout.split()[1]))
    return statistics.median(times)


def build_fake(out: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    import fake_cuda  # type: ignore[import-not-found]

    return fake_cuda.build(out / "fakecuda").dir


def has_gpu() -> bool:
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    n = ctypes.c_int()
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(n)) == 0 and n.value > 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["100:10", "1000:100", "10000:1000", "10000:100"],
                    help="SPECS:FAMILIES[:PARAMS] per row (PARAMS: the kernel's, 2 or 19; default 2)")
    ap.add_argument("--arch", default=None)
    ap.add_argument("--fake", type=Path, default=None, help="directory of tests' built fake driver")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clib", type=int, nargs="*", default=[1000, 10000], help="C library sizes (kernels) to time")
    ap.add_argument("--work", type=Path, default=None, help="where to keep the synthesized bundles")
    ap.add_argument("--no-bytecode", action="store_true", help="compile every module from source in every child "
                    "(as under PYTHONDONTWRITEBYTECODE=1 with no __pycache__)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))  # synthesize with this checkout's kernelpack, as the children load with
    work = args.work or Path(tempfile.mkdtemp(prefix="kp-loadscale-"))
    work.mkdir(parents=True, exist_ok=True)
    gpu = args.fake is None and has_gpu()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    if args.no_bytecode:  # every module compiled from source in every child: no bytecode read or written
        env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(work / "no-pycache"))
    else:  # as an installed package runs: bytecode cached (under the work dir; the warm-up round writes it)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    lib = ""
    if not gpu:
        fake = args.fake or build_fake(work)
        lib = str(fake / "libkpfakecuda.so")
        env.update(LD_LIBRARY_PATH=str(fake), FAKECUDA_CC="9.0")
    arch = args.arch or ("sm_90a" if not gpu else None)
    if arch is None:
        from kernelpack.runtime import driver

        info = driver.get().device(0)
        arch = f"sm_{info.major}{info.minor}{'a' if info.major >= 9 else ''}"
    where = (f"{'GPU' if gpu else 'fake driver'}, {platform.node()}, {os.cpu_count()} CPUs, "
             f"Python {platform.python_version()}, bytecode {'not cached' if args.no_bytecode else 'cached'}")
    day = time.strftime("%Y-%m-%d", time.gmtime())
    print(f"# kernelpack.load at scale ({where}, {day}), median of {args.rounds}\n")
    print("| specializations | families | params | bundle size | import kernelpack | load | import + load "
          "| first launch (family build in it) | warm launch | first - warm |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for shape in args.shapes:
        n, fams, nparams = ([int(x) for x in shape.split(":")] + [2])[:3]
        path = synth_bundle(work, n, fams, arch, nparams)
        run_python(path, lib, f"k{fams // 2}", env, nparams)  # warm-up: writes the bytecode, warms the page cache
        rows = [run_python(path, lib, f"k{fams // 2}", env, nparams) for _ in range(args.rounds)]
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(f"| {n:,} | {fams:,} | {nparams} | {path.stat().st_size / 1024:.0f} KiB | {med['import'] * 1e3:.1f} ms "
              f"| {med['load'] * 1e3:.1f} ms | {(med['import'] + med['load']) * 1e3:.1f} ms "
              f"| {med['first'] * 1e3:.2f} ms ({med['build'] * 1e3:.2f} ms) | {med['warm'] * 1e6:.1f} us "
              f"| {(med['first'] - med['warm']) * 1e3:.2f} ms |")
    if args.clib:
        print(f"\n| C library: kernels | dlopen + first launch (median of {args.rounds}) |")
        print("|---:|---:|")
        for n in args.clib:
            print(f"| {n:,} | {clib_cold(work, n, arch, env, args.rounds, gpu):.3f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
