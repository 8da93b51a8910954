"""On a real GPU (no CuTe DSL installed): CuTe host programs called from Python through ``kernelpack.load`` on the
libraries `scripts/gpu.py prepare cute` built (``$KERNELPACK_GPU_ARTIFACTS/cute/``): the Hopper TMA + cluster GEMM
vs ``torch.matmul`` (fp16 and bf16 dispatched by dtype, shapes that are not multiples of the tile, M = 0), the
elementwise add with a strided operand, the policy kernel's scalars, torch's current stream, and the per-call cost.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpu import cuda_torch, require_carried, requires_gpu

pytestmark = pytest.mark.gpu

GEMM_SHAPES = [(128, 128, 64), (200, 136, 264), (1, 8, 8), (129, 264, 72), (1000, 520, 1032), (2048, 2048, 2048)]


def artifacts() -> Path:
    return require_carried("cute", "cute", holding="kpcute/lib/libkpcute.so")


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    return cuda_torch(current=False)


@pytest.fixture(scope="module")
def mod(torch):  # type: ignore[no-untyped-def]
    import kernelpack

    m = kernelpack.load(artifacts() / "kpcute" / "lib" / "libkpcute.so")
    if "gemm" not in m.__all__:
        pytest.skip("libkpcute.so carries no host-program description: rebuild it with "
                    "`python scripts/gpu.py prepare cute`")
    return m


def _check_gemm(torch, a, b, c, k: int) -> None:  # type: ignore[no-untyped-def]
    ref = torch.matmul(a.float(), b.float().T)
    eps = torch.finfo(a.dtype).eps
    torch.testing.assert_close(c.float(), ref, rtol=2 * eps, atol=2 * eps * k ** 0.5)


@requires_gpu
@pytest.mark.parametrize("mnk", GEMM_SHAPES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gemm_through_kernelpack_load(torch, mod, mnk, dtype) -> None:  # type: ignore[no-untyped-def]
    dt = getattr(torch, dtype)
    m, n, k = mnk
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(n, k, device="cuda", dtype=dt)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
    mod.gemm(a, b, c)  # torch's current stream
    torch.cuda.synchronize()
    _check_gemm(torch, a, b, c, k)


@requires_gpu
def test_gemm_zero_m_and_refusals(torch, mod) -> None:  # type: ignore[no-untyped-def]
    from kernelpack.runtime import ArgumentValueError, NoMatchingSpecialization

    b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    empty = torch.empty(0, 64, device="cuda", dtype=torch.float16)
    assert mod.gemm(empty, b, torch.empty(0, 64, device="cuda", dtype=torch.float16)) is None  # no SIGFPE
    torch.cuda.synchronize()
    a60 = torch.randn(16, 60, device="cuda", dtype=torch.float16)
    with pytest.raises(NoMatchingSpecialization, match="shape\\[1\\] = 60 must be a multiple of 8"):
        mod.gemm(a60, torch.randn(64, 60, device="cuda", dtype=torch.float16),
                 torch.empty(16, 64, device="cuda", dtype=torch.float16))
    with pytest.raises(ArgumentValueError, match="host programs need CUDA device memory"):
        mod.gemm(b.cpu(), b, b)


@requires_gpu
def test_gemm_on_a_side_stream(torch, mod) -> None:  # type: ignore[no-untyped-def]
    a = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(384, 256, device="cuda", dtype=torch.float16)
    c = torch.full((512, 384), float("nan"), device="cuda", dtype=torch.float16)
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        mod.gemm(a, b, c)  # stream=None: torch's current stream, the side stream here
    side.synchronize()
    _check_gemm(torch, a, b, c, 256)
    c.fill_(float("nan"))
    torch.cuda.synchronize()
    mod.gemm(a, b, c, stream=side)
    side.synchronize()
    _check_gemm(torch, a, b, c, 256)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_elementwise_add_and_policy_kernel(torch, mod, dtype) -> None:  # type: ignore[no-untyped-def]
    dt = getattr(torch, dtype)
    a = torch.randn(37, 129, device="cuda").to(dt)
    b = torch.randn(37, 136, device="cuda").to(dt)[:, 3:132]  # row stride 136: the dynamic stride is honoured
    c = torch.full((37, 129), float("nan"), device="cuda", dtype=dt)
    mod.ew_add(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, (a.float() + b.float()).to(dt), rtol=0, atol=0)
    n = 10007
    x = torch.randn(n, device="cuda")
    y = torch.full((n,), float("nan"), device="cuda")
    mod.scale_shift(x, y, n, 1.5, 3, 0.25, -0.75, 0.5)
    torch.cuda.synchronize()
    ref = torch.clamp(1.5 * x + 0.25, -0.75, 0.5)
    ref[::3] *= 2
    torch.testing.assert_close(y, ref)


@requires_gpu
def test_gemm_from_the_mixed_library(torch) -> None:  # type: ignore[no-untyped-def]
    import kernelpack

    path = artifacts() / "kpmix" / "lib" / "libkpmix.so"
    if not path.is_file():
        pytest.skip("no kpmix library")
    m = kernelpack.load(path)
    a = torch.randn(200, 264, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(136, 264, device="cuda", dtype=torch.bfloat16)
    c = torch.full((200, 136), float("nan"), device="cuda", dtype=torch.bfloat16)
    m.gemm(a, b, c)
    torch.cuda.synchronize()
    _check_gemm(torch, a, b, c, 264)


@requires_gpu
def test_per_call_cost(torch, mod) -> None:  # type: ignore[no-untyped-def]
    """Reported, not asserted tightly: the Python checks + one ctypes call on top of the entry's own host work."""
    a = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    c = torch.empty(128, 128, device="cuda", dtype=torch.float16)
    empty = torch.empty(0, 64, device="cuda", dtype=torch.float16)
    e_c = torch.empty(0, 128, device="cuda", dtype=torch.float16)
    for _ in range(50):
        mod.gemm(a, b, c)
    torch.cuda.synchronize()
    out = {}
    for label, args in (("gemm 128x128x64", (a, b, c)), ("gemm M=0 (Python side only)", (empty, b, e_c))):
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            mod.gemm(*args)
        out[label] = (time.perf_counter() - t0) / n * 1e6
        torch.cuda.synchronize()
    print("host program per-call cost (us):", {k: round(v, 2) for k, v in out.items()})
    assert out["gemm M=0 (Python side only)"] < 1000
