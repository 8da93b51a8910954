"""FlashAttention-4's compiled launchers as kernelpack build inputs (corpus/fa4/kernelpack.toml).

Each factory runs FA4's own interface (``flash_attn.cute.interface``) on fake torch tensors (``FakeTensorMode``: no GPU,
no memory) with ``cute.compile`` recorded (``kernelpack.cute.recording_compiles``) and returns the one call it wants:
the kernel object FA4 built and the fake tensors it converted, exactly as FA4 would compile them. The build runs each
factory inside ``kernelpack.cute.target_arch(arch)``; FA4 picks its kernel class from ``FLASH_ATTENTION_ARCH``
(cached by FA4: the cache is cleared here) and its tile sizes from the problem, given here as one representative
training shape (the kernels take every shape dynamically; the shape only picks FA4's tile configuration).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

SHAPE = {"batch": 2, "seqlen": 4096, "heads": 16}  # the problem FA4's heuristics see
NUM_SMS = {80: 108, 90: 132, 100: 148}  # FLASH_ATTENTION_NUM_SMS: the target SKU (A100, H100/H200, B200)
DTYPES = {"bf16": "bfloat16", "f16": "float16"}


def target_sm() -> int:
    import kernelpack.cute as kc

    arch = kc.current_target()
    if arch is None:
        raise RuntimeError("fa4_calls: call inside kernelpack.cute.target_arch(...) (kernelpack build does)")
    return arch.major * 10 + arch.minor


@contextlib.contextmanager
def fa4_for(sm: int) -> Iterator[Any]:
    """FA4's interface module, set up for ``sm`` with fresh compile caches, inside FakeTensorMode."""
    import torch
    from flash_attn.cute import interface as fi
    from torch._subclasses.fake_tensor import FakeTensorMode

    saved = {k: os.environ.get(k) for k in ("FLASH_ATTENTION_ARCH", "FLASH_ATTENTION_NUM_SMS")}
    os.environ["FLASH_ATTENTION_ARCH"] = str(sm)
    os.environ["FLASH_ATTENTION_NUM_SMS"] = str(NUM_SMS[sm // 10 * 10])
    fi._get_device_arch.cache_clear()
    caches = {f: f.compile_cache for f in vars(fi).values() if callable(f) and hasattr(f, "compile_cache")}
    try:
        for f in caches:
            f.compile_cache = {}  # FA4 keys some caches without the arch: every capture compiles afresh
        with FakeTensorMode(), torch.no_grad():
            yield fi
    finally:
        for f, cache in caches.items():
            f.compile_cache = cache
        fi._get_device_arch.cache_clear()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _pick(run: Callable[[Any], Any], kind: str) -> Any:
    """The recorded compile call whose kernel class is ``kind`` (e.g. FlashAttentionForwardSm90)."""
    import kernelpack.cute as kc

    sm = target_sm()
    with fa4_for(sm) as fi, kc.recording_compiles() as calls:
        run(fi)
    found = [c for c in calls if type(c.fn).__name__.startswith(kind)]
    if len(found) != 1:
        raise RuntimeError(f"fa4_calls: FA4 made {len(found)} {kind}* compiles for sm_{sm} (calls: {calls})")
    return found[0]


def _qkv(dtype: str, head_dim: int, varlen: bool = False) -> tuple[Any, Any, Any]:
    import torch

    dt = getattr(torch, DTYPES[dtype])
    b, s, h = SHAPE["batch"], SHAPE["seqlen"], SHAPE["heads"]
    shape = (b * s, h, head_dim) if varlen else (b, s, h, head_dim)
    return tuple(torch.empty(shape, dtype=dt, device="cuda") for _ in range(3))  # type: ignore[return-value]


def _fwd_kwargs(varlen: bool) -> dict[str, Any]:
    import torch

    if not varlen:
        return {}
    cu = torch.empty(SHAPE["batch"] + 1, dtype=torch.int32, device="cuda")
    return {"cu_seqlens_q": cu, "cu_seqlens_k": cu, "max_seqlen_q": SHAPE["seqlen"], "max_seqlen_k": SHAPE["seqlen"]}


def fwd(dtype: str, head_dim: int, causal: bool, varlen: bool = False) -> Any:
    """The forward kernel FA4 compiles for this arch (FlashAttentionForwardSm80/Sm90/Sm100), returning the LSE."""
    def run(fi: Any) -> None:
        q, k, v = _qkv(dtype, head_dim, varlen)
        fi._flash_attn_fwd(q, k, v, causal=causal, return_lse=True, **_fwd_kwargs(varlen))

    return _pick(run, "FlashAttentionForward")


def _bwd(dtype: str, head_dim: int, causal: bool) -> Callable[[Any], None]:
    def run(fi: Any) -> None:
        import torch

        q, k, v = _qkv(dtype, head_dim)
        out, dout = torch.empty_like(q), torch.empty_like(q)
        b, s, h = SHAPE["batch"], SHAPE["seqlen"], SHAPE["heads"]
        lse = torch.empty(b, h, s, dtype=torch.float32, device="cuda")
        fi._flash_attn_bwd(q, k, v, out, dout, lse, causal=causal)

    return run


def bwd(dtype: str, head_dim: int, causal: bool) -> Any:
    """The main backward kernel (dK, dV and the fp32 dQ accumulator)."""
    return _pick(_bwd(dtype, head_dim, causal), "FlashAttentionBackwardSm")


def bwd_pre(dtype: str, head_dim: int, causal: bool) -> Any:
    """The backward preprocess: dPsum = rowsum(O * dO), LSE * log2(e), dQ accumulator zeroed."""
    return _pick(_bwd(dtype, head_dim, causal), "FlashAttentionBackwardPreprocess")


def bwd_post(dtype: str, head_dim: int, causal: bool) -> Any:
    """The backward postprocess: the fp32 dQ accumulator, scaled, to dQ in the input dtype."""
    return _pick(_bwd(dtype, head_dim, causal), "FlashAttentionBackwardPostprocess")


def meta(archs: tuple[str, ...] = ("sm_90a", "sm_100a")) -> dict[str, Any]:
    """What a caller of the backward entries must know per arch and configuration: the preprocess kernel's row tile
    (the fp32 buffers dPsum, LSE*log2(e) and the dQ accumulator are padded to it) and the padded head dim of the dQ
    accumulator (``bwd.<sm>.d<hd>[_causal]``); read from the kernel objects FA4 builds (nothing is compiled)."""
    import kernelpack.cute as kc

    out: dict[str, Any] = {"shape": SHAPE, "num_sms": NUM_SMS, "bwd": {}}
    for arch in archs:
        with kc.target_arch(arch):
            sm = target_sm()
            for hd in (64, 128):
                for causal in (False, True):
                    pre = bwd_pre("bf16", hd, causal).fn
                    key = f"d{hd}{'_causal' if causal else ''}"
                    out["bwd"].setdefault(str(sm), {})[key] = {"tile_m": int(pre.tile_m),
                                                               "head_dim_padded": int(pre.head_dim_padded)}
    return out
