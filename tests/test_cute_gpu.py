"""On a real GPU (no CuTe DSL installed): CuTe DSL kernels compiled on a GPU-less machine by
`scripts/gpu.py prepare cute`, run from the artifacts in ``$KERNELPACK_GPU_ARTIFACTS/cute/``.

* host programs (``kpcute``: CuTe's host launcher + kernelpack's driver shim, no cudart): elementwise add in fp32
  and bf16, the policy/self/scalars/custom-object kernel, and the Hopper TMA + cluster GEMM vs ``torch.matmul``
  for several shapes including non-multiples of the tile, M = 0, and refused contracts;
* kernel-level artifacts through the C library kernelpack.Library built (``kpkern``), grid from the recorded
  formula, and through the Python runtime (``kernelpack.runtime.load``) when present;
* the GEMM from a C++ program.

Outputs are pre-filled with NaN so every element must be written.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from gpu import cuda_torch, require_carried, requires_gpu
from kernelpack.runtime.cstructs import KpLaunch, KpTensor
from toolchain_support import CXX, cuda_include

pytestmark = pytest.mark.gpu

KP_SUCCESS, KP_ERROR_INVALID_ARGUMENT = 0, 7


def artifacts() -> Path:
    return require_carried("cute", "cute", holding="manifest.json")


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    return cuda_torch()


class T1(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("shape0", ctypes.c_int32)]


class T2(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("shape0", ctypes.c_int32), ("shape1", ctypes.c_int32),
                ("stride0", ctypes.c_int64)]


def t2(x) -> T2:  # type: ignore[no-untyped-def]
    assert x.dim() == 2 and x.stride(1) == 1
    return T2(x.data_ptr(), x.shape[0], x.shape[1], x.stride(0))


@pytest.fixture(scope="module")
def kpcute(torch):  # type: ignore[no-untyped-def]
    lib = ctypes.CDLL(str(artifacts() / "kpcute" / "lib" / "libkpcute.so"))
    lib.kpcute_last_error.restype = ctypes.c_char_p
    for name in ("ew_add_f32", "ew_add_bf16"):
        getattr(lib, f"kpcute_{name}").argtypes = [T2, T2, T2]
    lib.kpcute_scale_shift.argtypes = [T1, T1, ctypes.c_int32, ctypes.c_float, ctypes.c_int32, ctypes.c_float,
                                       ctypes.c_float, ctypes.c_float]
    for name in ("gemm_f16", "gemm_bf16"):
        getattr(lib, f"kpcute_{name}").argtypes = [T2, T2, T2, ctypes.c_void_p]
    return lib


def check(lib, status: int) -> None:  # type: ignore[no-untyped-def]
    assert status == KP_SUCCESS, lib.kpcute_last_error().decode()


@requires_gpu
@pytest.mark.parametrize("shape", [(1, 1), (37, 129), (256, 300), (1000, 33)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_host_elementwise_add(torch, kpcute, shape, dtype) -> None:  # type: ignore[no-untyped-def]
    dt = getattr(torch, dtype)
    m, n = shape
    a = torch.randn(m, n, device="cuda").to(dt)
    wide = torch.randn(m, n + 7, device="cuda").to(dt)
    b = wide[:, 3:3 + n]  # a row stride that is not n: the dynamic 64-bit stride is honoured
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
    check(kpcute, getattr(kpcute, f"kpcute_ew_add_{'f32' if dtype == 'float32' else 'bf16'}")(t2(a), t2(b), t2(c)))
    torch.cuda.synchronize()
    torch.testing.assert_close(c, (a.float() + b.float()).to(dt), rtol=0, atol=0)


@requires_gpu
def test_host_policy_kernel(torch, kpcute) -> None:  # type: ignore[no-untyped-def]
    n, alpha, period, off, lo, hi = 10007, 1.5, 3, 0.25, -0.75, 0.5
    x = torch.randn(n, device="cuda")
    y = torch.full((n,), float("nan"), device="cuda")
    check(kpcute, kpcute.kpcute_scale_shift(T1(x.data_ptr(), n), T1(y.data_ptr(), n), n, alpha, period, off, lo, hi))
    torch.cuda.synchronize()
    ref = torch.clamp(alpha * x + off, lo, hi)
    ref[::period] *= 2
    torch.testing.assert_close(y, ref)


GEMM_SHAPES = [(128, 128, 64), (200, 136, 264), (1, 8, 8), (129, 264, 72), (1000, 520, 1032), (2048, 2048, 2048)]


@requires_gpu
@pytest.mark.parametrize("mnk", GEMM_SHAPES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_host_gemm_matches_torch(torch, kpcute, mnk, dtype) -> None:  # type: ignore[no-untyped-def]
    dt = getattr(torch, dtype)
    m, n, k = mnk
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(n, k, device="cuda", dtype=dt)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
    stream = torch.cuda.current_stream().cuda_stream
    fn = getattr(kpcute, f"kpcute_gemm_{'f16' if dtype == 'float16' else 'bf16'}")
    check(kpcute, fn(t2(a), t2(b), t2(c), stream))
    torch.cuda.synchronize()
    ref = torch.matmul(a.float(), b.float().T)
    eps = torch.finfo(dt).eps
    torch.testing.assert_close(c.float(), ref, rtol=2 * eps, atol=2 * eps * k ** 0.5)
    torch.testing.assert_close(c, torch.matmul(a, b.T), rtol=2 * eps, atol=2 * eps * k ** 0.5)


@requires_gpu
def test_host_gemm_zero_m_and_contracts(torch, kpcute) -> None:  # type: ignore[no-untyped-def]
    b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    sentinel = torch.full((4, 64), 7.0, device="cuda", dtype=torch.float16)
    empty_a, empty_c = T2(b.data_ptr(), 0, 64, 64), T2(sentinel.data_ptr(), 0, 64, 64)
    assert kpcute.kpcute_gemm_f16(empty_a, t2(b), empty_c, None) == KP_SUCCESS
    torch.cuda.synchronize()
    assert bool((sentinel == 7).all())  # M = 0: nothing ran, nothing written, no SIGFPE in CuTe's host code
    a60 = torch.randn(16, 60, device="cuda", dtype=torch.float16)
    b60 = torch.randn(64, 60, device="cuda", dtype=torch.float16)
    c16 = torch.empty(16, 64, device="cuda", dtype=torch.float16)
    assert kpcute.kpcute_gemm_f16(t2(a60), t2(b60), t2(c16), None) == KP_ERROR_INVALID_ARGUMENT
    assert b"multiple of 8" in kpcute.kpcute_last_error()


@requires_gpu
def test_host_calls_from_a_fresh_thread(torch, kpcute) -> None:  # type: ignore[no-untyped-def]
    """A thread with no current context: the shim makes one current, the launch path included."""
    import threading

    a = torch.randn(64, 64, device="cuda")
    c = torch.full((64, 64), float("nan"), device="cuda")
    torch.cuda.synchronize()
    out: list[int] = []
    th = threading.Thread(target=lambda: out.append(kpcute.kpcute_ew_add_f32(t2(a), t2(a), t2(c))))
    th.start()
    th.join()
    torch.cuda.synchronize()
    assert out == [0], kpcute.kpcute_last_error()
    torch.testing.assert_close(c, a + a)


# ---------------------------------------------------------------------------------------- kernel-level path


def kp_tensor(x, dtype_code: int) -> KpTensor:  # type: ignore[no-untyped-def]
    t = KpTensor(x.data_ptr(), dtype_code, x.dim())
    for i in range(x.dim()):
        t.shape[i], t.stride[i] = x.shape[i], x.stride(i)
    return t


@pytest.fixture(scope="module")
def kernels():  # type: ignore[no-untyped-def]
    from kernelpack.bundle.kpack import Bundle

    return {(a.name, a.variant): a for a in Bundle.read(artifacts() / "kernels.kpack")}


def grid_of(art, fields) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    from kernelpack.core.launchspec import evaluate_grid

    assert art.launch.grid is not None, f"{art.label}: no grid formula recorded"
    return tuple(evaluate_grid(e, fields) for e in art.launch.grid)  # type: ignore[return-value]


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_kernel_level_family_dispatches_by_dtype(torch, kernels, dtype) -> None:  # type: ignore[no-untyped-def]
    from kernelpack.core.abi import DType
    from kernelpack.launch.codes import DTYPE_CODE

    lib = ctypes.CDLL(str(artifacts() / "kpkern" / "lib" / "libkpkern.so"))
    lib.kpkern_last_error.restype = ctypes.c_char_p
    dt, code = getattr(torch, dtype), DTYPE_CODE[DType.f32 if dtype == "float32" else DType.bf16]
    m, n = 77, 301
    a, b = (torch.randn(m, n, device="cuda").to(dt) for _ in range(2))
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
    art = kernels[("ew_add", "f32" if dtype == "float32" else "bf16")]
    launch = KpLaunch()
    launch.grid[:] = grid_of(art, {("c", "shape0"): m, ("c", "shape1"): n})
    status = lib.kpkern_ew_add(ctypes.byref(launch), *(ctypes.byref(kp_tensor(x, code)) for x in (a, b, c)))
    assert status == 0, lib.kpkern_last_error().decode()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, (a.float() + b.float()).to(dt), rtol=0, atol=0)


@requires_gpu
def test_kernel_level_through_python_runtime(torch, kernels) -> None:  # type: ignore[no-untyped-def]
    runtime = pytest.importorskip("kernelpack.runtime")
    mod = runtime.load(str(artifacts() / "kernels.kpack"))
    n = 4099
    x = torch.randn(n, device="cuda")
    y = torch.full((n,), float("nan"), device="cuda")
    art = kernels[("scale_shift", "")]
    grid = grid_of(art, {("n", None): n})
    mod.scale_shift(x, y, n, 2.0, 5, 0.5, -1.0, 1.0, grid=grid, block=art.launch.block)
    torch.cuda.synchronize()
    ref = torch.clamp(2.0 * x + 0.5, -1.0, 1.0)
    ref[::5] *= 2
    torch.testing.assert_close(y, ref)


# ---------------------------------------------------------------------------------------- from C++


@requires_gpu
def test_gemm_from_cpp(tmp_path: Path) -> None:
    cxx, cuda_inc = shutil.which(CXX), cuda_include()
    if cxx is None or cuda_inc is None:
        pytest.skip("needs a C++ compiler and cuda.h")
    root = artifacts() / "kpcute"
    src = Path(__file__).resolve().parents[1] / "examples" / "cute" / "gemm_demo.cpp"
    exe = tmp_path / "gemm_demo"
    subprocess.run([cxx, "-std=c++17", "-O2", "-Wall", "-Werror", f"-I{root / 'include'}", f"-I{cuda_inc}", str(src),
                    str(root / "lib" / "libkpcute.a"), "-lcuda", "-ldl", "-lpthread", "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all shapes match" in out.stdout
