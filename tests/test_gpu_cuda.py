"""On a real GPU: CUDA C++ kernels compiled on a GPU-less machine load and compute the right numbers.

Arguments are packed into one parameter buffer from the typed ABI (at the cubin's offsets) and passed with
CU_LAUNCH_PARAM_BUFFER_POINTER, so a wrong offset or width gives wrong results. The bundle comes from
``$KERNELPACK_GPU_ARTIFACTS/demo.kpack`` when set (compiled elsewhere and carried), else it is compiled here.
"""

from __future__ import annotations

import ctypes
import struct

import pytest

from gpu import cuda_torch, demo_kernels, requires_gpu
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.packing import pack_params
from kernelpack.launch.binaries import runs_on

CU_LAUNCH_PARAM_END, CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE = 0, 1, 2


@pytest.fixture(scope="module")
def demo_bundle() -> Bundle:
    return demo_kernels()


class Launcher:
    """The smallest possible driver-API launcher for one artifact (the real runtime is kernelpack.runtime)."""

    def __init__(self, artifact, torch):  # type: ignore[no-untyped-def]
        from cuda.bindings import driver as cu

        self.cu, self.art = cu, artifact
        major, minor = torch.cuda.get_device_capability()
        binary = next(b for b in artifact.binaries if runs_on(b.arch, major, minor))
        self.ck = binary.cubin.kernel(artifact.entry)
        err, self.lib = cu.cuLibraryLoadData(binary.data, None, None, 0, None, None, 0)
        assert int(err) == 0, err
        err, kern = cu.cuLibraryGetKernel(self.lib, artifact.entry.encode())
        assert int(err) == 0, err
        self.func = cu.CUfunction(int(kern))

    def __call__(self, grid, block, *values, stream: int = 0) -> None:  # type: ignore[no-untyped-def]
        buf = pack_params(self.art.abi, list(values), base=self.ck.param_base, kernel=self.art.label)
        cbuf = ctypes.create_string_buffer(buf, len(buf))
        size = ctypes.c_size_t(len(buf))
        extra = (ctypes.c_void_p * 5)(CU_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(cbuf),
                                      CU_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(size), CU_LAUNCH_PARAM_END)
        (err,) = self.cu.cuLaunchKernel(self.func, *grid, *block, 0, stream, 0, ctypes.addressof(extra))
        assert int(err) == 0, f"{self.art.label}: {err}"
        (err,) = self.cu.cuCtxSynchronize()
        assert int(err) == 0, f"{self.art.label}: {err}"


@pytest.fixture(scope="module")
def torch_cuda():
    pytest.importorskip("cuda.bindings")
    return cuda_torch()


def _get(bundle: Bundle, label: str):  # type: ignore[no-untyped-def]
    return next(a for a in bundle if a.label == label)


@requires_gpu
def test_axpy_with_fp32_alpha_matches_a_float64_reference(demo_bundle, torch_cuda):
    torch = torch_cuda
    k = Launcher(_get(demo_bundle, "axpy"), torch)
    for n in (1, 1000, 1 << 20):
        x = torch.randn(n, device="cuda")
        y = torch.randn(n, device="cuda")
        alpha = 0.731
        ref = alpha * x.double() + y.double()
        k(((n + 255) // 256, 1, 1), (256, 1, 1), alpha, x, y, n)
        torch.testing.assert_close(y.double(), ref, rtol=1e-6, atol=1e-6)


@requires_gpu
@pytest.mark.parametrize("variant,dtype_name,tol", [("float", "float32", 1e-6), ("half", "float16", 1e-3),
                                                    ("double", "float64", 1e-6)])
def test_scale_template_variants_write_every_element(demo_bundle, torch_cuda, variant, dtype_name, tol):
    torch = torch_cuda
    dtype = getattr(torch, dtype_name)
    k = Launcher(_get(demo_bundle, f"scale[{variant}]"), torch)
    n = 3 * 65536 + 17
    x = torch.randn(n, device="cuda").to(dtype)
    out = torch.full((n,), float("nan"), device="cuda", dtype=dtype)
    k(((n + 127) // 128, 1, 1), (128, 1, 1), x, out, 2.5, n)
    assert not torch.isnan(out).any(), "some output elements were never written"
    ref = (x.float().double() * 2.5).to(dtype).double()  # the kernel multiplies in fp32 for every T
    torch.testing.assert_close(out.double(), ref, rtol=tol, atol=tol)


@requires_gpu
def test_row_sum_with_unsigned_params_and_static_smem(demo_bundle, torch_cuda):
    torch = torch_cuda
    k = Launcher(_get(demo_bundle, "row_sum"), torch)
    rows, cols = 333, 1000
    m = torch.randn(rows, cols, device="cuda")
    sums = torch.full((rows,), float("nan"), device="cuda")
    k((rows, 1, 1), (256, 1, 1), m, sums, rows, cols)
    torch.testing.assert_close(sums.double(), m.double().sum(dim=1), rtol=1e-4, atol=1e-4)


@requires_gpu
def test_struct_by_value_is_packed_at_its_offset(demo_bundle, torch_cuda):
    torch = torch_cuda
    k = Launcher(_get(demo_bundle, "affine"), torch)
    n = 5000
    x = torch.randn(n, device="cuda")
    y = torch.full((n,), float("nan"), device="cuda")
    params = struct.pack("<ffi", 0.5, 0.25, 1)
    k(((n + 255) // 256, 1, 1), (256, 1, 1), x, y, params, n)
    torch.testing.assert_close(y.double(), (x.double() * 0.5 + 0.25).clamp(0, 1), rtol=1e-6, atol=1e-6)
