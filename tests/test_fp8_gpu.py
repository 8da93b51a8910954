"""On the H200: fp8 kernels (tests/fp8_kernels.cu, compiled with NVRTC on the build machine by
`scripts/gpu.py prepare fp8` and carried as .gpu/fp8/fp8.kpack) take torch float8 tensors through the runtime's C path
and its Python path. Each widens fresh random fp8 bytes -- every bit pattern, NaNs and (e5m2) infinities included --
to f32; the result must equal torch's own conversion bit for bit. The family ``widen`` dispatches on the tensor's
fp8 format; ``widen_e4m3`` refuses an e5m2 tensor before any launch. Outputs start as a sentinel so an unwritten
element fails."""

from __future__ import annotations

from typing import Any

import pytest

import kernelpack
from gpu import GPU_MARKS, cuda_torch, require_carried
from kernelpack.bundle.kpack import Bundle
from kernelpack.runtime import ArgumentValueError
from runtime_support import python_path

pytestmark = GPU_MARKS
PATHS = ["runtime_c", "runtime_python"]
N = 1 << 20


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    return Bundle.read(require_carried("fp8/fp8.kpack", "fp8"))


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    return cuda_torch()


def kernels(path: str, bundle: Bundle) -> Any:
    from kernelpack.runtime import fast

    if path == "runtime_python":
        with python_path():
            return kernelpack.load(bundle)
    if fast.extension() is None:
        pytest.fail("the runtime's C launch path (kernelpack.runtime._launch) is not built on this machine")
    return kernelpack.load(bundle)


def _random_fp8(torch: Any, dtype: Any) -> Any:
    """N fresh random bytes viewed as ``dtype``, every one of the 256 patterns present."""
    raw = torch.randint(0, 256, (N,), dtype=torch.uint8, device="cuda")
    raw[:256] = torch.arange(256, dtype=torch.uint8, device="cuda")
    return raw.view(dtype)


def _check(torch: Any, x: Any, y: Any) -> None:
    torch.cuda.synchronize()
    want = x.to(torch.float32)
    assert torch.equal(torch.isnan(y), torch.isnan(want))
    ok = ~torch.isnan(want)
    assert torch.equal(y[ok].view(torch.int32), want[ok].view(torch.int32))  # bit for bit, signed zeros included


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
def test_family_widens_fp8_like_torch(bundle: Bundle, torch: Any, path: str, fmt: str) -> None:
    mod = kernels(path, bundle)
    x = _random_fp8(torch, getattr(torch, fmt))
    y = torch.full((N,), 12345.0, device="cuda")
    mod.widen(x, y, N, grid=528, block=256)
    _check(torch, x, y)


@pytest.mark.parametrize("path", PATHS)
def test_typed_kernel_takes_e4m3_and_refuses_e5m2(bundle: Bundle, torch: Any, path: str) -> None:
    mod = kernels(path, bundle)
    x = _random_fp8(torch, torch.float8_e4m3fn)
    y = torch.full((N,), 12345.0, device="cuda")
    mod.widen_e4m3(x, y, N, grid=528, block=256)
    _check(torch, x, y)
    z = torch.full((N,), 12345.0, device="cuda")
    with pytest.raises(ArgumentValueError, match=r"kernel widen_e4m3: parameter 0 'x': expected a f8e4m3 tensor, "
                                                 r"got a float8_e5m2 tensor"):
        mod.widen_e4m3(x.view(torch.uint8).view(torch.float8_e5m2), z, N, grid=528, block=256)
    torch.cuda.synchronize()
    assert bool((z == 12345.0).all())  # nothing was launched
