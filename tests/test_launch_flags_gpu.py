"""On the H200: launch flags with real kernels (tests/pdl_kernels.cu, compiled on the build machine by
`scripts/gpu.py prepare pdl` and carried as .gpu/pdl/pdl.kpack), through the runtime's C path, its Python path and a C
library built from the same bundle (called with ctypes, kp_launch.flags 0: the kernels' own flags).

* a PDL pair: pdl_primary (y = 2x, then griddepcontrol.launch_dependents, then a spinning tail) and pdl_secondary
  (flagged pdl: a spinning prologue, griddepcontrol.wait, z = y + 1), timed with and without PDL (printed, never
  asserted), z checked element by element both ways;
* grid_center (flagged cooperative: out = x - mean(x) across a hand-written grid barrier): correct under a
  cooperative launch, refused -- before any launch, so nothing hangs -- when the grid exceeds the co-resident blocks.
Inputs are fresh random values, outputs start as NaN so an unwritten element fails.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import pytest

import kernelpack
from gpu import GPU_MARKS, cuda_torch, require_carried
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.errors import LaunchError
from kernelpack.runtime.cstructs import KpLaunch as Launch
from runtime_support import python_path

pytestmark = GPU_MARKS
PATHS = ["runtime_c", "runtime_python", "c_library"]
# cycles of each kernel's independent half (~200 us at 1.98 GHz): longer than any path's host cost per launch
# (the ctypes and pure-Python paths take tens of us), so the GPU, not the host, sets the pace and overlap can show
SPIN = 400_000
PAIRS = 20
KP_ERROR_INVALID_LAUNCH = 8


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    return Bundle.read(require_carried("pdl/pdl.kpack", "pdl"))


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    return cuda_torch()


KP_LAUNCH_NO_PDL = 2


class CLib:
    """The generated library's entries, called like the runtime's kernels, on torch's current stream; ``pdl=False``
    sets KP_LAUNCH_NO_PDL. Returns the status (the message is in ``last_error``)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        lib.fl_last_error.restype = ctypes.c_char_p

    def last_error(self) -> str:
        return self.lib.fl_last_error().decode()

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.lib, f"fl_{name}")

        def call(*args: Any, grid: int, block: int, pdl: bool | None = None) -> int:
            import torch

            launch = Launch((ctypes.c_uint32 * 3)(grid, 1, 1), (ctypes.c_uint32 * 3)(block, 1, 1))
            launch.stream = torch.cuda.current_stream().cuda_stream
            launch.flags = KP_LAUNCH_NO_PDL if pdl is False else 0
            cargs: list[Any] = [ctypes.byref(launch)]
            for a in args:
                if hasattr(a, "data_ptr"):
                    cargs.append(ctypes.c_void_p(a.data_ptr()))
                elif isinstance(a, Raw):
                    cargs.append(ctypes.c_void_p(a.ptr))
                elif isinstance(a, Wide):
                    cargs.append(ctypes.c_int64(a.value))
                else:
                    cargs.append(ctypes.c_int32(a))
            return int(fn(*cargs))

        return call


class Raw:
    """A raw device pointer (the barrier words, passed as uint32_t*)."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class Wide:
    """An int64 argument for the C library (the runtime takes a Python int)."""

    def __init__(self, value: int) -> None:
        self.value = value


@pytest.fixture(scope="module")
def clib(bundle, tmp_path_factory):  # type: ignore[no-untyped-def]
    from kernelpack.clib import Library

    built = Library("fl", bundle).build(tmp_path_factory.mktemp("fl_gpu") / "fl")
    return CLib(ctypes.CDLL(str(built.shared)))


def kernels(path: str, bundle: Bundle, clib: Any) -> Any:
    if path == "c_library":
        return clib
    if path == "runtime_python":
        with python_path():
            return kernelpack.load(bundle)
    return kernelpack.load(bundle)


def _arg(path: str, v: Any) -> Any:
    if path != "c_library":
        return v.ptr if isinstance(v, Raw) else v.value if isinstance(v, Wide) else v
    return v


def _report(line: str) -> None:
    """Print a measurement (pytest -s shows it) and append it to $OUT/launch_flags.txt when $OUT is set."""
    print("\n" + line)
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "launch_flags.txt"), "a") as f:
            f.write(line + "\n")


def sm_count(torch) -> int:  # type: ignore[no-untyped-def]
    return int(torch.cuda.get_device_properties(0).multi_processor_count)


def _call(mod: Any, path: str, name: str, *args: Any, **kw: Any) -> None:
    status = getattr(mod, name)(*(_arg(path, a) for a in args), **kw)
    if path == "c_library":
        assert status == 0, f"fl_{name}: status {status}: {mod.last_error()}"


@pytest.mark.parametrize("path", PATHS)
def test_pdl_pair_overlaps_and_computes_the_same(bundle, clib, torch, path):
    sms = sm_count(torch)
    grid, block = sms, 128
    n = grid * block * 4
    mod = kernels(path, bundle, clib)
    x = torch.rand(n, device="cuda")
    times = {}
    for pdl in (False, True):
        y = torch.full((n,), float("nan"), device="cuda")
        z = torch.full((n,), float("nan"), device="cuda")
        kw = {} if pdl else {"pdl": False}

        def pair(y: Any, z: Any, kw: dict[str, Any]) -> None:
            _call(mod, path, "pdl_primary", x, y, n, Wide(SPIN), grid=grid, block=block)
            _call(mod, path, "pdl_secondary", y, z, n, Wide(SPIN), grid=grid, block=block, **kw)

        pair(y, z, kw)  # warm-up: loads, first-launch work
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(PAIRS):
            pair(y, z, kw)
        end.record()
        torch.cuda.synchronize()
        times[pdl] = start.elapsed_time(end) * 1000 / PAIRS
        assert torch.equal(y, 2 * x)
        assert torch.equal(z, 2 * x + 1)  # every element: the wait saw every write of the primary
    _report(f"[{path}] PDL pair of {grid}x{block}, {SPIN} spin cycles each half: without PDL {times[False]:.1f} us "
            f"per pair, with PDL {times[True]:.1f} us per pair ({times[False] / times[True]:.2f}x)")


@pytest.mark.parametrize("path", PATHS)
def test_grid_barrier_kernel_is_correct_under_cooperative_launch(bundle, clib, torch, path):
    sms = sm_count(torch)
    grid, block = sms * 2, 256
    n = (1 << 20) + 17
    mod = kernels(path, bundle, clib)
    for _ in range(3):  # fresh inputs each time
        x = torch.rand(n, device="cuda")
        partial = torch.full((grid,), float("nan"), device="cuda")
        out = torch.full((n,), float("nan"), device="cuda")
        bar = torch.zeros(2, dtype=torch.int32, device="cuda")
        _call(mod, path, "grid_center", x, partial, out, n, Raw(bar.data_ptr()), grid=grid, block=block)
        torch.cuda.synchronize()
        assert not torch.isnan(out).any()
        torch.testing.assert_close(out, x - x.double().mean().float(), rtol=0, atol=1e-4)
        assert bar.tolist() == [0, 1]  # every block arrived once; the barrier opened once


@pytest.mark.parametrize("path", PATHS)
def test_cooperative_grid_larger_than_the_device_is_refused_before_launch(bundle, clib, torch, path):
    sms = sm_count(torch)
    grid, block, n = sms * 1000, 256, 1 << 20
    mod = kernels(path, bundle, clib)
    x = torch.rand(n, device="cuda")
    partial = torch.zeros(grid, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    bar = torch.zeros(2, dtype=torch.int32, device="cuda")
    args = (x, partial, out, n, Raw(bar.data_ptr()))
    if path == "c_library":
        assert mod.grid_center(*args, grid=grid, block=block) == KP_ERROR_INVALID_LAUNCH
        msg = mod.last_error()
    else:
        with pytest.raises(LaunchError) as e:
            _call(mod, path, "grid_center", *args, grid=grid, block=block)
        msg = str(e.value)
    _report(f"[{path}] {msg}")
    assert f"kernel grid_center: cooperative launch of grid {{{grid},1,1}}" in msg
    assert f"x {sms} SMs" in msg and "co-resident on device 0 (sm_90)" in msg
    torch.cuda.synchronize()
    assert bar.tolist() == [0, 0] and torch.isnan(out).all()  # nothing ran
