"""On the H200 (sm_90): an autotuned Triton family some of whose configs were left out for an arch they do not fit
(issue 27 item 7), compiled here (no GPU) by `scripts/gpu.py prepare smem` (tests/smem_kernels.py) for sm_80 and
sm_90a and carried over:

* ``mm[c0]`` WIDE (64 x 256 x 128 tiles, 3 stages): 160 KiB on sm_80, kept there; 240 KiB on sm_90a, left out;
* ``mm[c1]`` BIG (128 x 128 x 64, 7 stages): 224 KiB on sm_90a -- 3 KiB under the limit -- left out for sm_80;
* ``mm[c2]`` SMALL (3 stages): both.

On this device dispatch skips c0 (no sm_90a binary) and launches c1 (its grid from its own formula, its 224 KiB of
dynamic shared memory opted into); without c1 in the bundle, c2. Through the runtime's C path, its Python path and a
C library built from the same bundle (ctypes): each config writes its TAG (its position + 1) and ``c = a @ b``
against a float64 reference, on fresh random inputs, into an output that starts as NaN.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

import kernelpack
from gpu import GPU_MARKS, cuda_torch, require_carried
from kernelpack.bundle.kpack import Bundle
from kernelpack.runtime.cstructs import KpLaunch as Launch
from runtime_support import python_path

pytestmark = GPU_MARKS
PATHS = ["runtime_c", "runtime_python", "c_library"]
M, N, K = 384, 512, 1024  # M not a multiple of the 128-row tiles: the masks are exercised


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    return Bundle.read(require_carried("smem/smem.kpack", "smem"))


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    return cuda_torch()


def kernels(path: str, bundle: Bundle, tmp_path: Any) -> Any:
    if path == "runtime_python":
        with python_path():
            return kernelpack.load(bundle).mm
    if path == "runtime_c":
        return kernelpack.load(bundle).mm
    from kernelpack.clib import Library

    lib = ctypes.CDLL(str(Library("smem", bundle).build(tmp_path / "smem").shared))
    lib.smem_last_error.restype = ctypes.c_char_p

    def call(*args: Any) -> None:
        ptrs = [ctypes.c_void_p(t.data_ptr()) for t in args[:4]]
        status = lib.smem_mm(ctypes.byref(Launch()), *ptrs, *(ctypes.c_int32(v) for v in args[4:]))
        assert status == 0, f"smem_mm: status {status}: {lib.smem_last_error().decode()}"

    return call


def run(torch, mm: Any) -> int:  # type: ignore[no-untyped-def]
    """One launch on fresh inputs (grid from the chosen config's formula): the TAG it wrote; its result checked."""
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda")
    tag = torch.zeros(4, device="cuda", dtype=torch.int32)
    mm(a, b, c, tag, M, N, K)
    torch.cuda.synchronize()
    assert not c.isnan().any(), "an output element was not written"
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-3, atol=1e-2)
    return int(tag[0])


@pytest.mark.parametrize("path", PATHS)
def test_the_config_left_out_for_this_arch_is_skipped_and_the_next_runs(bundle, torch, path, tmp_path):
    assert torch.cuda.get_device_capability() == (9, 0), "the carried family is built for sm_80 and sm_90a"
    assert {a.label: [str(x) for x in a.archs] for a in bundle} == {
        "mm[c0]": ["sm_80"], "mm[c1]": ["sm_90a"], "mm[c2]": ["sm_80", "sm_90a"]}
    assert run(torch, kernels(path, bundle, tmp_path)) == 2  # c1: 224 KiB of dynamic shared memory


@pytest.mark.parametrize("path", PATHS)
def test_without_the_big_config_the_small_one_runs(bundle, torch, path, tmp_path):
    rest = Bundle(tuple(a for a in bundle if a.variant != "c1"))
    assert run(torch, kernels(path, rest, tmp_path)) == 3


def test_the_config_left_out_names_what_it_carries(bundle, torch):
    from kernelpack.runtime import NoBinaryForDevice

    mm = kernelpack.load(bundle).mm
    with pytest.raises(NoBinaryForDevice, match=r"kernel mm\[c0\] has no binary for sm_90: it carries sm_80"):
        mm.binary_for(0, "c0")
    assert mm.binary_for(0, "c1") == "sm_90a"
