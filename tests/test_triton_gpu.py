"""On the H200: Triton kernels compiled here by kernelpack (Triton 3.9, no GPU) and carried over compute what torch
computes, through a minimal driver launcher, through kernelpack.load, and from C++ through a generated library.
Inputs are random, outputs start as NaN so an unwritten element fails."""

from __future__ import annotations

import pytest

from frontend_launch import Launcher
from gpu import cuda_torch, requires_gpu
from gpu_frontends import carried, get, load_bundle, runtime_module


@pytest.fixture(scope="module")
def bundle():  # type: ignore[no-untyped-def]
    return load_bundle("triton.kpack")


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    return cuda_torch()


def nan_like(torch, t):  # type: ignore[no-untyped-def]
    return torch.full_like(t, float("nan"))


@requires_gpu
@pytest.mark.parametrize("variant", ["f32", "f32_aligned", "f16", "f16_aligned"])
def test_vector_add(bundle, torch, variant):
    dtype = torch.float32 if variant.startswith("f32") else torch.float16
    k = Launcher(get(bundle, f"tr_add[{variant}]"), torch)
    aligned = variant.endswith("aligned")
    n = (1 << 20) + (0 if aligned else 37)
    x, y = (torch.randn(n + (0 if aligned else 1), device="cuda").to(dtype) for _ in range(2))
    if not aligned:
        x, y = x[1:], y[1:]  # misaligned views: only the general specialization may take them
    out = nan_like(torch, x)
    k((n + 1023) // 1024, x_ptr=x, y_ptr=y, out_ptr=out, n=n)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


@requires_gpu
def test_axpy_fp32_alpha(bundle, torch):
    k = Launcher(get(bundle, "tr_axpy"), torch)
    n = 300_001
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    alpha = 0.731
    ref = alpha * x.double() + y.double()
    k((n + 1023) // 1024, alpha=alpha, x_ptr=x, y_ptr=y, n=n)
    torch.testing.assert_close(y.double(), ref, rtol=1e-6, atol=1e-6)  # a double-width alpha would give garbage


def _matmul(k, torch, m, n, kk):  # type: ignore[no-untyped-def]
    a = torch.randn(m, kk, device="cuda", dtype=torch.float16)
    b = torch.randn(kk, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    bm = 128 if "m128" in k.art.label else 64
    k(((m + bm - 1) // bm, (n + bm - 1) // bm), a_ptr=a, b_ptr=b, c_ptr=c, M=m, N=n, K=kk, stride_am=a.stride(0),
      stride_ak=1, stride_bk=b.stride(0), stride_bn=1, stride_cm=c.stride(0), stride_cn=1)
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), rtol=2e-2, atol=5e-2)


@requires_gpu
@pytest.mark.parametrize("variant,shape", [("m128", (256, 384, 512)), ("m64", (200, 136, 72)),
                                           ("m64", (256, 384, 512))])
def test_matmul_tile_configs(bundle, torch, variant, shape):
    _matmul(Launcher(get(bundle, f"tr_matmul[{variant}]"), torch), torch, *shape)


@requires_gpu
@pytest.mark.parametrize("m,n,k", [(256, 384, 512), (384, 128, 64)])
def test_tma_matmul_with_host_encoded_descriptors(bundle, torch, m, n, k):
    launcher = Launcher(get(bundle, "tr_tma_matmul"), torch)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    launcher((m // 128, n // 128), a_desc=a, b_desc=b, c_desc=c, K=k)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=5e-2)


@requires_gpu
def test_global_scratch_is_allocated_from_the_recorded_size(bundle, torch):
    art = get(bundle, "tr_scale_rows")
    assert art.launch.global_scratch > 0
    k = Launcher(art, torch)
    m, n = 96, 320
    x = torch.randn(m, n, device="cuda")
    y = torch.full_like(x, float("nan"))
    k(m // 32, x_ptr=x, y_ptr=y, M=m, N=n, factor=1.5)
    torch.testing.assert_close(y, x * 1.5, rtol=1e-6, atol=1e-6)


@requires_gpu
def test_through_kernelpack_load(torch):
    mod = runtime_module(carried("triton.kpack"))
    n = 100_003
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    mod.tr_add(x, y, out, n, grid=(n + 1023) // 1024)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    ref = 0.731 * x.double() + y.double()
    mod.tr_axpy(0.731, x, y, n, grid=(n + 1023) // 1024)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.double(), ref, rtol=1e-6, atol=1e-6)
    m_, n_, k_ = 256, 384, 512
    a = torch.randn(m_, k_, device="cuda", dtype=torch.float16)
    b = torch.randn(k_, n_, device="cuda", dtype=torch.float16)
    c = torch.full((m_, n_), float("nan"), device="cuda", dtype=torch.float16)
    mod.tr_matmul(a, b, c, m_, n_, k_, k_, 1, n_, 1, n_, 1, grid=(m_ // 64, n_ // 64))  # dispatch: m128 when aligned
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=5e-2)


@requires_gpu
def test_tma_descriptors_and_scratch_through_kernelpack_load(torch):
    """The Python runtime encodes the TMA maps itself (cuTensorMapEncodeTiled) and allocates Triton's scratch."""
    mod = runtime_module(carried("triton.kpack"))
    for m, n, k in ((256, 384, 512), (384, 128, 64)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        mod.tr_tma_matmul(a, b, c, k, grid=(m // 128, n // 128))
        torch.cuda.synchronize()
        torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=5e-2)
    x = torch.randn(96, 320, device="cuda")
    y = torch.full_like(x, float("nan"))
    mod.tr_scale_rows(x, y, 96, 320, 1.5, grid=3)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x * 1.5, rtol=1e-6, atol=1e-6)


@requires_gpu
def test_tma_launches_take_the_c_path_and_their_cached_maps_follow_every_tensor(torch):
    """Descriptor launches after the first take the C extension's path, which encodes each CUtensorMap in C and keeps
    it per family: the same tensors with new contents, new tensors, and tensors of other shapes where the caching
    allocator may hand out a freed address again all compute the right product."""
    import kernelpack

    mod = runtime_module(carried("triton.kpack"))
    fam = mod.tr_tma_matmul.family

    def run(a, b):  # type: ignore[no-untyped-def]
        c = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda", dtype=torch.float16)
        mod.tr_tma_matmul(a, b, c, a.shape[1], grid=(a.shape[0] // 128, b.shape[1] // 128))
        torch.cuda.synchronize()
        torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=5e-2)

    def pair(m, n, k):  # type: ignore[no-untyped-def]
        return (torch.randn(m, k, device="cuda", dtype=torch.float16),
                torch.randn(k, n, device="cuda", dtype=torch.float16))

    a, b = pair(256, 384, 512)
    run(a, b)  # loads the device (the Python path)
    before = fam.python_calls
    run(a, b)
    a.copy_(torch.randn_like(a))
    b.copy_(torch.randn_like(b))
    run(a, b)
    for m, n, k in ((384, 128, 64), (128, 256, 192), (256, 384, 512), (128, 128, 512)):
        del a, b
        a, b = pair(m, n, k)
        run(a, b)
    state = kernelpack.runtime.fast_path()
    if state["extension"] and state["torch_bridge"]:
        assert fam.python_calls == before, "descriptor launches took the Python path"
