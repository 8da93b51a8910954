"""The FlashInfer corpus's GPU cases: for each kernel family and CuTe host program, one launch on fresh random inputs
(outputs pre-filled with a sentinel: NaN / -1) and a check of its result against the kernel's math in torch float64
(FlashInfer's own JIT needs nvcc, ninja and network, absent on the GPU machine). Sampling cases:
corpus.flashinfer_sampling; the run: corpus.flashinfer_gpu."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Case:
    """One launch: arguments in ABI order (tensors and Python scalars), the launch shape, outputs to check."""

    args: list[Any]
    grid: tuple[int, int, int]
    block: tuple[int, int, int] | None
    smem: int = 0
    outputs: list[Any] = field(default_factory=list)  # tensors every element of which the kernel must write
    check: Callable[[], str] | None = None  # "" when right, else what is wrong
    host: bool = False  # a CuTe host program (no grid/block/smem; CuTe's host code picks them)
    kwargs: dict[str, Any] = field(default_factory=dict)


def _t() -> Any:
    import torch

    return torch


def dtype_of(variant: str) -> Any:
    torch = _t()
    v = variant.lower()
    if "bf16" in v or "bfloat16" in v:
        return torch.bfloat16
    if "half" in v or "f16" in v:
        return torch.float16
    return torch.float32


def close(got: Any, ref: Any, rtol: float, atol: float, what: str = "out") -> str:
    torch = _t()
    g = got.double()
    if torch.isnan(g).any() and not torch.isnan(ref).any():
        return f"{what}: {int(torch.isnan(g).sum())} NaN (elements not written?)"
    err = (g - ref).abs()
    bad = err > atol + rtol * ref.abs()
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        return (f"{what}: {int(bad.sum())}/{bad.numel()} elements off, max err {float(err.max()):.3g}; "
                f"first at {i}: {float(g.flatten()[i]):.5g} vs {float(ref.flatten()[i]):.5g}")
    return ""


def nan_like(shape: tuple[int, ...], dt: Any) -> Any:
    torch = _t()
    return torch.full(shape, float("nan"), dtype=dt, device="cuda")


def rms_ref(x: Any, w: Any, eps: float, bias: float = 0.0) -> Any:
    x = x.double()
    return x * (x.pow(2).mean(-1, keepdim=True) + eps).rsqrt() * (w.double() + bias)


TOL = {"bfloat16": (2e-2, 2e-2), "float16": (5e-3, 5e-3), "float32": (1e-4, 1e-5)}


def tol(dt: Any) -> tuple[float, float]:
    return TOL[str(dt).split(".")[-1]]


M_ROWS, H = 257, 4096  # an odd row count: no whole-multiple coincidences


def case_rmsnorm(variant: str) -> Case:
    torch, dt = _t(), dtype_of(variant)
    x, w = torch.randn(M_ROWS, H, dtype=dt, device="cuda"), torch.randn(H, dtype=dt, device="cuda")
    out = nan_like((M_ROWS, H), dt)
    nw = math.ceil(min(1024, H // 8) / 32)
    return Case([x, w, out, H, H, H, 0.0, 1e-6], (M_ROWS, 1, 1), (32, nw, 1), nw * 4, [out],
                lambda: close(out, rms_ref(x, w, 1e-6), *tol(dt)))


def case_rmsnorm_quant(variant: str) -> Case:
    torch, dt = _t(), dtype_of(variant)
    x, w = torch.randn(M_ROWS, H, dtype=dt, device="cuda"), torch.randn(H, dtype=dt, device="cuda")
    out = torch.full((M_ROWS, H), 0x7F, dtype=torch.uint8, device="cuda")  # 0x7f: NaN in e4m3
    scale = torch.tensor([0.05], dtype=torch.float32, device="cuda")
    nw = math.ceil(min(1024, H // 8) / 32)

    def check() -> str:
        got = out.view(torch.float8_e4m3fn).double()
        ref = (rms_ref(x, w, 1e-6) / 0.05).clamp(-448, 448)
        return close(got, ref, 0.13, 0.02)
    # the output is typed f8e4m3 (FlashInfer's __nv_fp8_e4m3*): passed as that, allocated as bytes to fill with NaN
    return Case([x, w, out.view(torch.float8_e4m3fn), H, H, H, 0.0, scale, 1e-6], (M_ROWS, 1, 1), (32, nw, 1),
                nw * 4, [], check)


def case_qk_rmsnorm(variant: str) -> Case:
    torch, dt = _t(), dtype_of(variant)
    b, n, d = 33, 8, 128
    x, w = torch.randn(b, n, d, dtype=dt, device="cuda"), torch.randn(d, dtype=dt, device="cuda")
    out = nan_like((b, n, d), dt)
    return Case([x, w, out, d, b, n, n * d, d, n * d, d, 0.0, 1e-6], (math.ceil(b * n / 4), 1, 1), (32, 4, 1), 0,
                [out], lambda: close(out, rms_ref(x, w, 1e-6), *tol(dt)))


def _fused_add(dt: Any) -> tuple[Any, Any, Any, Any, Any]:
    torch = _t()
    x, r = torch.randn(M_ROWS, H, dtype=dt, device="cuda"), torch.randn(M_ROWS, H, dtype=dt, device="cuda")
    w = torch.randn(H, dtype=dt, device="cuda")
    s = (x.double() + r.double())
    return x, r, w, s, rms_ref(s.to(dt), w, 1e-6)


def case_fused_add_rmsnorm(variant: str) -> Case:
    dt = dtype_of(variant)
    x, r, w, s, ref = _fused_add(dt)
    nw = math.ceil(min(1024, H // 8) / 32)

    def check() -> str:
        return close(r, s, *tol(dt), what="residual") or close(x, ref, *tol(dt), what="input (normed)")
    return Case([x, r, w, H, H, H, 0.0, 1e-6], (M_ROWS, 1, 1), (32, nw, 1), (math.ceil(nw / 4) * 4 + H) * 4, [],
                check)


def case_fused_add_rmsnorm_quant(variant: str) -> Case:
    torch, dt = _t(), dtype_of(variant)
    x, r, w, s, ref = _fused_add(dt)
    out = torch.full((M_ROWS, H), 0x7F, dtype=torch.uint8, device="cuda")
    scale = torch.tensor([0.05], dtype=torch.float32, device="cuda")
    nw = math.ceil(min(1024, H // 8) / 32)

    def check() -> str:
        return close(r, s, *tol(dt), what="residual") or close(
            out.view(torch.float8_e4m3fn).double(), (ref / 0.05).clamp(-448, 448), 0.13, 0.02)
    return Case([x, r, w, out.view(torch.float8_e4m3fn), H, H, H, H, 0.0, scale, 1e-6], (M_ROWS, 1, 1), (32, nw, 1),
                (math.ceil(nw / 4) * 4 + H) * 4, [], check)


def case_fused_add_rmsnorm_fp8_block_quant(variant: str) -> Case:
    torch, dt = _t(), dtype_of(variant)
    x, r, w, s, ref = _fused_add(dt)
    out = torch.full((M_ROWS, H), 0x7F, dtype=torch.uint8, device="cuda")
    bscale = nan_like((H // 128, M_ROWS), torch.float32)  # [K/128, M]: scale_stride_m = M
    normed = nan_like((M_ROWS, H), dt)
    nw = math.ceil(H // 8 / 32)

    def check() -> str:
        err = close(r, s, *tol(dt), what="residual") or close(normed, ref, *tol(dt), what="normed_out")
        if err:
            return err
        deq = out.view(torch.float8_e4m3fn).double().view(M_ROWS, H // 128, 128) * bscale.double().t()[..., None]
        return close(deq.view(M_ROWS, H), normed.double(), 0.13, 0.05, "dequantized out")
    return Case([x, r, w, out.view(torch.float8_e4m3fn), bscale, normed, H, H, H, H, H, M_ROWS, 1e-6], (M_ROWS, 1, 1),
                (32, nw, 1),
                math.ceil(nw / 4) * 4 * 4, [bscale, normed], check)


def case_layernorm(variant: str) -> Case:
    torch = _t()
    x = torch.randn(M_ROWS, H, dtype=torch.bfloat16, device="cuda")
    g, b = torch.randn(H, device="cuda"), torch.randn(H, device="cuda")
    out = nan_like((M_ROWS, H), torch.bfloat16)
    z = ctypes.c_void_p(0)

    def check() -> str:
        ref = torch.nn.functional.layer_norm(x.double(), (H,), g.double(), b.double(), 1e-5)
        return close(out, ref, 2e-2, 3e-2)
    # generalLayerNorm<__nv_bfloat162, float2, int8_t, USE_SHMEM=true> as norm.cuh's LayerNorm launches it:
    # hidden_dim counts scalar elements (the kernel walks hidden_dim / 2 packed pairs), grid = tokens, block =
    # min(hidden_dim, 1024) rounded up to a warp, dynamic smem = hidden_dim * sizeof(__nv_bfloat16)
    block = 32 * ((min(H, 1024) + 31) // 32)
    return Case([x, g, b, out, 1e-5, M_ROWS, H, z, z, z, z, z, False], (M_ROWS, 1, 1), (block, 1, 1),
                H * 2, [out], check)


def _act(name: str) -> Callable[[Any], Any]:
    torch = _t()
    if name == "silu":
        return torch.nn.functional.silu
    if name == "gelu":
        return lambda v: torch.nn.functional.gelu(v)
    return lambda v: torch.nn.functional.gelu(v, approximate="tanh")


def case_act(name: str) -> Callable[[str], Case]:
    def make(variant: str) -> Case:
        torch, dt = _t(), dtype_of(variant)
        d = 5632
        x = torch.randn(M_ROWS, 2 * d, dtype=dt, device="cuda")
        out = nan_like((M_ROWS, d), dt)
        ref = _act(name)(x[:, :d].double()) * x[:, d:].double()
        return Case([out, x, d], (M_ROWS, 1, 1), (min(d // 8, 256), 1, 1), 0, [out],
                    lambda: close(out, ref, *tol(dt)))
    return make


NNZ, HQ, HK, HD = 301, 8, 2, 128


def rope_ref(x: Any, pos: Any, rot: int = HD, theta: float = 1e4) -> Any:
    torch = _t()
    half = rot // 2
    inv = 1.0 / theta ** (torch.arange(half, dtype=torch.float64, device=x.device) * 2 / rot)
    ang = pos.double()[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :], torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
    xd = x.double()
    rotated = torch.cat([-xd[..., half:rot], xd[..., :half]], -1)
    return xd[..., :rot] * cos + rotated * sin


def _rope_io(dt: Any) -> tuple[Any, Any, Any, Any, Any]:
    torch = _t()
    q, k = torch.randn(NNZ, HQ, HD, dtype=dt, device="cuda"), torch.randn(NNZ, HK, HD, dtype=dt, device="cuda")
    pos = torch.randint(0, 4096, (NNZ,), dtype=torch.int32, device="cuda")
    return q, k, nan_like((NNZ, HQ, HD), dt), nan_like((NNZ, HK, HD), dt), pos


def _strides() -> list[int]:
    return [HQ * HD, HD, HK * HD, HD, HQ * HD, HD, HK * HD, HD]


def _rope_check(q: Any, k: Any, qo: Any, ko: Any, pos: Any, dt: Any) -> Callable[[], str]:
    return lambda: close(qo, rope_ref(q, pos), *tol(dt), what="q_rope") or close(ko, rope_ref(k, pos), *tol(dt),
                                                                               what="k_rope")


def case_rope(head_parallel: bool, cache: bool) -> Callable[[str], Case]:
    def make(variant: str) -> Case:
        torch, dt = _t(), dtype_of(variant)
        q, k, qo, ko, pos = _rope_io(dt)
        bdx, bdy = 16, 8
        grid = (math.ceil(NNZ / bdy), HQ + HK if head_parallel else 1, 1)
        if cache:
            p = torch.arange(4096, dtype=torch.float64, device="cuda")[:, None]
            inv = 1.0 / 1e4 ** (torch.arange(HD // 2, dtype=torch.float64, device="cuda") * 2 / HD)
            csc = torch.cat([(p * inv).cos(), (p * inv).sin()], -1).float().contiguous()
            args = [q, k, qo, ko, csc, pos, NNZ, HQ, HK, HD, *_strides()]
        else:
            args = [q, k, qo, ko, pos, NNZ, HQ, HK, HD, *_strides(), 0.0, 0.0, 1.0, 1e-4]
        return Case(args, grid, (bdx, bdy, 1), 0, [qo, ko], _rope_check(q, k, qo, ko, pos, dt))
    return make


def case_rope_indptr(variant: str) -> Case:
    torch, dt = _t(), dtype_of(variant)
    q, k, qo, ko, _ = _rope_io(dt)
    indptr = torch.tensor([0, 100, 101, 250, NNZ], dtype=torch.int32, device="cuda")
    offsets = torch.tensor([7, 0, 1000, 33], dtype=torch.int32, device="cuda")
    counts = indptr[1:] - indptr[:-1]
    pos = torch.cat([torch.arange(int(c), device="cuda", dtype=torch.int32) + int(o)
                     for c, o in zip(counts.tolist(), offsets.tolist())])
    args = [q, k, qo, ko, indptr, offsets, 4, HQ, HK, HD, *_strides(), 0.0, 0.0, 1.0, 1e-4]
    return Case(args, (4 * (HQ + HK), 1, 1), (16, 8, 1), 0, [qo, ko], _rope_check(q, k, qo, ko, pos, dt))


def case_rope_quantize(variant: str) -> Case:
    torch, dt = _t(), dtype_of(variant)
    rope_dim, nope_dim = 64, 512
    qr, kr = torch.randn(NNZ, HQ, rope_dim, dtype=dt, device="cuda"), torch.randn(NNZ, 1, rope_dim, dtype=dt,
                                                                                    device="cuda")
    qn, kn = torch.randn(NNZ, HQ, nope_dim, dtype=dt, device="cuda"), torch.randn(NNZ, 1, nope_dim, dtype=dt,
                                                                                    device="cuda")
    outs = [torch.full(t.shape, 0x7F, dtype=torch.uint8, device="cuda") for t in (qr, kr, qn, kn)]
    pos = torch.randint(0, 4096, (NNZ,), dtype=torch.int32, device="cuda")
    p = torch.arange(4096, dtype=torch.float64, device="cuda")[:, None]
    inv = 1.0 / 1e4 ** (torch.arange(rope_dim // 2, dtype=torch.float64, device="cuda") * 2 / rope_dim)
    csc = torch.cat([(p * inv).cos(), (p * inv).sin()], -1).float().contiguous()
    st = [HQ * rope_dim, rope_dim, HQ * nope_dim, nope_dim, HQ * rope_dim, rope_dim, HQ * nope_dim, nope_dim,
          rope_dim, rope_dim, nope_dim, nope_dim, rope_dim, rope_dim, nope_dim, nope_dim]
    args = [qr, kr, qn, kn, *(o.view(torch.float8_e4m3fn) for o in outs), csc, pos, NNZ, HQ, 1, rope_dim, nope_dim, *st,
            1.0, 1.0]
    bdx = math.ceil(rope_dim / 16)  # RopeQuantize's launcher: vec_size 32 / sizeof(T), 128 threads
    bdy = max(128 // bdx, 1)
    nblks_x = math.ceil(NNZ / bdy)
    rope_chunks, nope_chunks = 1, math.ceil(nope_dim / rope_dim)
    grid = (nblks_x, HQ * (rope_chunks + nope_chunks) + 1 * (rope_chunks + nope_chunks), 1)

    def check() -> str:
        f8 = [o.view(torch.float8_e4m3fn).double() for o in outs]
        return (close(f8[0], rope_ref(qr, pos, rope_dim), 0.13, 0.05, "q_rope_out")
                or close(f8[1], rope_ref(kr, pos, rope_dim), 0.13, 0.05, "k_rope_out")
                or close(f8[2], qn.double(), 0.13, 0.05, "q_nope_out")
                or close(f8[3], kn.double(), 0.13, 0.05, "k_nope_out"))
    return Case(args, grid, (bdx, bdy, 1), 0, [], check)


class PagedKv:
    """paged_kv_t bytes from the manifest (built by FlashInfer's host constructor at gpu-prepare time); the GPU run
    writes its pointer fields."""

    manifest: dict[str, Any] = {}


def case_rope_quantize_append_paged_kv_cache(variant: str) -> Case:
    """GQA append: q rope'd and quantized (fp8), k (rope'd rope part + nope part) and v appended into an fp8 paged
    cache (NHD, page size 16); every target slot checked, the rest of the cache untouched."""
    torch, dt = _t(), dtype_of(variant)
    info = PagedKv.manifest.get("paged_kv")
    if info is None:
        raise RuntimeError(f"no paged_kv_t bytes in the manifest: {PagedKv.manifest.get('paged_kv_error', '?')}")
    cfg = info["config"]
    hk, page, d = cfg["num_heads"], cfg["page_size"], cfg["head_dim"]
    nreq = cfg["batch_size"]
    rope_dim = 64
    nope_dim = d - rope_dim
    lens = [40, 1, 60][:nreq]
    nnz = sum(lens)
    pages = [math.ceil(n / page) for n in lens]
    num_pages = sum(pages) + 2
    indices = torch.randperm(num_pages, device="cuda")[: sum(pages)].to(torch.int32)
    indptr = torch.tensor([0, *torch.tensor(pages).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    last = torch.tensor([n - (p - 1) * page for n, p in zip(lens, pages)], dtype=torch.int32, device="cuda")
    batch_idx = torch.cat([torch.full((n,), b, dtype=torch.int32) for b, n in enumerate(lens)]).cuda()
    positions = torch.cat([torch.arange(n, dtype=torch.int32) for n in lens]).cuda()
    pos_ids = torch.randint(0, 4096, (nnz,), dtype=torch.int32, device="cuda")
    qr = torch.randn(nnz, HQ, rope_dim, dtype=dt, device="cuda")
    qn = torch.randn(nnz, HQ, nope_dim, dtype=dt, device="cuda")
    kr = torch.randn(nnz, hk, rope_dim, dtype=dt, device="cuda")
    kn = torch.randn(nnz, hk, nope_dim, dtype=dt, device="cuda")
    v = torch.randn(nnz, hk, d, dtype=dt, device="cuda")
    qr_out = torch.full((nnz, HQ, rope_dim), 0x7F, dtype=torch.uint8, device="cuda")
    qn_out = torch.full((nnz, HQ, nope_dim), 0x7F, dtype=torch.uint8, device="cuda")
    k_cache = torch.full((num_pages, page, hk, d), 0x7F, dtype=torch.uint8, device="cuda")
    v_cache = torch.full((num_pages, page, hk, d), 0x7F, dtype=torch.uint8, device="cuda")
    p = torch.arange(4096, dtype=torch.float64, device="cuda")[:, None]
    inv = 1.0 / 1e4 ** (torch.arange(rope_dim // 2, dtype=torch.float64, device="cuda") * 2 / rope_dim)
    csc = torch.cat([(p * inv).cos(), (p * inv).sin()], -1).float().contiguous()
    raw = bytearray(bytes.fromhex(info["hex"]))
    for name, t in (("k_data", k_cache), ("v_data", v_cache), ("indices", indices), ("indptr", indptr),
                    ("last_page_len", last)):
        raw[info[name]:info[name] + 8] = t.data_ptr().to_bytes(8, "little")
    kv = ctypes.create_string_buffer(bytes(raw), len(raw))
    sq, sk = 1.0, 1.0
    params = struct_params(nnz, HQ, hk, rope_dim, nope_dim,
                           [HQ * rope_dim, rope_dim, HQ * nope_dim, nope_dim, HQ * rope_dim, rope_dim,
                            HQ * nope_dim, nope_dim, hk * rope_dim, rope_dim, hk * nope_dim, nope_dim, hk * d, d],
                           sq, sk)
    f8 = torch.float8_e4m3fn  # the outputs are typed f8e4m3: passed as that, allocated as bytes to fill with NaN
    args = [qr, kr, qn, kn, v, qr_out.view(f8), qn_out.view(f8), kv, batch_idx, positions, csc, pos_ids, params]
    bdx = math.ceil(rope_dim / 16)
    bdy = max(128 // bdx, 1)
    nope_chunks = math.ceil(nope_dim / rope_dim)
    grid = (math.ceil(nnz / bdy), HQ + hk + hk * nope_chunks + hk + HQ * nope_chunks, 1)

    def check() -> str:
        f8 = torch.float8_e4m3fn
        page_of = indices.long()[indptr.long()[batch_idx.long()] + positions.long() // page]
        slot = positions.long() % page
        k_got = k_cache.view(f8)[page_of, slot].double()  # [nnz, hk, d]
        v_got = v_cache.view(f8)[page_of, slot].double()
        err = (close(qr_out.view(f8).double(), rope_ref(qr, pos_ids, rope_dim) * sq, 0.13, 0.05, "q_rope_out")
               or close(qn_out.view(f8).double(), qn.double() * sq, 0.13, 0.05, "q_nope_out")
               or close(k_got[..., :rope_dim], rope_ref(kr, pos_ids, rope_dim) * sk, 0.13, 0.05, "k cache rope")
               or close(k_got[..., rope_dim:], kn.double() * sk, 0.13, 0.05, "k cache nope")
               or close(v_got, v.double() * sk, 0.13, 0.05, "v cache"))
        if err:
            return err
        touched = torch.zeros(num_pages, page, dtype=torch.bool, device="cuda")
        touched[page_of, slot] = True
        if bool((k_cache[~touched] != 0x7F).any()) or bool((v_cache[~touched] != 0x7F).any()):
            return "cache slots outside the appended tokens were written"
        return ""
    return Case(args, grid, (bdx, bdy, 1), 0, [], check)


def struct_params(nnz: int, hq: int, hk: int, rope: int, nope: int, strides: list[int], sq: float,
                  sk: float) -> Any:
    """RopeQuantizeAppendPagedKVCacheParams (pos_enc.cuh): 5 uint32, 14 size_t strides, 2 floats; 144 bytes."""
    class Params(ctypes.Structure):
        _fields_ = [("u", ctypes.c_uint32 * 5), ("s", ctypes.c_size_t * 14), ("f", ctypes.c_float * 2)]
    return Params((ctypes.c_uint32 * 5)(nnz, hq, hk, rope, nope), (ctypes.c_size_t * 14)(*strides),
                  (ctypes.c_float * 2)(sq, sk))



CUDA_CASES: dict[str, Callable[[str], Case]] = {  # corpus.flashinfer_sampling.CASES holds the sampling ones
    "rmsnorm": case_rmsnorm, "rmsnorm_quant": case_rmsnorm_quant, "qk_rmsnorm": case_qk_rmsnorm,
    "fused_add_rmsnorm": case_fused_add_rmsnorm, "fused_add_rmsnorm_quant": case_fused_add_rmsnorm_quant,
    "fused_add_rmsnorm_fp8_block_quant": case_fused_add_rmsnorm_fp8_block_quant, "layernorm": case_layernorm,
    "silu_and_mul": case_act("silu"), "gelu_and_mul": case_act("gelu"), "gelu_tanh_and_mul": case_act("gelu_tanh"),
    "rope_pos_ids_cos_sin_cache": case_rope(False, True),
    "rope_pos_ids_cos_sin_cache_head_parallel": case_rope(True, True),
    "rope_pos_ids": case_rope(False, False), "rope_pos_ids_head_parallel": case_rope(True, False),
    "rope_indptr": case_rope_indptr, "rope_quantize": case_rope_quantize,
    "rope_quantize_append_paged_kv_cache": case_rope_quantize_append_paged_kv_cache,
}


# ---- CuTe host programs: (args..., no stream: the entry takes the stream last)

def host_rmsnorm(variant: str) -> Case:
    torch, dt = _t(), dtype_of(variant)
    x, w = torch.randn(M_ROWS, H, dtype=dt, device="cuda"), torch.randn(H, dtype=dt, device="cuda")
    y = nan_like((M_ROWS, H), dt)
    return Case([x, w, y, M_ROWS, 1e-6], (0, 0, 0), None, 0, [y], lambda: close(y, rms_ref(x, w, 1e-6), *tol(dt)),
                host=True)


def host_qk_rmsnorm(variant: str) -> Case:
    torch, dt = _t(), dtype_of(variant)
    b, n, d = 33, 8, 128
    x, w = torch.randn(b, n, d, dtype=dt, device="cuda"), torch.randn(d, dtype=dt, device="cuda")
    y = nan_like((b, n, d), dt)
    return Case([x, w, y, b, n, 1e-6], (0, 0, 0), None, 0, [y], lambda: close(y, rms_ref(x, w, 1e-6), *tol(dt)),
                host=True)


def host_rmsnorm_quant(variant: str) -> Case:
    torch, dt = _t(), dtype_of(variant)
    x, w = torch.randn(M_ROWS, H, dtype=dt, device="cuda"), torch.randn(H, dtype=dt, device="cuda")
    y = torch.full((M_ROWS, H), float("nan"), device="cuda").to(torch.float8_e4m3fn)
    s = torch.tensor([0.05], device="cuda")
    return Case([x, w, y, M_ROWS, s, 1e-6], (0, 0, 0), None, 0, [], lambda: close(
        y.double(), (rms_ref(x, w, 1e-6) / 0.05).clamp(-448, 448), 0.13, 0.02), host=True)


def host_fused_add_rmsnorm(variant: str) -> Case:
    dt = dtype_of(variant)
    x, r, w, s, ref = _fused_add(dt)
    return Case([x, r, w, M_ROWS, 1e-6], (0, 0, 0), None, 0, [], lambda: close(r, s, *tol(dt), what="residual")
                or close(x, ref, *tol(dt), what="input (normed)"), host=True)


def host_layernorm(variant: str) -> Case:
    torch, dt = _t(), dtype_of(variant)
    x = torch.randn(M_ROWS, H, dtype=dt, device="cuda")
    g, b = torch.randn(H, device="cuda"), torch.randn(H, device="cuda")
    y = nan_like((M_ROWS, H), dt)
    return Case([y, x, g, b, M_ROWS, 1e-6], (0, 0, 0), None, 0, [y], lambda: close(
        y, torch.nn.functional.layer_norm(x.double(), (H,), g.double(), b.double(), 1e-6), 2e-2, 3e-2), host=True)


def host_gemm_direct(variant: str) -> Case:
    torch = _t()
    m, n, k = 24, 4096, 4096
    a, b = torch.randn(m, k, dtype=torch.bfloat16, device="cuda"), torch.randn(n, k, dtype=torch.bfloat16,
                                                                               device="cuda")
    c = nan_like((m, n), torch.bfloat16)
    return Case([a, b, c], (0, 0, 0), None, 0, [c], lambda: close(c, a.double() @ b.double().t(), 2e-2, 0.5),
                host=True)


E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def host_rmsnorm_fp4quant(variant: str) -> Case:
    """cute_dsl/rmsnorm_fp4quant (NVFP4: 16-element blocks, e4m3 block scales, linear scale layout): the FP4 values
    dequantized with their block scales (global scale 1) against rmsnorm in float64, within FP4's resolution."""
    torch, dt = _t(), dtype_of(variant)
    x, w = torch.randn(M_ROWS, H, dtype=dt, device="cuda"), torch.randn(H, dtype=dt, device="cuda")
    y = torch.full((M_ROWS, H // 2), 0xFF, dtype=torch.uint8, device="cuda")
    sf = torch.full((M_ROWS, H // 16), 0x7F, dtype=torch.uint8, device="cuda")  # 0x7f: e4m3 NaN until written
    gs = torch.ones(1, dtype=torch.float32, device="cuda")

    def check() -> str:
        table = torch.tensor(E2M1, dtype=torch.float64, device="cuda")
        nib = torch.stack([y & 0xF, y >> 4], -1).view(M_ROWS, H).long()
        vals = table[nib & 7] * torch.where(nib >= 8, -1.0, 1.0)
        scale = sf.view(torch.float8_e4m3fn).double()
        if torch.isnan(scale).any():
            return f"block scales: {int(torch.isnan(scale).sum())} not written"
        deq = (vals.view(M_ROWS, H // 16, 16) * scale[..., None]).view(M_ROWS, H)
        ref = rms_ref(x, w, 1e-6)
        amax = ref.view(M_ROWS, H // 16, 16).abs().amax(-1, keepdim=True).expand(-1, -1, 16).reshape(M_ROWS, H)
        err = (deq - ref).abs() > 0.26 * amax + 1e-3  # half of FP4's widest step (4 -> 6) relative to the block max
        return f"{int(err.sum())}/{err.numel()} dequantized values off" if bool(err.any()) else ""
    return Case([x, w, y, sf, gs, M_ROWS, 1e-6], (0, 0, 0), None, 0, [], check, host=True)


HOST_CASES: dict[str, Callable[[str], Case]] = {
    "cute_rmsnorm_fp4quant": host_rmsnorm_fp4quant,
    "cute_rmsnorm": host_rmsnorm, "cute_qk_rmsnorm": host_qk_rmsnorm, "cute_rmsnorm_quant": host_rmsnorm_quant,
    "cute_fused_add_rmsnorm": host_fused_add_rmsnorm, "cute_layernorm": host_layernorm,
    "cute_gemm_bf16_direct": host_gemm_direct,
}
