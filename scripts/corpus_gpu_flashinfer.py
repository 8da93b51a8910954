#!/usr/bin/env python3
"""FlashInfer corpus on the GPU: every kernel of libflashinfer.so launched from C and from Python, checked, timed.

    python3 scripts/corpus_gpu_flashinfer.py --out $OUT            # on the GPU machine (carry .gpu)
    python3 scripts/corpus_gpu_flashinfer.py --dry-run             # anywhere: load the library, check the manifest

Input: ``.gpu/corpus-fi/`` (``python -m corpus.flashinfer --gpu-prepare`` on the build machine): libflashinfer.so,
its headers, flashinfer.kpack and manifest.json. For each kernel family (CUDA C++) and host program (CuTe DSL) of
the manifest, for each variant (element type): fresh random inputs, outputs pre-filled with a sentinel (NaN / -1),
then

* C++: a harness compiled here with g++ (-std=c++17 -Wall -Wextra -Werror) against ``flashinfer.h``/``.hpp`` and
  linked with ``-lflashinfer`` calls the typed C entry (``flashinfer_<family>_<variant>``, or the host program's
  entry); Python only hands it the argument bytes, laid out per the prototype read from ``flashinfer.h`` (the
  harness checks each parameter's size against it before the call);
* Python: ``kernelpack.load(libflashinfer.so).<family>(...)``;

each result compared with a torch float64 reference (FlashInfer's own JIT needs nvcc+ninja and network, absent on the
GPU machine: the reference is the math of the kernel, written here), every output element checked written, and the
time of both launches measured (``corpus.gpu_timing``): kernel time -- CUDA events around back-to-back launches
queued behind a sleep kernel, so the GPU has a backlog and the events measure GPU execution rather than the host's
launch cost -- and, apart, the host time to issue one launch (median over ``--reps`` / 5 batches). A table goes to
stdout, JSON to ``$OUT/corpus_gpu_flashinfer.json``. A kernel that fails is recorded and the run goes on.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpack.clib.cstructs import KpLaunch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # corpus.gpu_timing
LIB = "flashinfer"


# ------------------------------------------------------------------------------------------------ cases

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


# ---- sampling: float probabilities over V, int32 ids; results are random: checked against the distribution rules

B, V = 37, 32000


def _probs() -> Any:
    torch = _t()
    return torch.softmax(torch.randn(B, V, device="cuda") * 3, -1)


def _sample_args(extra: list[Any], d: int = V) -> list[Any]:
    torch = _t()
    seed = int(torch.randint(0, 2**31, (1,)))
    return [*extra, d, None, seed, None, 0, 0, 0]


def _ids_ok(out: Any, allowed: Any) -> str:
    o = out.long()
    if (o < 0).any() or (o >= V).any():
        return f"sampled ids out of range: {o[(o < 0) | (o >= V)][:5].tolist()}"
    ok = allowed.gather(1, o[:, None]).squeeze(1)
    if not bool(ok.all()):
        return f"{int((~ok).sum())}/{B} sampled ids outside the allowed set"
    return ""


def case_sampling_from_prob(variant: str) -> Case:
    torch = _t()
    p = _probs()
    out, valid = torch.full((B,), -1, dtype=torch.int32, device="cuda"), torch.zeros(B, dtype=torch.bool,
                                                                                       device="cuda")
    return Case(_sample_args([p, out, valid, None]), (B, 1, 1), None, 0, [], lambda: _ids_ok(out, p > 0))


def case_sampling_from_logits(variant: str) -> Case:
    torch = _t()
    logits = torch.randn(B, V, device="cuda") * 3
    out = torch.full((B,), -1, dtype=torch.int32, device="cuda")
    return Case(_sample_args([logits, out, None]), (B, 1, 1), None, 0, [],
                lambda: _ids_ok(out, torch.isfinite(logits)))


def _topk_mask(p: Any, k: int) -> Any:
    kth = p.topk(k, -1).values[:, -1:]
    return p >= kth


def _topp_mask(p: Any, top_p: float) -> Any:
    torch = _t()
    s, idx = p.double().sort(-1, descending=True)
    keep = (s.cumsum(-1) - s) < top_p + 1e-6
    mask = torch.zeros_like(keep)
    return mask.scatter(1, idx, keep)


def case_top_k_sampling(variant: str) -> Case:
    torch = _t()
    p = _probs()
    out, valid = torch.full((B,), -1, dtype=torch.int32, device="cuda"), torch.zeros(B, dtype=torch.bool,
                                                                                       device="cuda")
    return Case(_sample_args([p, out, valid, None, None, 50]), (B, 1, 1), None, 0, [],
                lambda: _ids_ok(out, _topk_mask(p, 50)))


def case_top_p_sampling(variant: str) -> Case:
    torch = _t()
    p = _probs()
    out, valid = torch.full((B,), -1, dtype=torch.int32, device="cuda"), torch.zeros(B, dtype=torch.bool,
                                                                                       device="cuda")
    return Case(_sample_args([p, out, valid, None, None, 0.9]), (B, 1, 1), None, 0, [],
                lambda: _ids_ok(out, _topp_mask(p, 0.9)))


def case_min_p_sampling(variant: str) -> Case:
    torch = _t()
    p = _probs()
    out, valid = torch.full((B,), -1, dtype=torch.int32, device="cuda"), torch.zeros(B, dtype=torch.bool,
                                                                                       device="cuda")
    allowed = p >= 0.1 * p.max(-1, keepdim=True).values * (1 - 1e-5)
    return Case(_sample_args([p, None, out, valid, None, 0.1]), (B, 1, 1), None, 0, [],
                lambda: _ids_ok(out, allowed))


def case_top_k_top_p_sampling(variant: str) -> Case:
    torch = _t()
    p = _probs()
    out, valid = torch.full((B,), -1, dtype=torch.int32, device="cuda"), torch.zeros(B, dtype=torch.bool,
                                                                                       device="cuda")
    return Case(_sample_args([p, None, None, out, valid, None, 50, 0.9]), (B, 1, 1), None, 0, [],
                lambda: _ids_ok(out, _topk_mask(p, 50)))


def case_top_p_renorm(variant: str) -> Case:
    torch = _t()
    p = _probs()
    out = nan_like((B, V), torch.float32)

    def check() -> str:
        # the tokens clearly inside the top-p set (the mass before them under 0.9 by more than fp32's rounding of a
        # 32k-term sum): the kernel sums in fp32, so a token whose fp64 prefix is a hair under 0.9 may fall outside
        keep = _topp_mask(p, 0.9 - 1e-4)
        ref = torch.where(keep, p.double(), 0.0)
        ref = ref / ref.sum(-1, keepdim=True)
        # the kernel's pivot search may keep ties at the boundary: compare the kept mass and the zeros
        dropped = int(((out > 0) < (ref > 0)).sum())
        return close(out.sum(-1), torch.ones(B, dtype=torch.float64, device="cuda"), 1e-3, 1e-3, "row sums") or (
            "" if not dropped else f"{dropped} of {int((ref > 0).sum())} tokens of the top-p set dropped")
    return Case([p, out, None, 0.9, V], (B, 1, 1), None, 0, [out], check)


def case_online_softmax_fused(variant: str) -> Case:
    torch = _t()
    logits = torch.randn(B, V, device="cuda") * 3
    out = nan_like((B, V), torch.float32)
    return Case([logits, out, None, 0.7, V], (B, 1, 1), None, 0, [out],
                lambda: close(out, torch.softmax(logits.double() / 0.7, -1), 1e-4, 1e-7))


def online_softmax_slice_stride(d: int, num_slices: int, align_elems: int) -> int:
    """sampling.cuh OnlineSoftmaxMapKernel: ``round_up(ceil_div(d, num_slices), vec_alignment_elems)``."""
    per = -(-d // num_slices)
    return -(-per // align_elems) * align_elems


def case_online_softmax_map(variant: str) -> Case:
    torch = _t()
    logits = torch.randn(B, V, device="cuda") * 3
    slices = math.ceil(V / 8192)  # the launcher's num_slices: ceil_div(d, DEFAULT_SLICE_SIZE)
    # the kernel's slice y covers [y * stride, min((y + 1) * stride, d)) with stride = round_up(ceil_div(d,
    # num_slices), alignof(vec_t<float, 4>) / sizeof(float)) -- not DEFAULT_SLICE_SIZE
    stride = online_softmax_slice_stride(V, slices, 4)
    partial = nan_like((B, slices, 2), torch.float32)  # PartialSoftmaxResult {float max_val; float denominator}

    def check() -> str:
        x = (logits.double() / 0.7).view(B, -1)
        ref_max = torch.stack([x[:, i * stride:(i + 1) * stride].max(-1).values for i in range(slices)], 1)
        ref_den = torch.stack([(x[:, i * stride:(i + 1) * stride] - ref_max[:, i:i + 1]).exp().sum(-1)
                               for i in range(slices)], 1)
        return close(partial[..., 0], ref_max, 1e-5, 1e-5, "max") or close(partial[..., 1], ref_den, 1e-4, 1e-4,
                                                                               "denominator")
    return Case([logits, partial, None, 0.7, V, slices], (B, slices, 1), None, 0, [partial], check)


def case_online_softmax_reduce(variant: str) -> Case:
    torch = _t()
    logits = torch.randn(B, V, device="cuda") * 3
    slices = math.ceil(V / 8192)
    x = logits.double() / 0.7
    mx = torch.stack([x[:, i * 8192:(i + 1) * 8192].max(-1).values for i in range(slices)], 1)
    den = torch.stack([(x[:, i * 8192:(i + 1) * 8192] - mx[:, i:i + 1]).exp().sum(-1) for i in range(slices)], 1)
    partial = torch.stack([mx, den], -1).float().contiguous()
    out = nan_like((B, V), torch.float32)
    return Case([logits, out, partial, None, 0.7, V, slices], (B, 1, 1), None, 0, [out],
                lambda: close(out, torch.softmax(x, -1), 1e-4, 1e-7))


def case_chain_speculative(variant: str) -> Case:
    torch = _t()
    n = 4
    draft = torch.softmax(torch.randn(B, n, V, device="cuda"), -1)
    target = torch.softmax(torch.randn(B, n + 1, V, device="cuda"), -1)
    draft_ids = torch.randint(0, V, (B, n), dtype=torch.int32, device="cuda")
    out = torch.full((B, n + 1), -2, dtype=torch.int32, device="cuda")
    acc, emitted = torch.zeros(B, dtype=torch.int32, device="cuda"), torch.zeros(B, dtype=torch.int32,
                                                                                   device="cuda")

    def check() -> str:
        e = emitted.long()
        if (e < 0).any() or (e > n).any():
            return f"emitted counts out of [0, {n}]"
        for b in range(B):
            row = out[b].long()
            k = int(e[b])
            if row[:k].tolist() != draft_ids[b, :k].long().tolist():
                return f"row {b}: accepted prefix differs from the draft ids"
            if not 0 <= int(row[k]) < V:
                return f"row {b}: no token emitted after {k} accepted"
        return ""
    return Case([draft, draft_ids, target, out, acc, emitted, n, V, None, 0, None, 0, 0, 0], (B, 1, 1), None, 0,
                [], check)


CUDA_CASES: dict[str, Callable[[str], Case]] = {
    "rmsnorm": case_rmsnorm, "rmsnorm_quant": case_rmsnorm_quant, "qk_rmsnorm": case_qk_rmsnorm,
    "fused_add_rmsnorm": case_fused_add_rmsnorm, "fused_add_rmsnorm_quant": case_fused_add_rmsnorm_quant,
    "fused_add_rmsnorm_fp8_block_quant": case_fused_add_rmsnorm_fp8_block_quant, "layernorm": case_layernorm,
    "silu_and_mul": case_act("silu"), "gelu_and_mul": case_act("gelu"), "gelu_tanh_and_mul": case_act("gelu_tanh"),
    "rope_pos_ids_cos_sin_cache": case_rope(False, True),
    "rope_pos_ids_cos_sin_cache_head_parallel": case_rope(True, True),
    "rope_pos_ids": case_rope(False, False), "rope_pos_ids_head_parallel": case_rope(True, False),
    "rope_indptr": case_rope_indptr, "rope_quantize": case_rope_quantize,
    "rope_quantize_append_paged_kv_cache": case_rope_quantize_append_paged_kv_cache,
    "sampling_from_logits": case_sampling_from_logits, "sampling_from_prob": case_sampling_from_prob,
    "top_k_sampling_from_prob": case_top_k_sampling, "top_p_sampling_from_prob": case_top_p_sampling,
    "min_p_sampling_from_prob": case_min_p_sampling, "top_k_top_p_sampling_from_prob": case_top_k_top_p_sampling,
    "top_p_renorm_prob": case_top_p_renorm, "online_softmax_fused": case_online_softmax_fused,
    "online_softmax_map": case_online_softmax_map, "online_softmax_reduce": case_online_softmax_reduce,
    "chain_speculative_sampling": case_chain_speculative,
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


# ------------------------------------------------------------------------------------------------ C via ctypes

SCALARS = {"float": ctypes.c_float, "double": ctypes.c_double, "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32,
           "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t, "bool": ctypes.c_bool,
           "_Bool": ctypes.c_bool, "int8_t": ctypes.c_int8, "uint8_t": ctypes.c_uint8, "int": ctypes.c_int,
           "int16_t": ctypes.c_int16, "uint16_t": ctypes.c_uint16}


class Header:
    """Prototypes and by-value structs of flashinfer.h, as ctypes types."""

    def __init__(self, text: str) -> None:
        self.text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        self.structs: dict[str, type] = {}
        for m in re.finditer(r"typedef struct (\w+) \{([^}]*)\} (\w+);", self.text):
            fields = []
            for decl in m.group(2).split(";"):
                decl = decl.strip()
                if not decl:
                    continue
                typ, name = decl.rsplit(None, 1)
                arr = re.match(r"(\w+)\[(\d+)\]", name)
                if arr:
                    fields.append((arr.group(1), self.ctype(typ) * int(arr.group(2))))
                else:
                    fields.append((name.lstrip("*"), self.ctype(typ + ("*" if name.startswith("*") else ""))))
            self.structs[m.group(3)] = type(m.group(3), (ctypes.Structure,), {"_fields_": fields})

    def ctype(self, typ: str) -> Any:
        typ = typ.replace("const ", "").strip()
        if typ.endswith("*"):
            return ctypes.c_void_p
        if typ in self.structs:
            return self.structs[typ]
        if typ in SCALARS:
            return SCALARS[typ]
        if typ == "kp_dtype" or typ.startswith("enum"):
            return ctypes.c_int
        raise KeyError(f"no ctypes type for {typ!r}")

    def prototype(self, symbol: str) -> list[tuple[str, Any]]:
        m = re.search(r"kp_status " + re.escape(symbol) + r"\(([^)]*)\);", self.text)
        if not m:
            raise KeyError(f"{symbol} is not declared in {LIB}.h")
        out = []
        for p in m.group(1).split(","):
            p = p.strip()
            if p in ("void", ""):
                continue
            typ, name = p.rsplit(None, 1)
            star = "*" * name.count("*")
            out.append((name.lstrip("*"), self.ctype(typ + star)))
        return out


def c_value(ct: Any, v: Any, torch: Any) -> Any:
    if isinstance(v, torch.Tensor):
        if ct is ctypes.c_void_p:
            return ctypes.c_void_p(v.data_ptr())
        return fill_struct(ct, v)
    if v is None:
        return ctypes.c_void_p(0) if ct is ctypes.c_void_p else ct(0)
    if isinstance(v, ctypes.c_void_p):
        return v
    if isinstance(v, (ctypes.Array, ctypes.Structure)):  # a by-value C++ struct: the entry takes its address
        return ctypes.c_void_p(ctypes.addressof(v)) if ct is ctypes.c_void_p else v
    return ct(v)


def fill_struct(st: Any, t: Any) -> Any:
    """A CuTe tensor descriptor {data; shape<i>; stride<i>} (dynamic modes only) from a torch tensor."""
    s = st()
    for name, _ in st._fields_:
        if name == "data":
            s.data = t.data_ptr()
        elif name.startswith("shape"):
            setattr(s, name, t.shape[int(name[5:])])
        elif name.startswith("stride"):
            setattr(s, name, t.stride()[int(name[6:])])
    return s


# ------------------------------------------------------------------------------------------------ C++ harness

HARNESS_HEAD = """// Generated by scripts/corpus_gpu_flashinfer.py: each entry of libflashinfer called from C++.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "flashinfer.hpp"

namespace {
template <class T> T load(std::uint64_t address) {
    T value;
    std::memcpy(&value, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(address)), sizeof value);
    return value;
}
template <class... P, std::size_t... I>
int call(kp_status (*f)(P...), const std::uint64_t* args, std::index_sequence<I...>) {
    return static_cast<int>(f(load<P>(args[I])...));
}
template <class... P> int call(kp_status (*f)(P...), const std::uint64_t* args) {
    return call(f, args, std::index_sequence_for<P...>{});
}
template <class... P> std::size_t sizes(kp_status (*)(P...), std::size_t* out) {
    const std::size_t each[] = {sizeof(P)..., 0};
    std::memcpy(out, each, sizeof...(P) * sizeof(std::size_t));
    return sizeof...(P);
}
}  // namespace

extern "C" const char* kpx_last_error(void) { return flashinfer_last_error(); }
"""


def harness_source(symbols: list[str]) -> str:
    """C++ source: ``kpx_call_<i>(args)`` calls ``symbols[i]`` with each parameter read from the address in
    ``args[j]``; ``kpx_sizes_<i>(out)`` gives the parameters' sizes (checked against the ctypes values first)."""
    body = [HARNESS_HEAD]
    for i, sym in enumerate(symbols):
        body.append(f'extern "C" int kpx_call_{i}(const std::uint64_t* args) {{ return call(&{sym}, args); }}\n'
                    f'extern "C" std::size_t kpx_sizes_{i}(std::size_t* out) {{ return sizes(&{sym}, out); }}\n')
    return "\n".join(body)


def build_harness(lib_dir: Path, symbols: list[str], work: Path, cxx: str = "g++") -> Path:
    """Compile the harness for ``symbols`` against ``lib_dir`` (include/, lib/libflashinfer.so); returns the .so."""
    work.mkdir(parents=True, exist_ok=True)
    src, so = work / "flashinfer_harness.cpp", work / "libflashinfer_harness.so"
    src.write_text(harness_source(symbols))
    lib = (lib_dir / "lib").resolve()
    cmd = [cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-O1", "-shared", "-fPIC", f"-I{lib_dir / 'include'}",
           str(src), f"-L{lib}", f"-l{LIB}", f"-Wl,-rpath,{lib}", "-o", str(so)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {(p.stderr or p.stdout)[-2000:]}")
    return so


class Harness:
    def __init__(self, so: Path, symbols: list[str]) -> None:
        self.dll = ctypes.CDLL(str(so))
        self.index = {s: i for i, s in enumerate(symbols)}
        self.dll.kpx_last_error.restype = ctypes.c_char_p

    def caller(self, symbol: str, values: list[Any], *alive: Any) -> Callable[[], int]:
        """A call of ``symbol`` with ``values`` (ctypes objects, one per parameter: their bytes are the argument)."""
        i = self.index[symbol]
        sizes = (ctypes.c_size_t * 64)()
        szf = getattr(self.dll, f"kpx_sizes_{i}")
        szf.restype = ctypes.c_size_t
        n = szf(sizes)
        if n != len(values):
            raise TypeError(f"{symbol}: takes {n} parameters, {len(values)} given")
        for j, v in enumerate(values):
            if ctypes.sizeof(v) != sizes[j]:
                raise TypeError(f"{symbol}: parameter {j} is {sizes[j]} bytes in C++, {ctypes.sizeof(v)} here")
        addrs = (ctypes.c_uint64 * max(1, n))(*[ctypes.addressof(v) for v in values])
        fn = getattr(self.dll, f"kpx_call_{i}")
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p]
        keep = (values, addrs, alive)  # alive as long as the call is (``alive``: what the values point into)

        def go() -> int:
            return int(fn(ctypes.cast(keep[1], ctypes.c_void_p)))
        return go

    def last_error(self) -> str:
        msg = self.dll.kpx_last_error()
        return msg.decode() if msg else ""


# ------------------------------------------------------------------------------------------------ the run

def time_launches(fn: Callable[[], Any], reps: int) -> tuple[float, float]:
    """(kernel µs, host µs) per launch: ``corpus.gpu_timing.measure`` over ``max(5, reps // 5)`` batches of 10."""
    from corpus.gpu_timing import measure

    t = measure(fn, max(5, reps // 5), batch=10)
    return t.kernel_us, t.host_us


def written(c: Case) -> str:
    torch = _t()
    for i, t in enumerate(c.outputs):
        if t.dtype.is_floating_point and torch.isnan(t.float()).any():
            return f"output {i}: {int(torch.isnan(t.float()).sum())}/{t.numel()} elements not written"
    return ""


def run_one(kind: str, name: str, variant: str, make: Callable[[str], Case], lib: Any, harness: Harness | None,
            hdr: Header, symbol: str, reps: int) -> dict[str, Any]:
    import torch

    row: dict[str, Any] = {"kind": kind, "family": name, "variant": variant, "c": "-", "python": "-"}
    stream = torch.cuda.current_stream()
    try:
        proto = hdr.prototype(symbol)
        if kind != "host":  # a kernel entry's first parameter is the launch configuration, passed by c_launch
            if not proto or proto[0][0] != "kp_cfg":
                raise KeyError(f"{symbol}: first parameter is not kp_cfg")
            proto = proto[1:]
        if harness is None:
            raise RuntimeError("the C++ harness did not build")
    except Exception as e:  # noqa: BLE001
        row["c"] = f"FAIL prototype: {e}"
        proto = None

    def c_launch(c: Case) -> Callable[[], int]:
        assert proto is not None and harness is not None
        args = [*c.args, ctypes.c_void_p(stream.cuda_stream)] if c.host else c.args
        if len(args) != len(proto):
            raise TypeError(f"{symbol}: the case gives {len(args)} arguments, the prototype has {len(proto)}")
        vals = [c_value(t, v, torch) for (_, t), v in zip(proto, args)]
        if not c.host:
            cfg = KpLaunch((ctypes.c_uint32 * 3)(*c.grid), (ctypes.c_uint32 * 3)(*(c.block or (0, 0, 0))), c.smem,
                           (ctypes.c_uint32 * 3)(0, 0, 0), stream.cuda_stream)
            return harness.caller(symbol, [ctypes.c_void_p(ctypes.addressof(cfg)), *vals], cfg)
        return harness.caller(symbol, vals)

    def py_launch(c: Case) -> Callable[[], Any]:
        f = lib[name]  # the family's (or host program's) Python callable
        args = [None if isinstance(v, ctypes.c_void_p) else bytes(v) if isinstance(v, (ctypes.Array, ctypes.Structure))
                else v for v in c.args]  # a by-value C++ struct: its bytes
        if c.host:
            return lambda: f(*args)
        kw: dict[str, Any] = {"grid": c.grid}
        if c.smem:  # else the kernel's own LaunchSpec.dynamic_smem (sampling: sizeof(TempStorage)), as C's 0 means
            kw["smem"] = c.smem
        if c.block:
            kw["block"] = c.block
        return lambda: f(*args, **kw)

    for path, launcher in (("c", c_launch), ("python", py_launch)):
        if path == "c" and proto is None:
            continue
        try:
            torch.manual_seed(hash((name, variant, path)) & 0xFFFF)
            case = make(variant)
            go = launcher(case)
            st = go()
            torch.cuda.synchronize()
            if path == "c" and st != 0:
                raise RuntimeError(f"status {st}: {harness.last_error() if harness else ''}")
            problem = written(case) or (case.check() if case.check else "")
            if problem:
                row[path] = f"WRONG {problem}"
                continue
            row[path] = "ok"
            kernel_us, host_us = time_launches(go, reps)
            row[f"{path}_us"], row[f"{path}_host_us"] = round(kernel_us, 2), round(host_us, 2)
        except Exception as e:  # noqa: BLE001 - recorded, the run goes on
            row[path] = f"FAIL {type(e).__name__}: {str(e)[:300]}"
            row.setdefault("traceback", traceback.format_exc()[-1500:])
            torch.cuda.synchronize()
    if "c_us" in row and "python_us" in row:
        row["py_vs_c"] = round(row["python_us"] / row["c_us"], 3) if row["c_us"] == row["c_us"] else "-"
    return row


def ensure_extension() -> None:
    try:
        import kernelpack.runtime._launch  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=ROOT, check=False,
                       capture_output=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=ROOT / ".gpu" / "corpus-fi")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/kp-out")))
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--only", action="append", help="only these families / host programs")
    ap.add_argument("--dry-run", action="store_true", help="load the library and check the manifest; no GPU")
    args = ap.parse_args(argv)
    manifest = json.loads((args.dir / "manifest.json").read_text())
    PagedKv.manifest = manifest
    so_path = args.dir / "lib" / f"lib{LIB}.so"
    hdr = Header((args.dir / "include" / f"{LIB}.h").read_text())
    import kernelpack

    lib = kernelpack.load(str(so_path))
    todo = [("kernel", f, a["variant"], f"{LIB}_{f}_{a['variant']}" if a["variant"] else f"{LIB}_{f}")
            for f, arts in manifest["families"].items() for a in arts]
    todo += [("host", h, v, s) for h, v, s in _host_entries(lib, manifest)]
    todo = [t for t in todo if not args.only or t[1] in args.only]
    problems = [f"{k} {f}: no GPU case" for k, f, _, _ in todo if f not in (HOST_CASES if k == "host" else CUDA_CASES)]
    for _, _, _, sym in todo:
        try:
            hdr.prototype(sym)
        except KeyError as e:
            problems.append(str(e))
    harness: Harness | None = None
    symbols = sorted({sym for _, _, _, sym in todo})
    try:
        so = build_harness(args.dir, symbols, args.out / "harness")
        harness = Harness(so, symbols)
    except Exception as e:  # noqa: BLE001 - the Python path still runs; every C++ row says why not
        problems.append(f"C++ harness: {e}")
    print(f"{so_path}: {len(manifest['families'])} families, {len(manifest['host_programs'])} host programs, "
          f"{len(todo)} launches to check; problems: {problems or 'none'}")
    if args.dry_run:
        return 1 if problems else 0
    ensure_extension()
    import torch

    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    t0 = time.time()
    major, minor = torch.cuda.get_device_capability()
    device_sm = f"{major}{minor}"
    for kind, fam, variant, sym in todo:
        archs = entry_archs(manifest, kind, fam, variant)
        if archs and not any(re.sub(r"\D", "", a) == device_sm for a in archs):
            rows.append({"kind": kind, "family": fam, "variant": variant, "c": f"skipped: built for {archs}",
                         "python": f"skipped: device is sm_{device_sm}"})
            continue
        make = (HOST_CASES if kind == "host" else CUDA_CASES).get(fam)
        if make is None:
            rows.append({"kind": kind, "family": fam, "variant": variant, "c": "FAIL no GPU case",
                         "python": "FAIL no GPU case"})
            continue
        rows.append(run_one(kind, fam, variant, make, lib, harness, hdr, sym, args.reps))
        r = rows[-1]
        print(f"{fam:42s} {variant:28s} C++ {r['c'][:60]:10s} {r.get('c_us', '-'):>9} us  "
              f"Py {r['python'][:60]:10s} {r.get('python_us', '-'):>9} us", flush=True)
    ran = [r for r in rows if not r["c"].startswith("skipped")]
    ok = [r for r in ran if r["c"] == "ok" and r["python"] == "ok"]
    within = [r for r in ok if abs(r.get("py_vs_c", 1) - 1) <= 0.03]
    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "launches": len(ran),
               "skipped (no binary for this device)": len(rows) - len(ran),
               "both_ok": len(ok), "py_within_3pct_of_c": len(within), "seconds": round(time.time() - t0, 1),
               "reference": "torch float64 (FlashInfer's JIT needs nvcc, ninja and network: not on the GPU machine)"}
    print(markdown(rows))
    print(json.dumps(summary, indent=1))
    (args.out / "corpus_gpu_flashinfer.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    return 0 if len(ok) == len(ran) else 1


def entry_archs(manifest: dict[str, Any], kind: str, fam: str, variant: str) -> list[str]:
    """The archs an entry carries binaries for, as the manifest says ([] when it does not)."""
    entries = manifest["host_programs" if kind == "host" else "families"].get(fam, [])
    return next((list(e.get("archs", [])) for e in entries if e.get("variant") == variant), [])


def markdown(rows: list[dict[str, Any]]) -> str:
    """The results as a markdown table (C++ is the g++ harness over the C library, Python is kernelpack.load):
    kernel time per launch (GPU, back to back behind a backlog) of each path and their ratio, then the host time
    to issue one launch of each."""
    out = ["| kind | family | variant | C++ | C++ kernel µs | Python | Python kernel µs | Python / C++ kernel | "
           "C++ host µs | Python host µs |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["kind"], r["family"], r["variant"] or "-", r["c"], r.get("c_us", "-"), r["python"],
                 r.get("python_us", "-"), r.get("py_vs_c", "-"), r.get("c_host_us", "-"), r.get("python_host_us", "-")]
        out.append("| " + " | ".join(str(c).replace("|", "\\|")[:160] for c in cells) + " |")
    return "\n".join(out)


def _host_entries(lib: Any, manifest: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(host program, variant, C symbol) of every entry, as the manifest lists them (checked against the library)."""
    out = []
    for name, entries in manifest["host_programs"].items():
        have = {c.info.symbol for c in lib.host_programs[name].calls}
        for e in entries:
            if e["symbol"] not in have:
                raise KeyError(f"host program {name}: {e['symbol']} is not in the library")
            out.append((name, e["variant"], e["symbol"]))
    return out


if __name__ == "__main__":
    sys.exit(main())
