"""Instructions per launch of kernelpack's C launch path, counted by callgrind on the fake driver (no GPU needed).

Wall-clock time needs the GPU (bench/launch_overhead.py); instruction counts do not, and they are stable enough to
compare two versions of ``_launch.c`` on this machine. Each row runs a Python ``for`` loop of launches of
``add(a, b, out, n)`` (three torch CPU tensors read as CUDA tensors on device 0, an int) through the fake driver
(tests/fakecuda); only the loop is counted (callgrind client requests around it). The first row is the fake's own
``cuLaunchKernel`` called from a C loop: the fake's cost, the same in every row; subtract it to get kernelpack's.

    python bench/launch_instructions.py [--launches 2000] [--json out.json]

Needs valgrind, nvcc (to compile the test kernel once), torch and the built extensions (setup.py build_ext
--inplace).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

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
"""


def prepare(work: Path) -> None:
    """Outside valgrind: the fake driver, the helper and the bundle (add, and add with a grid rule)."""
    from fake_cuda import build
    from kernelpack import cuda
    from kernelpack.artifact import LaunchSpec
    from kernelpack.bundle import Bundle
    from kernelpack.cache import CompileCache
    from runtime_support import HERE

    build(work)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-x", "c", "-", "-o", str(work / "helper.so")],
                   input=HELPER.encode(), check=True)
    (add,) = cuda.compile(HERE / "kernels.cu", ["add"], arch=["sm_90a"], cache=CompileCache(work / "cache"))
    rule = dataclasses.replace(add, name="add_rule", launch=LaunchSpec(
        block=(256, 1, 1), grid=(("ceil_div", ("arg", "n", None), 256), 1, 1)))
    Bundle.of([add, rule]).write(work / "k.kpack")


def measure(work: Path, launches: int) -> None:
    """Inside valgrind: one callgrind dump per row."""
    import ctypes
    import gc

    import torch

    import kernelpack
    from fake_cuda import InProcessFake
    from kernelpack.bundle import Bundle
    from kernelpack.runtime import driver
    from runtime_support import cpu_tensors_as_cuda

    fake = InProcessFake(work / "libkpfakecuda.so")
    fake.reset((9, 0))
    bundle = Bundle.read(work / "k.kpack")
    driver.use_library(str(fake.path))
    helper = ctypes.CDLL(str(work / "helper.so"))
    helper.kb_stop.argtypes = (ctypes.c_char_p,)
    helper.kb_loop.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                               ctypes.c_int, ctypes.c_int)
    m = kernelpack.load(bundle)
    k, kr = m.add, m.add_rule
    a, b, c = (torch.zeros(4096) for _ in range(3))
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
    n = 4096
    from kernelpack.runtime import _launch

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

        rows = [("fake cuLaunchKernel from C", raw), ("kernelpack, torch tensors, current stream", torch_current),
                ("kernelpack, stream given", given), ("kernelpack, int pointers, stream given", ints),
                ("kernelpack, grid from rule, stream given", rule), ("kernelpack keeping the GIL", keep_gil)]
        names = []
        for i, (name, run) in enumerate(rows):
            before = (fam.python_calls, famr.python_calls, fake.count())
            run(10)
            gc.collect()
            gc.disable()  # a collection inside the window would count the heap's size, not the launch path
            helper.kb_start()
            run(launches)
            helper.kb_stop(f"row{i}".encode())
            gc.enable()
            slow = (fam.python_calls, famr.python_calls) != before[:2]
            names.append(name + (" [Python path]" if slow else ""))
        print(json.dumps(names))


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
    counts = {}
    for f in work.glob("cg.*"):
        text = f.read_text(errors="replace")
        lines = text.splitlines()
        trig = next((ln.split(":", 2)[2].strip() for ln in lines if ln.startswith("desc: Trigger:")), "")
        total = next((int(ln.split()[1]) for ln in lines if ln.startswith("totals:")), None)
        if trig.startswith("Client Request: row") and total is not None:
            counts[int(trig.rsplit("row", 1)[1])] = total / args.launches
    base = counts.get(0, 0.0)
    print(f"instructions per launch (callgrind, {args.launches} launches per row, Python {sys.version.split()[0]})")
    print(f"{'row':45s} {'instr/launch':>13s} {'minus fake':>11s}")
    result = {}
    for i, name in enumerate(names):
        v = counts.get(i)
        result[name] = v
        print(f"{name:45s} {v:13.0f} {v - base:11.0f}" if v is not None else f"{name:45s} -")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
