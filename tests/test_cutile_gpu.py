"""On the H200: cuTile kernels exported here by kernelpack (cuTile 1.7 + tileiras, no GPU) and carried over compute
what torch computes (the GPU machine has no cuTile). Arrays are passed as pointer + shape + stride."""

from __future__ import annotations

import pytest

from frontend_launch import Launcher
from gpu import cuda_torch, requires_gpu
from gpu_frontends import carried, get, load_bundle, runtime_module


@pytest.fixture(scope="module")
def bundle():  # type: ignore[no-untyped-def]
    return load_bundle("cutile.kpack")


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    return cuda_torch()


def arr(name, t):  # type: ignore[no-untyped-def]
    """The params of one array: pointer, shapes, strides (in elements)."""
    out = {name: t}
    out.update({f"{name}_shape{i}": s for i, s in enumerate(t.shape)})
    out.update({f"{name}_stride{i}": s for i, s in enumerate(t.stride())})
    return out


@requires_gpu
@pytest.mark.parametrize("variant", ["f32", "f16"])
def test_vector_add(bundle, torch, variant):
    dtype = torch.float32 if variant == "f32" else torch.float16
    k = Launcher(get(bundle, f"ct_vadd[{variant}]"), torch)
    n = 100_003  # not a multiple of the tile
    a, b = torch.randn(n, device="cuda").to(dtype), torch.randn(n, device="cuda").to(dtype)
    big = torch.full((n + 2048,), 7.0, device="cuda", dtype=dtype)
    c = big[:n]
    c.fill_(float("nan"))
    k((n + 1023) // 1024, **arr("a", a), **arr("b", b), **arr("c", c))
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)
    assert bool((big[n:] == 7.0).all()), "the last partial tile wrote past the array's end"


@requires_gpu
@pytest.mark.parametrize("m,n,k", [(200, 136, 96), (256, 256, 512)])
def test_matmul_fp32_alpha(bundle, torch, m, n, k):
    launcher = Launcher(get(bundle, "ct_matmul"), torch)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda")
    launcher(((m + 63) // 64, (n + 63) // 64), **arr("A", a), **arr("B", b), **arr("C", c), alpha=0.5)
    torch.testing.assert_close(c, 0.5 * (a.float() @ b.float()), rtol=1e-3, atol=1e-2)


@requires_gpu
def test_through_kernelpack_load(torch):
    mod = runtime_module(carried("cutile.kpack"))
    n = 70_001
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.full_like(a, float("nan"))
    mod.ct_vadd(a, n, 1, b, n, 1, c, n, 1, grid=(n + 1023) // 1024)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)
