"""Per-launch host cost of kernelpack's Python runtime against raw C and the Python launch paths people use.

One process, one kernel for every row: a Triton kernel ``add(a, b, c, n)`` (three float tensors and an int, plus
Triton's two hidden scratch pointers) compiled once by Triton's JIT; every other row launches that same cubin.

* host-only: each batch of launches is queued behind a long spin kernel, so the GPU never throttles submission
  and the time is the host's alone (a batch is counted only if the spin kernel was still running at its end);
* steady state: back-to-back launches of the tiny kernel with the GPU working, until a final synchronize.

Rows are interleaved round by round (the starting row rotated), so drift hits every row alike; each row reports
the median over its rounds, the p25-p75 spread, and the "paired" ratio: the median over rounds of the row's time
over raw C's time in the same round (less sensitive to a noisy host than the ratio of medians). The measuring
thread is pinned to one CPU (after CUDA is initialised, so the driver's own threads keep theirs); --no-pin keeps
it free.

Also: ``import kernelpack`` + ``kernelpack.load`` + first launch of a 100-kernel bundle, in a fresh process.

    python bench/launch_overhead.py [--artifacts .gpu/runtime] [--json out.json]

Needs a GPU, torch and triton; cuda-core, cuda-bindings and cupy rows are skipped when those are missing.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

RAW_C = r"""
#include <dlfcn.h>
#include <stdint.h>
#include <time.h>
typedef int (*launch_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                        void**);
typedef int (*gpa_t)(const char*, void**, int, unsigned long long, int*);
static launch_t launch;
int kb_init(void) {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
    int st = 0;
    return gpa && gpa("cuLaunchKernel", (void**)&launch, 12000, 0, &st) == 0 && st == 0 ? 0 : -2;
}
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
/* count launches of f(a, b, c, n, NULL, NULL); elapsed ns, or -CUresult */
double kb_loop(void* f, uint64_t a, uint64_t b, uint64_t c, int n, unsigned grid, unsigned block, void* stream,
               int count) {
    void *s0 = 0, *s1 = 0;
    double t0 = now();
    for (int i = 0; i < count; i++) {
        void* params[6] = {&a, &b, &c, &n, &s0, &s1};
        int r = launch(f, grid, 1, 1, block, 1, 1, 0, stream, params, 0);
        if (r) return -r;
    }
    return now() - t0;
}
/* launches of f with n parameters, each one 8-byte slot of store (packed little-endian, low bytes first); the
 * kernelParams array is built per launch as a C caller writes it */
double kb_loopv(void* f, uint64_t* store, int n, unsigned grid, unsigned block, void* stream, int count) {
    double t0 = now();
    for (int i = 0; i < count; i++) {
        void* params[64];
        for (int j = 0; j < n; j++) params[j] = &store[j];
        int r = launch(f, grid, 1, 1, block, 1, 1, 0, stream, n ? params : 0, 0);
        if (r) return -r;
    }
    return now() - t0;
}
/* the same, plus the cuCtxGetCurrent a context-safe launcher makes per launch */
typedef int (*getctx_t)(void**);
static getctx_t getctx;
int kb_init_ctx(void) {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    gpa_t gpa = h ? (gpa_t)dlsym(h, "cuGetProcAddress_v2") : 0;
    int st = 0;
    return gpa && gpa("cuCtxGetCurrent", (void**)&getctx, 12000, 0, &st) == 0 && st == 0 ? 0 : -2;
}
double kb_loop_ctx(void* f, uint64_t a, uint64_t b, uint64_t c, int n, unsigned grid, unsigned block, void* stream,
                   int count) {
    void *s0 = 0, *s1 = 0, *ctx = 0;
    double t0 = now();
    for (int i = 0; i < count; i++) {
        void* params[6] = {&a, &b, &c, &n, &s0, &s1};
        if (getctx(&ctx) || !ctx) return -1;
        int r = launch(f, grid, 1, 1, block, 1, 1, 0, stream, params, 0);
        if (r) return -r;
    }
    return now() - t0;
}
"""

N_ELEMS = 4096
BLOCK_ELEMS = 1024
BATCH = 200  # launches per host-only batch (well under the driver's queue depth)
REPS = 120  # host-only batches per row, rows interleaved round by round (start rotated each round)
WARMUP = 3
STEADY = 3000
STEADY_REPS = 9  # steady-state runs per row, interleaved too
SPIN_CYCLES = 30_000_000  # ~15 ms at 2 GHz: far longer than any batch


def triton_kernel():  # type: ignore[no-untyped-def]
    import triton
    import triton.language as tl

    @triton.jit
    def add(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)

    return add


def artifact_from_triton(ck):  # type: ignore[no-untyped-def]
    """A kernelpack artifact of the Triton-compiled cubin (what a Triton frontend records)."""
    from kernelpack.bundle.artifact import KernelArtifact, Provenance
    from kernelpack.core.abi import Abi, DType, Param, Pointer, Scalar
    from kernelpack.core.binary import Binary
    from kernelpack.core.cubin import read_cubin
    from kernelpack.core.launchspec import LaunchSpec

    cubin = ck.asm["cubin"]
    name = ck.metadata.name
    c = read_cubin(cubin)
    nparams = len(c.kernel(name).params)
    params = [Param(p, Pointer(DType.f32), 16) for p in ("a", "b", "c")] + [Param("n", Scalar(DType.i32), 16)]
    roles = ["global_scratch", "profile_scratch"]
    params += [Param(roles[i], Pointer(), role=roles[i]) for i in range(nparams - 4)]
    shared = int(getattr(ck.metadata, "shared", 0) or 0)
    import triton

    return KernelArtifact("add", name, Abi(tuple(params)), (Binary(c.arch, cubin),),
                          LaunchSpec(block=(32 * ck.metadata.num_warps, 1, 1), dynamic_smem=shared or None),
                          Provenance("triton", triton.__version__))


def host_batch(run, spin, stream, torch):  # type: ignore[no-untyped-def]
    """ns per launch of one batch queued behind a spin kernel; None when the GPU caught up before it ended."""
    spin()
    ev = torch.cuda.Event()
    ev.record(stream)
    t0 = time.perf_counter_ns()
    inner = run(BATCH)
    t1 = time.perf_counter_ns()
    caught_up = ev.query()
    stream.synchronize()
    return None if caught_up else (inner if inner is not None else t1 - t0) / BATCH


def steady_batch(run, stream):  # type: ignore[no-untyped-def]
    stream.synchronize()
    t0 = time.perf_counter_ns()
    run(STEADY)
    stream.synchronize()
    return (time.perf_counter_ns() - t0) / STEADY


RAW_ROW = "raw C cuLaunchKernel (same process)"


def measure(candidates, spin, stream, torch, refs=None):  # type: ignore[no-untyped-def]
    """Every row's batches interleaved round by round (start rotated), so drift hits all rows alike. ``refs``: the
    raw-C row each row's paired ratio is taken against (default RAW_ROW)."""
    refs = refs or {}
    host: dict[str, list[float]] = {name: [] for name, _ in candidates}
    rounds: dict[str, dict[int, float]] = {name: {} for name, _ in candidates}
    late: dict[str, int] = {name: 0 for name, _ in candidates}
    steady: dict[str, list[float]] = {name: [] for name, _ in candidates}
    for rnd in range(WARMUP + REPS):
        k = rnd % len(candidates)
        for name, run in candidates[k:] + candidates[:k]:
            t = host_batch(run, spin, stream, torch)
            if rnd < WARMUP:
                continue
            if t is None:
                late[name] += 1
            else:
                host[name].append(t)
                rounds[name][rnd] = t
    for rnd in range(STEADY_REPS):
        k = rnd % len(candidates)
        for name, run in candidates[k:] + candidates[:k]:
            steady[name].append(steady_batch(run, stream))
    out = {}
    for name, _ in candidates:
        h, st = host[name], steady[name]
        raw = rounds.get(refs.get(name, RAW_ROW), {})
        paired = [t / raw[r] for r, t in rounds[name].items() if r in raw]  # this row over raw C, same round
        diff = [t - raw[r] for r, t in rounds[name].items() if r in raw]  # ns above raw C, same round
        out[name] = {"host": {"median": statistics.median(h), "min": min(h), "p25": _quantile(h, 0.25),
                              "p75": _quantile(h, 0.75), "late": late[name], "n": len(h),
                              "paired": statistics.median(paired) if paired else None,
                              "paired_diff": statistics.median(diff) if diff else None} if h else None,
                     "steady": statistics.median(st), "steady_p25": _quantile(st, 0.25),
                     "steady_p75": _quantile(st, 0.75)}
    return out


def _quantile(xs: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    ys = sorted(xs)
    pos = q * (len(ys) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ys) - 1)
    return ys[lo] + (ys[hi] - ys[lo]) * (pos - lo)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--artifacts", default=os.environ.get("KERNELPACK_GPU_ARTIFACTS", ".gpu") + "/runtime")
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-pin", action="store_true", help="do not pin the measuring thread to one CPU")
    ap.add_argument("--launchcost", default=os.environ.get("KERNELPACK_GPU_ARTIFACTS", ".gpu") + "/launchcost",
                    help="the argument-count kernels (scripts/gpu.py prepare launchcost); rows skipped when absent")
    ap.add_argument("--no-counts", action="store_true", help="skip the argument-count rows")
    args = ap.parse_args()
    art_dir = Path(args.artifacts)
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/argcount.py

    import numpy as np
    import torch

    import kernelpack
    from kernelpack.bundle.kpack import Bundle

    torch.cuda.init()
    torch.cuda.synchronize()
    pinned = None
    if not args.no_pin and hasattr(os, "sched_setaffinity"):
        pinned = max(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {pinned})  # this thread only: threads the driver started keep their CPUs
    print(f"measuring thread pinned to CPU {pinned}" if pinned is not None else "measuring thread not pinned")
    dev = torch.device("cuda", 0)
    stream = torch.cuda.Stream(device=dev)
    torch.cuda.set_stream(stream)
    sh = stream.cuda_stream
    a = torch.randn(N_ELEMS, device=dev)
    b = torch.randn(N_ELEMS, device=dev)
    c = torch.empty(N_ELEMS, device=dev)
    grid = N_ELEMS // BLOCK_ELEMS

    add = triton_kernel()
    ck = add[(grid,)](a, b, c, N_ELEMS, BLOCK=BLOCK_ELEMS)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b), "triton add is wrong"
    art = artifact_from_triton(ck)
    block = art.launch.block[0]
    tmp = Path(tempfile.mkdtemp())
    cubin_path = tmp / "add.cubin"
    cubin_path.write_bytes(ck.asm["cubin"])

    spin_mod = kernelpack.load(art_dir / "bench.kpack")
    import dataclasses

    # the same cubin with a grid formula (what a CuTe kernel-level artifact records): ceil_div(n, BLOCK_ELEMS)
    rule = dataclasses.replace(art, name="add_rule", launch=dataclasses.replace(
        art.launch, grid=(("ceil_div", ("arg", "n", None), BLOCK_ELEMS), 1, 1)))
    kp = kernelpack.load(Bundle((art, rule)))
    k, k_rule = kp.add, kp.add_rule

    def spin() -> None:
        spin_mod.spin(SPIN_CYCLES, grid=1, block=1, stream=sh)

    candidates: list[tuple[str, object]] = []
    notes: dict[str, str] = {}

    def add_row(name: str, run, check: bool = True) -> None:  # type: ignore[no-untyped-def]
        """Keep a row whose launch computes the right result."""
        try:
            c.zero_()
            torch.cuda.synchronize()
            run(1)
            torch.cuda.synchronize()
            if check and not torch.equal(c, a + b):
                raise RuntimeError("wrong result")
            candidates.append((name, run))
        except Exception as e:  # noqa: BLE001 - report the row as failed, keep going
            notes[name] = f"{type(e).__name__}: {e}"[:300]
            print(f"  {name}: {notes[name]}", flush=True)

    # raw C
    so = tmp / "rawc.so"
    (tmp / "rawc.c").write_text(RAW_C)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(tmp / "rawc.c"), "-o", str(so), "-ldl"], check=True)
    raw = ctypes.CDLL(str(so))
    raw.kb_loop.restype = ctypes.c_double
    raw.kb_loop.argtypes = (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int,
                            ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_int)
    assert raw.kb_init() == 0
    k(a, b, c, N_ELEMS, grid=grid)  # loads the kernel
    handle = k.family.device_state(0).entries[0].kernel

    def raw_run(count: int) -> float:
        ns = raw.kb_loop(handle, a.data_ptr(), b.data_ptr(), c.data_ptr(), N_ELEMS, grid, block, sh, count)
        if ns < 0:
            raise RuntimeError(f"cuLaunchKernel failed: {-ns}")
        return ns

    add_row(RAW_ROW, raw_run)
    raw.kb_loop_ctx.restype = ctypes.c_double
    raw.kb_loop_ctx.argtypes = raw.kb_loop.argtypes
    assert raw.kb_init_ctx() == 0

    def raw_ctx_run(count: int) -> float:
        ns = raw.kb_loop_ctx(handle, a.data_ptr(), b.data_ptr(), c.data_ptr(), N_ELEMS, grid, block, sh, count)
        if ns < 0:
            raise RuntimeError(f"launch failed: {-ns}")
        return ns

    add_row("raw C + cuCtxGetCurrent per launch", raw_ctx_run)

    def kp_run(count: int) -> None:
        for _ in range(count):
            k(a, b, c, N_ELEMS, grid=grid)

    add_row("kernelpack (C extension, torch tensors, current stream)", kp_run)

    def kp_explicit(count: int) -> None:
        for _ in range(count):
            k(a, b, c, N_ELEMS, grid=grid, block=block, stream=sh)

    add_row("kernelpack (block and stream given)", kp_explicit)
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()

    def kp_ints(count: int) -> None:
        for _ in range(count):
            k(pa, pb, pc, N_ELEMS, grid=grid, stream=sh)

    add_row("kernelpack (int pointers, stream given)", kp_ints)

    def kp_rule(count: int) -> None:
        for _ in range(count):
            k_rule(a, b, c, N_ELEMS)

    add_row("kernelpack, grid from rule (LaunchSpec.grid)", kp_rule)
    from kernelpack.runtime import _launch

    def kp_gil(count: int) -> None:
        _launch.set_release_gil(False)
        try:
            for _ in range(count):
                k(a, b, c, N_ELEMS, grid=grid)
        finally:
            _launch.set_release_gil(True)

    add_row("diagnostic: kernelpack keeping the GIL", kp_gil)

    from kernelpack.runtime import fast

    saved = dict(fast._state)
    fast._state.update(ext=None, tried=True)
    kp_py = kernelpack.load(Bundle((art,))).add
    fast._state.clear()
    fast._state.update(saved)

    def kp_py_run(count: int) -> None:
        for _ in range(count):
            kp_py(a, b, c, N_ELEMS, grid=grid)

    add_row("kernelpack pure-Python fallback", kp_py_run)

    # torch's static launcher (what inductor uses for Triton kernels)
    try:
        SL = torch._C._StaticCudaLauncher
        shared = int(getattr(ck.metadata, "shared", 0) or 0)
        loaded = SL._load_kernel(str(cubin_path), ck.metadata.name, shared, 0)
        fn = loaded[1] if len(loaded) == 4 else loaded[0]  # (module, function, regs, spills) or (function, ...)
        tys = "OOOi" + "O" * (len(art.abi.params) - 4)
        extra = (None,) * (len(art.abi.params) - 4)
        nw = ck.metadata.num_warps

        def static_run(count: int) -> None:
            for _ in range(count):
                SL._launch_kernel(fn, grid, 1, 1, nw, shared, tys, (a, b, c, N_ELEMS, *extra), sh)

        add_row("torch _StaticCudaLauncher", static_run)
    except Exception as e:  # noqa: BLE001
        notes["torch _StaticCudaLauncher"] = f"{type(e).__name__}: {e}"[:300]

    # cuda.core
    try:
        try:
            from cuda.core import LaunchConfig, ObjectCode, Stream, launch
        except ImportError:
            from cuda.core.experimental import LaunchConfig, ObjectCode, Stream, launch
        kern = ObjectCode.from_cubin(ck.asm["cubin"]).get_kernel(ck.metadata.name)
        cstream = Stream.from_handle(sh)
        config = LaunchConfig(grid=grid, block=block)
        cargs = (a.data_ptr(), b.data_ptr(), c.data_ptr(), np.int32(N_ELEMS)) + (0,) * (len(art.abi.params) - 4)

        def core_run(count: int) -> None:
            for _ in range(count):
                launch(cstream, config, kern, *cargs)

        add_row("cuda.core launch (pre-converted args)", core_run)
    except Exception as e:  # noqa: BLE001
        notes["cuda.core launch (pre-converted args)"] = f"{type(e).__name__}: {e}"[:300]

    # cuda.bindings
    try:
        from cuda.bindings import driver as cu

        f = cu.CUfunction(int(handle))
        cs = cu.CUstream(sh)
        nh = len(art.abi.params) - 4
        types = (ctypes.c_void_p,) * 3 + (ctypes.c_int,) + (ctypes.c_void_p,) * nh

        def bindings_run(count: int) -> None:
            for _ in range(count):
                params = ((a.data_ptr(), b.data_ptr(), c.data_ptr(), N_ELEMS) + (0,) * nh, types)
                (err,) = cu.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, cs, params, 0)
                if err != cu.CUresult.CUDA_SUCCESS:
                    raise RuntimeError(str(err))

        add_row("cuda.bindings cuLaunchKernel", bindings_run)
    except Exception as e:  # noqa: BLE001
        notes["cuda.bindings cuLaunchKernel"] = f"{type(e).__name__}: {e}"[:300]

    # CuPy
    try:
        import cupy as cp

        mod = cp.RawModule(path=str(cubin_path))
        fn_cp = mod.get_function(ck.metadata.name)
        ca, cb, cc = cp.from_dlpack(a), cp.from_dlpack(b), cp.from_dlpack(c)
        nh = len(art.abi.params) - 4
        ext = cp.cuda.ExternalStream(sh)

        def cupy_run(count: int) -> None:
            with ext:
                for _ in range(count):
                    fn_cp((grid,), (block,), (ca, cb, cc, np.int32(N_ELEMS)) + (np.uint64(0),) * nh)

        add_row("CuPy RawModule kernel", cupy_run)
    except Exception as e:  # noqa: BLE001
        notes["CuPy RawModule kernel"] = f"{type(e).__name__}: {e}"[:300]

    # Triton's own JIT launch
    def triton_run(count: int) -> None:
        for _ in range(count):
            add[(grid,)](a, b, c, N_ELEMS, BLOCK=BLOCK_ELEMS)

    add_row("Triton JIT launch", triton_run)

    desc_fam = add_desc_rows(add_row, torch, sh, notes)

    refs: dict[str, str] = {}
    count_fams: dict[str, object] = {}
    count_dir = Path(args.launchcost)
    if not args.no_counts and (count_dir / "argcount.kpack").is_file():
        raw.kb_loopv.restype = ctypes.c_double
        raw.kb_loopv.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
                                 ctypes.c_void_p, ctypes.c_int)
        refs, count_fams = add_count_rows(add_row, raw, count_dir, tmp, sh, torch, np)
    elif not args.no_counts:
        notes["argument-count rows"] = f"no {count_dir}/argcount.kpack (run scripts/gpu.py prepare launchcost)"

    print(f"measuring {len(candidates)} rows: {REPS} interleaved host-only batches of {BATCH} launches each, then "
          f"steady state", flush=True)
    python_before = (k.family.python_calls, k_rule.family.python_calls)
    count_before = {name: f.family.python_calls for name, f in count_fams.items()}
    desc_before = desc_fam.python_calls if desc_fam is not None else 0  # type: ignore[attr-defined]
    rows = measure(candidates, spin, stream, torch, refs)
    if desc_fam is not None and desc_fam.python_calls != desc_before:  # type: ignore[attr-defined]
        notes["C path check (tensor descriptor)"] = (f"{desc_fam.python_calls - desc_before} launches took the "  # type: ignore[attr-defined]
                                                     f"Python path while measuring")
    slow = (k.family.python_calls - python_before[0], k_rule.family.python_calls - python_before[1])
    if any(slow):
        notes["C path check"] = f"launches that took the Python path while measuring (add, add_rule): {slow}"
    slow_counts = {n: f.family.python_calls - count_before[n] for n, f in count_fams.items()}  # type: ignore[attr-defined]
    if any(slow_counts.values()):
        notes["C path check (argument counts)"] = f"launches that took the Python path while measuring: {slow_counts}"
    load = load_time(art_dir / "many.kpack")
    report(rows, notes, load, args.json, kernelpack.runtime.fast_path())
    return 0


# ------------------------------------------------------------------ a tensor-descriptor (TMA) argument

DESC_M, DESC_BM, DESC_BN = 1024, 64, 64


def desc_kernel():  # type: ignore[no-untyped-def]
    import triton
    import triton.language as tl

    @triton.jit
    def desc_copy(x_desc, y_ptr, BM: tl.constexpr, BN: tl.constexpr):
        pid = tl.program_id(0)
        rows = pid * BM + tl.arange(0, BM)
        tl.store(y_ptr + rows[:, None] * BN + tl.arange(0, BN)[None, :], x_desc.load([pid * BM, 0]))

    return desc_copy


def add_desc_rows(add_row, torch, sh: int, notes: dict[str, str]):  # type: ignore[no-untyped-def]
    """One kernel taking one tensor descriptor (fp32[DESC_M, 64], encoded as a CUtensorMap on sm_90+) and a pointer:
    Triton's JIT launch (a host TensorDescriptor, encoded per launch in its launcher) against kernelpack (the C
    extension encodes the map in C and keeps it in the family's cache; the pure-Python path's row for reference).
    Returns the C-path family (its python_calls are checked after measuring), None when the rows are missing."""
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor

        import kernelpack
        import kernelpack.frontends.triton.compile as kt
        from kernelpack.runtime import fast

        kern = desc_kernel()
        x = torch.randn(DESC_M, DESC_BN, device="cuda")
        y = torch.empty_like(x)
        grid = DESC_M // DESC_BM
        bundle = kt.compile(kern, {"x_desc": f"tensordesc<fp32[{DESC_BM}, {DESC_BN}]>", "y_ptr": "*fp32"},
                            constexprs={"BM": DESC_BM, "BN": DESC_BN}, arch="sm_90a", name="desc_copy")
        kd = kernelpack.load(bundle).desc_copy
        saved = dict(fast._state)
        fast._state.update(ext=None, tried=True)
        kd_py = kernelpack.load(bundle).desc_copy
        fast._state.clear()
        fast._state.update(saved)
    except Exception as e:  # noqa: BLE001 - the rows are reported missing, the others run
        notes["tensor-descriptor rows"] = f"{type(e).__name__}: {e}"[:300]
        print(f"  tensor-descriptor rows: {notes['tensor-descriptor rows']}", flush=True)
        return None

    def checked(run):  # type: ignore[no-untyped-def]
        def first(count: int) -> None:
            y.zero_()
            run(count)
            torch.cuda.synchronize()
            if not torch.equal(y, x):
                raise RuntimeError("wrong result")
            first.done = True  # type: ignore[attr-defined]

        def rest(count: int) -> None:
            (run if getattr(first, "done", False) else first)(count)

        return rest

    desc = TensorDescriptor.from_tensor(x, [DESC_BM, DESC_BN])

    def triton_desc(count: int) -> None:
        for _ in range(count):
            kern[(grid,)](desc, y, BM=DESC_BM, BN=DESC_BN)

    def kp_desc(count: int) -> None:
        for _ in range(count):
            kd(x, y, grid=grid, stream=sh)

    def kp_desc_py(count: int) -> None:
        for _ in range(count):
            kd_py(x, y, grid=grid, stream=sh)

    add_row("tensor descriptor: Triton JIT launch (host TensorDescriptor)", checked(triton_desc), check=False)
    add_row("tensor descriptor: kernelpack (C extension, map cached)", checked(kp_desc), check=False)
    add_row("tensor descriptor: kernelpack pure-Python fallback", checked(kp_desc_py), check=False)
    return kd.family


# ------------------------------------------------------------------ launch cost vs argument count

COUNT_GRID, COUNT_BLOCK = 1, 32


def count_row(path: str, n: int) -> str:
    return f"{n} args: {path}"


def clib_shim(include: Path) -> str:
    """C loops calling the generated library's family entry kpargs_argsN with its N typed arguments written out,
    read from an 8-byte slot each (as the raw loop reads them)."""
    import argcount

    ctype = {"out": "float*", "in": "const float*", "i32": "int32_t", "f32": "float", "i64": "int64_t"}
    out = [f'#include <stdint.h>\n#include <string.h>\n#include <time.h>\n#include "{include}/kpargs.h"',
           "static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); "
           "return t.tv_sec * 1e9 + t.tv_nsec; }",
           "static float f32(uint64_t v) { float f; uint32_t b = (uint32_t)v; memcpy(&f, &b, 4); return f; }"]
    for n in argcount.COUNTS:
        args = []
        for i, k in enumerate(argcount.kinds(n)):
            t = ctype[k]
            args.append(f"f32(s[{i}])" if k == "f32" else f"({t})(uintptr_t)s[{i}]" if "*" in t else f"({t})s[{i}]")
        call = ", ".join(["&L", *args])
        out.append(f"double kb_clib{n}(const uint64_t* s, unsigned grid, unsigned block, void* stream, int count) {{\n"
                   f"    kp_launch L = {{{{grid, 1, 1}}, {{block, 1, 1}}, 0, {{0, 0, 0}}, stream}};\n"
                   f"    double t0 = now();\n    (void)s;\n"
                   f"    for (int i = 0; i < count; i++) {{\n"
                   f"        kp_status r = kpargs_args{n}({call});\n"
                   f"        if (r) return -(double)r;\n    }}\n    return now() - t0;\n}}")
    return "\n".join(out) + "\n"


def triton_source() -> str:
    import argcount

    lines = ["import triton", "import triton.language as tl", ""]
    for n in argcount.COUNTS:
        ks = argcount.kinds(n)
        terms = [f"tl.load(p{i})" if k == "in" else f"p{i}" for i, k in enumerate(ks) if k != "out"]
        lines += ["@triton.jit", f"def targs{n}({', '.join(f'p{i}' for i in range(n))}):"]
        lines += [f"    tl.store(p0, 0.0 + {' + '.join(terms)})" if n else "    pass", ""]
    return "\n".join(lines)


def pack_store(n: int, args: list, torch) -> ctypes.Array[ctypes.c_uint64]:  # type: ignore[no-untyped-def]
    """One 8-byte slot per parameter, its value packed little-endian (pointers as addresses)."""
    import struct

    import argcount

    slots = []
    for k, v in zip(argcount.kinds(n), args):
        if k in ("out", "in"):
            slots.append(v.data_ptr())
        elif k == "f32":
            slots.append(struct.unpack("<I", struct.pack("<f", v))[0])
        else:
            slots.append(v & (1 << 64) - 1)
    return (ctypes.c_uint64 * max(n, 1))(*slots)


def add_count_rows(add_row, raw, art_dir: Path, tmp: Path, sh: int, torch, np):  # type: ignore[no-untyped-def]
    """Rows for kernels of 0, 4, 19 and 64 parameters (bench/argcount.py), the stream given to every path (a kernel
    without tensor arguments has no torch stream to follow). Returns each row's raw-C reference row (for the
    paired ratio) and kernelpack's kernel objects by name (to check they stayed on the C path)."""
    import importlib.util

    import argcount

    import kernelpack

    refs: dict[str, str] = {}
    art_dir = art_dir.resolve()  # the shim's #include and rpath are absolute
    dev = torch.device("cuda", 0)
    kp = kernelpack.load(art_dir / "argcount.kpack")
    cubin = art_dir / "argcount.cubin"
    clib = None
    try:
        inc, lib = art_dir / "clib" / "include", art_dir / "clib" / "lib"
        (tmp / "kpargs_shim.c").write_text(clib_shim(inc))
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(tmp / "kpargs_shim.c"), "-o", str(tmp / "shim.so"),
                        f"-L{lib}", "-lkpargs", f"-Wl,-rpath,{lib}"], check=True)
        clib = ctypes.CDLL(str(tmp / "shim.so"))
    except Exception as e:  # noqa: BLE001 - the C library rows are reported missing, the others run
        print(f"  kernelpack C library rows: {type(e).__name__}: {e}"[:300], flush=True)
    tmod = None
    try:
        (tmp / "kp_targs.py").write_text(triton_source())
        spec = importlib.util.spec_from_file_location("kp_targs", tmp / "kp_targs.py")
        assert spec is not None and spec.loader is not None
        tmod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tmod)
    except Exception as e:  # noqa: BLE001
        print(f"  Triton argument-count kernels: {type(e).__name__}: {e}"[:300], flush=True)
    try:
        import cupy as cp
    except Exception:  # noqa: BLE001
        cp = None
    try:
        from cuda.bindings import driver as cu
    except Exception:  # noqa: BLE001
        cu = None
    try:
        try:
            from cuda.core import LaunchConfig, ObjectCode, Stream, launch
        except ImportError:
            from cuda.core.experimental import LaunchConfig, ObjectCode, Stream, launch
    except Exception:  # noqa: BLE001
        launch = None
    env = {"g": COUNT_GRID, "b": COUNT_BLOCK, "s": sh}
    fams = {}
    for n in argcount.COUNTS:
        args = argcount.arguments(n, torch, dev)
        want = argcount.expected(n)
        out = args[0] if n else None
        fam = getattr(kp, f"args{n}")
        fams[f"args{n}"] = fam
        kinds = argcount.kinds(n)

        def checked(run, out=out, want=want):  # type: ignore[no-untyped-def]
            def first(count: int):  # type: ignore[no-untyped-def]
                if out is not None:
                    out.zero_()
                r = run(count)
                if out is not None:
                    torch.cuda.synchronize()
                    if float(out[0]) != want:
                        raise RuntimeError(f"wrong result: {float(out[0])} != {want}")
                return r
            return first

        def row(path: str, run, n: int = n) -> None:  # type: ignore[no-untyped-def]
            name = count_row(path, n)
            refs[name] = count_row("raw C cuLaunchKernel", n)
            done = []

            def once_checked(count: int, run=run):  # type: ignore[no-untyped-def]
                if not done:  # the first call (add_row's) checks the result; the measured ones do not sync
                    done.append(1)
                    return checked(run)(count)
                return run(count)

            add_row(name, once_checked, check=False)

        fam(*args, grid=COUNT_GRID, block=COUNT_BLOCK, stream=sh)  # loads the kernel
        handle = fam.family.device_state(0).entries[0].kernel
        store = pack_store(n, args, torch)

        def raw_run(count: int, handle=handle, store=store, n=n) -> float:
            ns = raw.kb_loopv(handle, store, n, COUNT_GRID, COUNT_BLOCK, sh, count)
            if ns < 0:
                raise RuntimeError(f"cuLaunchKernel failed: {-ns}")
            return ns

        row("raw C cuLaunchKernel", raw_run)
        if clib is not None:
            fn = getattr(clib, f"kb_clib{n}")
            fn.restype = ctypes.c_double
            fn.argtypes = (ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_int)

            def clib_run(count: int, fn=fn, store=store) -> float:
                ns = fn(store, COUNT_GRID, COUNT_BLOCK, sh, count)
                if ns < 0:
                    raise RuntimeError(f"kpargs launch failed: status {-ns}")
                return ns

            row("kernelpack C library (family entry)", clib_run)
        row("kernelpack Python (C extension, torch tensors)",
            argcount.call_loop(fam, args, tail=", grid=g, block=b, stream=s", env=env))

        def kp_tuple_run(count: int, fam=fam, t=tuple(args), g=COUNT_GRID, b=COUNT_BLOCK, s=sh) -> None:
            for _ in range(count):  # no list per call (CPython's CALL_FUNCTION_EX form above 30 arguments)
                fam(*t, grid=g, block=b, stream=s)

        row("kernelpack Python, k(*t, ...) with a tuple built once", kp_tuple_run)
        if hasattr(fam, "prepare"):  # a runtime from before prepared launches has none
            prepared = fam.prepare(*args, grid=COUNT_GRID, block=COUNT_BLOCK)
            if not getattr(prepared, "fast", False):
                raise RuntimeError(f"args{n}: the prepared launch is not on the C path")

            def kp_prepared_run(count: int, p=prepared, s=sh) -> None:
                for _ in range(count):  # checked and packed once; each call re-reads the tensors' addresses only
                    p(s)

            row("kernelpack Python, prepared once (p = k.prepare(...); p(stream))", kp_prepared_run)
        try:
            SL = torch._C._StaticCudaLauncher
            loaded = SL._load_kernel(str(cubin), f"args{n}", 0, 0)
            sfn = loaded[1] if len(loaded) == 4 else loaded[0]
            code = {"out": "O", "in": "O", "i32": "i", "f32": "f", "i64": "l"}
            tys = "".join(code[k] for k in kinds)
            targs = tuple(args)

            def static_run(count: int, sfn=sfn, tys=tys, targs=targs, SL=SL) -> None:  # noqa: N803
                for _ in range(count):
                    SL._launch_kernel(sfn, COUNT_GRID, 1, 1, 1, 0, tys, targs, sh)

            row("torch _StaticCudaLauncher", static_run)
        except Exception as e:  # noqa: BLE001
            print(f"  {count_row('torch _StaticCudaLauncher', n)}: {type(e).__name__}: {e}"[:300], flush=True)
        conv = []
        for k, v in zip(kinds, args):
            conv.append(v.data_ptr() if k in ("out", "in") else np.float32(v) if k == "f32" else
                        np.int32(v) if k == "i32" else np.int64(v))
        if launch is not None:
            try:
                kern = ObjectCode.from_cubin(cubin.read_bytes()).get_kernel(f"args{n}")
                row("cuda.core launch (pre-converted args)", argcount.call_loop(
                    launch, conv, head="cs, cfg, kern, ", env={"cs": Stream.from_handle(sh), "kern": kern,
                                                               "cfg": LaunchConfig(grid=COUNT_GRID,
                                                                                   block=COUNT_BLOCK)}))
            except Exception as e:  # noqa: BLE001
                print(f"  {count_row('cuda.core', n)}: {type(e).__name__}: {e}"[:300], flush=True)
        if cu is not None:
            try:
                ct = {"out": ctypes.c_void_p, "in": ctypes.c_void_p, "i32": ctypes.c_int, "f32": ctypes.c_float,
                      "i64": ctypes.c_longlong}
                vals = tuple(int(v) if k != "f32" else float(v) for k, v in zip(kinds, conv))
                params = (vals, tuple(ct[k] for k in kinds)) if n else 0
                f, cs = cu.CUfunction(int(handle)), cu.CUstream(sh)

                def bindings_run(count: int, f=f, cs=cs, params=params) -> None:
                    for _ in range(count):
                        (err,) = cu.cuLaunchKernel(f, COUNT_GRID, 1, 1, COUNT_BLOCK, 1, 1, 0, cs, params, 0)
                        if err != cu.CUresult.CUDA_SUCCESS:
                            raise RuntimeError(str(err))

                row("cuda.bindings cuLaunchKernel (pre-converted args)", bindings_run)
            except Exception as e:  # noqa: BLE001
                print(f"  {count_row('cuda.bindings', n)}: {type(e).__name__}: {e}"[:300], flush=True)
        if cp is not None:
            try:
                fn_cp = cp.RawModule(path=str(cubin)).get_function(f"args{n}")
                cargs = tuple(cp.from_dlpack(v) if k in ("out", "in") else c for k, v, c in zip(kinds, args, conv))
                ext = cp.cuda.ExternalStream(sh)

                def cupy_run(count: int, fn_cp=fn_cp, cargs=cargs, ext=ext) -> None:
                    with ext:
                        for _ in range(count):
                            fn_cp((COUNT_GRID,), (COUNT_BLOCK,), cargs)

                row("CuPy RawModule kernel", cupy_run)
            except Exception as e:  # noqa: BLE001
                print(f"  {count_row('CuPy', n)}: {type(e).__name__}: {e}"[:300], flush=True)
        if tmod is not None:
            tk = getattr(tmod, f"targs{n}")
            row("Triton JIT launch", argcount.call_loop(tk[(COUNT_GRID,)], args, tail=", num_warps=1", env={}))
    return refs, fams


def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares ns per argument through (count, ns) points."""
    if len(points) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else None


def count_table(rows, notes) -> list[str]:  # type: ignore[no-untyped-def]
    """Markdown: per path and argument count, host-only ns/launch (paired × raw C of that count); slopes."""
    import argcount

    paths: list[str] = []
    for name in rows:
        head, _, path = name.partition(" args: ")
        if head.isdigit() and path not in paths:
            paths.append(path)
    counts = argcount.COUNTS
    lines = ["| path | " + " | ".join(f"{n} args: ns (paired ×)" for n in counts)
             + " | ns/extra arg (fit over counts) | own ns/extra arg (paired − raw C) |",
             "|---|" + "---:|" * (len(counts) + 2)]
    for path in paths:
        cells, pts, own = [], [], []
        for n in counts:
            h = (rows.get(count_row(path, n)) or {}).get("host")
            if not h:
                cells.append("-")
                continue
            pr = f" ({h['paired']:.2f})" if h.get("paired") else ""
            cells.append(f"{h['median']:.0f}{pr}")
            pts.append((n, h["median"]))
            if h.get("paired_diff") is not None:
                own.append((n, h["paired_diff"]))
        sl, so = slope(pts), slope(own)
        bold = "**" if path.startswith("kernelpack Python") else ""
        fit = f"{sl:.1f}" if sl is not None else "-"
        own_fit = f"{so:+.1f}" if so is not None else "-"
        lines.append(f"| {bold}{path}{bold} | " + " | ".join(cells) + f" | {fit} | {own_fit} |")
    return lines


LOAD_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import torch
    torch.cuda.init()
    a = torch.randn(4096, device="cuda"); b = torch.randn(4096, device="cuda"); c = torch.empty(4096, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    import kernelpack
    t1 = time.perf_counter()
    m = kernelpack.load(sys.argv[1])
    t2 = time.perf_counter()
    m.k7(a, b, c, 4096, grid=16, block=256)
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    m.k8(a, b, c, 4096, grid=16, block=256)
    torch.cuda.synchronize()
    t4 = time.perf_counter()
    assert torch.allclose(c, a + 8 * b)
    print(json.dumps({"import_ms": (t1 - t0) * 1e3, "load_ms": (t2 - t1) * 1e3, "first_launch_ms": (t3 - t2) * 1e3,
                      "second_kernel_ms": (t4 - t3) * 1e3, "total_ms": (t3 - t0) * 1e3, "kernels": len(m.__all__)}))
""")


def load_time(path: Path) -> dict[str, float] | None:
    if not path.is_file():
        return None
    runs = []
    for i in range(4):  # run 0 is discarded: it writes the .pyc files an installed package ships with
        out = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, str(path)], capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr[-2000:])
            return None
        if i:
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def report(rows, notes, load, json_path, fast) -> None:  # type: ignore[no-untyped-def]
    import torch

    from kernelpack.runtime import driver

    raw = rows.get(RAW_ROW)
    base = raw["host"]["median"] if raw and raw["host"] else None
    gpu = torch.cuda.get_device_name(0)
    v = driver.get().version
    print(f"\nLaunch overhead, {time.strftime('%Y-%m-%d')}, {gpu}, CUDA driver {v // 1000}.{v % 1000 // 10}, "
          f"torch {torch.__version__}, Python {platform.python_version()}, kernelpack fast path {fast}")
    print("\n| path | host-only ns | × raw C | paired × | p25-p75 | min | steady ns | steady p25-p75 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        if " args: " in name:
            continue  # the argument-count table below
        h = r["host"]
        med = f"{h['median']:.0f}" if h else "-"
        ratio = f"{h['median'] / base:.2f}" if h and base else "-"
        paired = f"{h['paired']:.3f}" if h and h["paired"] else "-"
        mn = f"{h['min']:.0f}" if h else "-"
        iqr = f"{h['p25']:.0f}-{h['p75']:.0f}" if h else "-"
        late = f" ({h['late']} late)" if h and h["late"] else ""
        siqr = f"{r['steady_p25']:.0f}-{r['steady_p75']:.0f}"
        print(f"| {name}{late} | {med} | {ratio} | {paired} | {iqr} | {mn} | {r['steady']:.0f} | {siqr} |")
    if any(" args: " in name for name in rows):
        print(f"\nLaunch cost vs argument count (bench/argcount.py kernels, grid {COUNT_GRID}, block {COUNT_BLOCK}, "
              f"stream given; host-only ns/launch, median over rounds; paired × = median over rounds of the row over "
              f"raw C with the same kernel in the same round):\n")
        print("\n".join(count_table(rows, notes)))
    for name, why in notes.items():
        print(f"\n{name}: not measured: {why}")
    if load:
        print(f"\n100-kernel bundle in a fresh process (median of 3): import kernelpack {load['import_ms']:.1f} ms, "
              f"load {load['load_ms']:.1f} ms, first launch {load['first_launch_ms']:.1f} ms, "
              f"total {load['total_ms']:.1f} ms; a second kernel's first launch {load['second_kernel_ms']:.2f} ms")
    if json_path:
        Path(json_path).write_text(json.dumps({"rows": rows, "notes": notes, "load": load, "gpu": gpu, "fast": fast,
                                               "driver": v, "torch": torch.__version__}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
