"""Instructions per launch of kernelpack's C launch path, counted by callgrind on the fake driver (no GPU needed).

Wall-clock time needs the GPU (bench/launch_overhead.py); instruction counts do not, and they are stable enough to
compare two versions of the extension (``runtime/_launch.c`` and its parts) on this machine. Each row runs a Python
``for`` loop of launches of ``add(a, b, out, n)`` (three torch CPU tensors read as CUDA tensors on device 0, an int)
through the fake driver (runtime/_dryrun.c as tests/fake_cuda.py builds it); only the loop is counted (callgrind
client requests around it). The first row is the fake's own ``cuLaunchKernel`` called from a C loop: the fake's
cost, the same in every row; subtract it to get kernelpack's.

torch's current stream: the torch bridge answers it in C in these runs (``set_test_stream``), as it reads c10's on a
GPU when built against torch's CUDA headers; the row "current stream from the getter" takes the fallback instead (a
bridge built without them): the extension calls the getter (``streams.c_getter()``: torch's builtin on a GPU, a
C-level ``partial(operator.add, stream)`` here) without a Python frame.

Argument counts: kernels with 0, 4, 19 and 64 parameters (bench/argcount.py: half tensors, half scalars), stream
given, each against the fake's own ``cuLaunchKernel`` of the same kernel from C; the slope is kernelpack's own
instructions per extra argument (least squares over the counts). Each count also runs as ``k(*t, ...)`` with ``t`` a
tuple built once: when positional + 2 x keyword arguments exceed 30, CPython compiles the literal call to
``CALL_FUNCTION_EX`` with a tuple and a dict per call (the tuple built through a list above 30 positional); the
tuple rows show the slope without the list.

    python bench/launch_instructions.py [--launches 2000] [--json out.json]

Prints markdown tables ready to paste into docs/benchmarks.md.

Needs valgrind, nvcc (to compile the test kernel once), torch and the built extensions (setup.py build_ext
--inplace).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

HELPER = r"""
#include <stdint.h>
#include <valgrind/callgrind.h>
typedef int (*launch_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                        void**);
void kb_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void kb_stop(const char* name) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT(name); }
int kb_loop(void* fn, void* f, uint64_t a, uint64_t b, uint64_t c, int n, int count) {
    for (int i = 0; i < count; i++) {
        void* params[4] = {&a, &b, &c, &n};
        int r = ((launch_t)fn)(f, 4, 1, 1, 256, 1, 1, 0, (void*)0x77, params, 0);
        if (r) return r;
    }
    return 0;
}
/* n parameters, one 8-byte slot each in store; kernelParams built per launch */
int kb_loopv(void* fn, void* f, uint64_t* store, int n, int count) {
    for (int i = 0; i < count; i++) {
        void* params[64];
        for (int j = 0; j < n; j++) params[j] = &store[j];
        int r = ((launch_t)fn)(f, 1, 1, 1, 32, 1, 1, 0, (void*)0x77, n ? params : 0, 0);
        if (r) return r;
    }
    return 0;
}
"""


def prepare(work: Path) -> None:
    """Outside valgrind: the fake driver, the helper and the bundle (add, and add with a grid rule)."""
    from fake_cuda import build
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.core.cache import CompileCache
    from kernelpack.core.launchspec import LaunchSpec
    from kernelpack.frontends.cuda import compile as cuda
    from runtime_support import HERE

    build(work)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-x", "c", "-", "-o", str(work / "helper.so")],
                   input=HELPER.encode(), check=True)
    (add,) = cuda.compile(HERE / "kernels.cu", ["add"], arch=["sm_90a"], cache=CompileCache(work / "cache"))
    rule = dataclasses.replace(add, name="add_rule", launch=LaunchSpec(
        block=(256, 1, 1), grid=(("ceil_div", ("arg", "n", None), 256), 1, 1)))
    Bundle.of([add, rule]).write(work / "k.kpack")
    # one tensor-descriptor argument: tests/clib_kernels.cu's tma2d (a CUtensorMap, its shape and strides, an int, a
    # pointer), with the C library tests' descriptor spec (fp16, box 64 x 32)
    from clib_support import KERNELS_CU, TMA_ABI, TMA_SPEC
    from kernelpack.bundle.artifact import KernelArtifact
    from kernelpack.core.binary import Binary
    from toolchain_support import require_nvcc

    subprocess.run([require_nvcc(), "-cubin", "-arch=sm_90a", str(KERNELS_CU), "-o", str(work / "tma.cubin")],
                   check=True)
    Bundle.of([KernelArtifact("tma2d", "tma2d", TMA_ABI, [Binary("sm_90a", (work / "tma.cubin").read_bytes())],
                              launch=LaunchSpec(tensor_descs=(TMA_SPEC,)))]).write(work / "tma.kpack")
    import argcount

    (work / "argcount.cu").write_text(argcount.source())
    counts = cuda.compile(work / "argcount.cu", [f"args{n}" for n in argcount.COUNTS], arch=["sm_90a"],
                          cache=CompileCache(work / "cache"))
    Bundle.of(counts).write(work / "argcount.kpack")


def measure(work: Path, launches: int) -> None:
    """Inside valgrind: one callgrind dump per row."""
    import ctypes
    import gc
    import struct

    import torch

    import kernelpack
    from fake_cuda import InProcessFake
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.runtime import driver
    from runtime_support import cpu_tensors_as_cuda

    fake = InProcessFake(work / "libkpfakecuda.so")
    fake.reset((9, 0), missing="kpDryrunNote")  # a real driver's launch path: no specialization named per launch
    bundle = Bundle.read(work / "k.kpack")
    driver.use_library(str(fake.path))
    helper = ctypes.CDLL(str(work / "helper.so"))
    helper.kb_stop.argtypes = (ctypes.c_char_p,)
    helper.kb_loop.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                               ctypes.c_int, ctypes.c_int)
    helper.kb_loopv.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)
    import argcount

    counts = kernelpack.load(Bundle.read(work / "argcount.kpack"))
    m = kernelpack.load(bundle)
    k, kr = m.add, m.add_rule
    a, b, c = (torch.zeros(4096) for _ in range(3))
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
    n = 4096
    from kernelpack.runtime import _launch, _torch_bridge

    with cpu_tensors_as_cuda():
        k(a, b, c, n, grid=4, block=256)
        kr(a, b, c, n)
        fam, famr = k.family, kr.family
        d = driver.get()
        kernel = fam.device_state(0).entries[0].kernel

        def raw(count: int) -> None:
            assert helper.kb_loop(d.addresses["cuLaunchKernel"], kernel, pa, pb, pc, n, count) == 0

        def torch_current(count: int) -> None:
            for _ in range(count):
                k(a, b, c, n, grid=4, block=256)

        def given(count: int) -> None:
            for _ in range(count):
                k(a, b, c, n, grid=4, block=256, stream=0x77)

        def ints(count: int) -> None:
            for _ in range(count):
                k(pa, pb, pc, n, grid=4, block=256, stream=0x77)

        def rule(count: int) -> None:
            for _ in range(count):
                kr(a, b, c, n, stream=0x77)

        def keep_gil(count: int) -> None:
            _launch.set_release_gil(False)
            try:
                for _ in range(count):
                    k(a, b, c, n, grid=4, block=256)
            finally:
                _launch.set_release_gil(True)

        def getter(count: int) -> None:
            _torch_bridge.set_test_stream(None)  # the bridge cannot read torch's stream: the getter answers
            try:
                for _ in range(count):
                    k(a, b, c, n, grid=4, block=256)
            finally:
                _torch_bridge.set_test_stream(0x5000)

        tma_mod = kernelpack.load(Bundle.read(work / "tma.kpack"))
        from runtime_support import python_path

        with python_path():
            tma_py = kernelpack.load(Bundle.read(work / "tma.kpack")).tma2d
        kt, small = tma_mod.tma2d, torch.zeros(16)
        t16 = torch.zeros(128, 64, dtype=torch.float16)
        block16 = torch.zeros(32, 128, 64, dtype=torch.float16)
        many = [block16[i] for i in range(32)]  # more tensors than the family keeps maps of: each launch encodes
        kt(t16, 7, small, grid=2, block=128, stream=0x77)
        tma_py(t16, 7, small, grid=2, block=128, stream=0x77)

        def desc(count: int) -> None:
            for _ in range(count):
                kt(t16, 7, small, grid=2, block=128, stream=0x77)

        def desc_new(count: int) -> None:
            for i in range(count):
                kt(many[i % 32], 7, small, grid=2, block=128, stream=0x77)

        def desc_py(count: int) -> None:
            for _ in range(count):
                tma_py(t16, 7, small, grid=2, block=128, stream=0x77)

        rows = [("fake cuLaunchKernel from C", raw, fam),
                ("kernelpack, torch tensors, current stream", torch_current, fam),
                ("kernelpack, stream given", given, fam), ("kernelpack, int pointers, stream given", ints, fam),
                ("kernelpack, grid from rule, stream given", rule, famr), ("kernelpack keeping the GIL", keep_gil, fam),
                ("kernelpack, current stream from the getter (bridge without c10 streams)", getter, fam)]
        if not hasattr(_torch_bridge, "set_test_stream"):  # a runtime before it: the getter always answered
            rows.pop()
        rows += [("kernelpack, one tensor-descriptor (TMA) argument, same tensor, stream given", desc, kt.family),
                 ("kernelpack, one tensor-descriptor (TMA) argument, another tensor each launch (encoded)", desc_new,
                  kt.family),
                 ("kernelpack pure-Python path, one tensor-descriptor (TMA) argument, same tensor", desc_py,
                  tma_py.family)]
        for nargs in argcount.COUNTS:
            kc = getattr(counts, f"args{nargs}")
            args = argcount.arguments(nargs, torch, "cpu")
            kc(*args, grid=1, block=32, stream=0x77)  # loads it
            kernel_n = kc.family.device_state(0).entries[0].kernel
            slots = [x.data_ptr() if isinstance(x, torch.Tensor) else
                     int.from_bytes(struct.pack("<f", x), "little") if isinstance(x, float) else x for x in args]
            store = (ctypes.c_uint64 * max(nargs, 1))(*slots)

            def raw_n(count: int, kernel_n=kernel_n, store=store, nargs=nargs) -> None:
                assert helper.kb_loopv(d.addresses["cuLaunchKernel"], kernel_n, store, nargs, count) == 0

            rows.append((f"fake cuLaunchKernel from C, {nargs} args", raw_n, kc.family))
            rows.append((f"kernelpack, {nargs} args, stream given", argcount.call_loop(
                kc, args, tail=", grid=1, block=32, stream=0x77"), kc.family))

            def pre_built(count: int, kc=kc, t=tuple(args)) -> None:  # k(*t, ...): no per-call list of the arguments
                for _ in range(count):
                    kc(*t, grid=1, block=32, stream=0x77)

            rows.append((f"kernelpack, {nargs} args from a tuple built once (k(*t, ...)), stream given", pre_built,
                         kc.family))

            prep = kc.prepare(*args, grid=1, block=32)  # checked and packed once

            def prepared(count: int, p=prep) -> None:
                for _ in range(count):
                    p(0x77)

            rows.append((f"kernelpack, {nargs} args prepared once (p = k.prepare(...); p(stream))", prepared,
                         kc.family))
        names = []
        for i, (name, run, f) in enumerate(rows):
            before = f.python_calls
            run(10)
            gc.collect()
            gc.disable()  # a collection inside the window would count the heap's size, not the launch path
            helper.kb_start()
            run(launches)
            helper.kb_stop(f"row{i}".encode())
            gc.enable()
            names.append(name + (" [Python path]" if f.python_calls != before else ""))
        print(json.dumps(names))


def _call_costs(dump: Path, names: tuple[str, ...]) -> dict[str, int]:
    """Inclusive instructions of every call into each function of names, read from the dump's call records.

    The calls' own records, not callgrind_annotate's per-file inclusive figures: those split a function by the files
    its inlined lines come from (the extension is one translation unit of parts), so a function with inlined steps
    (family_call with launch() inlined) no longer has one inclusive figure there."""
    ids: dict[str, str] = {}
    found = dict.fromkeys(names, 0)
    callee: str | None = None
    after_calls = False
    for ln in dump.read_text(errors="replace").splitlines():
        if after_calls:  # the line after calls=: the call's position and inclusive cost
            parts = ln.split()
            if callee in found and len(parts) >= 2:
                found[callee] += int(parts[1])
            after_calls = False
            continue
        m = re.match(r"c?fn=\((\d+)\)(?: (.*))?$", ln)
        if m:
            if m.group(2):
                ids[m.group(1)] = m.group(2)
            if ln.startswith("cfn="):
                callee = ids.get(m.group(1), "")
            continue
        if ln.startswith("calls="):
            after_calls = True
    return found


def launcher_only(dump: Path, launches: int) -> float | None:
    """Instructions per launch inside the extension's call (family_call, inclusive) minus its driver call."""
    found = _call_costs(dump, ("family_call", "launch_once"))
    if not found["family_call"]:
        return None
    return (found["family_call"] - found["launch_once"]) / launches


def _slope(points: list[tuple[int, float]]) -> float:
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--json", default=None)
    ap.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        measure(Path(args.measure), args.launches)
        return 0
    work = Path(tempfile.mkdtemp(prefix="kp-instr-"))
    prepare(work)
    out = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={work}/cg.%p",
                          sys.executable, __file__, "--measure", str(work), "--launches", str(args.launches)],
                         capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if out.returncode != 0:
        print(out.stdout[-3000:], out.stderr[-3000:])
        return 1
    names = json.loads(out.stdout.strip().splitlines()[-1])
    counts: dict[int, float] = {}
    files: dict[int, Path] = {}
    for f in work.glob("cg.*"):
        text = f.read_text(errors="replace")
        lines = text.splitlines()
        trig = next((ln.split(":", 2)[2].strip() for ln in lines if ln.startswith("desc: Trigger:")), "")
        total = next((int(ln.split()[1]) for ln in lines if ln.startswith("totals:")), None)
        if trig.startswith("Client Request: row") and total is not None:
            counts[int(trig.rsplit("row", 1)[1])] = total / args.launches
            files[int(trig.rsplit("row", 1)[1])] = f
    base = counts.get(0, 0.0)
    result = {name: counts.get(i) for i, name in enumerate(names)}
    print(f"Instructions per launch, callgrind on the fake driver ({args.launches} launches per row, Python "
          f"{sys.version.split()[0]}, {time.strftime('%Y-%m-%d')}):\n")
    print("| row | instr/launch | kernelpack's own (minus the fake's call from C) |\n|---|---:|---:|")
    own: dict[int, float] = {}
    launcher: dict[int, float] = {}
    own_t: dict[int, float] = {}
    own_p: dict[int, float] = {}
    for i, name in enumerate(names):
        v = counts.get(i)
        if v is None:
            print(f"| {name} | - | - |")
            continue
        if name.startswith("fake cuLaunchKernel from C, "):
            print(f"| {name} | {v:,.0f} | 0 |")
            continue
        ref = base
        count_row = re.match(r"kernelpack, (\d+) args", name)
        if count_row:  # an argument-count row: against the fake's call of the same kernel
            nargs = int(count_row.group(1))
            ref = counts.get(names.index(f"fake cuLaunchKernel from C, {nargs} args"), base)
            if " args prepared once" in name:  # the same kernels, launched through k.prepare(...)
                own_p[nargs] = v - ref
            elif " args from a tuple" in name:  # the same kernels, called as k(*t, ...)
                own_t[nargs] = v - ref
            else:
                own[nargs] = v - ref
                inner = launcher_only(files[i], args.launches) if i in files else None
                if inner is not None:
                    launcher[nargs] = inner
        print(f"| {name} | {v:,.0f} | {v - ref:,.0f} |")
    if len(own) >= 2:
        xs = sorted(own)
        fit = _slope([(x, own[x]) for x in xs])
        fit4 = _slope([(x, own[x]) for x in xs if x >= 4])
        steps = ", ".join(f"{a}→{b}: {(own[b] - own[a]) / (b - a):.1f}" for a, b in zip(xs, xs[1:]))
        print(f"\nkernelpack's own instructions per extra argument (stream given; tensors and scalars mixed): "
              f"{fit:.1f} by least squares over {', '.join(map(str, xs))} args, {fit4:.1f} over 4 and up; "
              f"between counts {steps}.")
        result["slope_instr_per_arg"] = fit
    for pts, key, what in ((own_t, "slope_instr_per_arg_tuple", "The same calls as k(*t, grid=..., block=..., "
                            "stream=...) with t a tuple built once"),
                           (own_p, "slope_instr_per_arg_prepared", "The same kernels prepared once (p = "
                            "k.prepare(...), then p(stream): the tensors' addresses re-read, nothing else)")):
        if len(pts) >= 2:
            xs = sorted(pts)
            steps = ", ".join(f"{a}→{b}: {(pts[b] - pts[a]) / (b - a):.1f}" for a, b in zip(xs, xs[1:]))
            result[key] = _slope([(x, pts[x]) for x in xs])
            print(f"\n{what}: {result[key]:.1f} per extra argument by least squares; between counts {steps}.")
    if len(launcher) >= 2:
        xs = sorted(launcher)
        steps = ", ".join(f"{a}→{b}: {(launcher[b] - launcher[a]) / (b - a):.1f}" for a, b in zip(xs, xs[1:]))
        print(f"\nOf which in kernelpack's launcher (the extension's call, torch bridge included, without the driver "
              f"call): {', '.join(f'{launcher[x]:,.0f}' for x in xs)} instructions at {', '.join(map(str, xs))} args; "
              f"{_slope([(x, launcher[x]) for x in xs]):.1f} per extra argument by least squares; between counts "
              f"{steps}. The rest is CPython's call (above 30 arguments it builds a list, a tuple and a dict per call "
              f"and unpacks them again for vectorcall).")
        result["launcher_instr_per_arg"] = _slope([(x, launcher[x]) for x in xs])
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
