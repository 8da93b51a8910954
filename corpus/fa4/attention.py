"""FlashAttention-4 forward and backward from the precompiled library ``libfa4`` (corpus/fa4): what FA4's own
``flash_attn.cute.interface`` does around its kernels, for the configurations the library holds, with torch and
kernelpack only (no FA4, no CuTe DSL, no JIT).

    attn = FA4("build/lib/libfa4.so", "build/fa4_meta.json")
    out, lse = attn.forward(q, k, v, causal=True)                      # q, k, v: (batch, seqlen, heads, head_dim)
    dq, dk, dv = attn.backward(q, k, v, out, dout, lse, causal=True)

Entries (see kernelpack.toml): ``fwd_d<hd>[_causal]`` (SM80/SM90 objects), ``fwd_sm100_d<hd>[_causal]`` (SM100; it
also takes ``max_seqlen_q``), ``bwd_pre_*``, ``bwd_*``, ``bwd_post_*`` (SM90/SM100), the variable-length forward
``fwd[_sm100]_varlen_d128[_causal]``. The backward's fp32 buffers are
padded to the preprocess kernel's row tile, per arch and configuration (``fa4_meta.json``, written at build time from
the kernel objects FA4 builds).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class FA4:
    """The library loaded once (``kernelpack.load``), with FA4's host-side logic for MHA without varlen."""

    def __init__(self, lib: str | Path, meta: str | Path) -> None:
        import kernelpack

        self.mod = kernelpack.load(str(lib))
        self.meta = json.loads(Path(meta).read_text())

    @staticmethod
    def _sm(t: Any) -> int:
        import torch

        major, minor = torch.cuda.get_device_capability(t.device)
        return major * 10 + minor

    @staticmethod
    def _key(q: Any, causal: bool) -> str:
        return f"d{q.shape[-1]}{'_causal' if causal else ''}"

    def forward(self, q: Any, k: Any, v: Any, *, causal: bool, softmax_scale: float | None = None,
                out: Any = None, lse: Any = None) -> tuple[Any, Any]:
        """``out`` (batch, seqlen_q, heads, head_dim) and ``lse`` (batch, heads, seqlen_q), fp32, natural log."""
        import torch

        b, sq, h, d = q.shape
        scale = 1.0 / math.sqrt(d) if softmax_scale is None else softmax_scale
        out = torch.empty_like(q) if out is None else out
        lse = torch.empty(b, h, sq, dtype=torch.float32, device=q.device) if lse is None else lse
        sm = self._sm(q)
        if sm // 10 == 10:
            getattr(self.mod, f"fwd_sm100_{self._key(q, causal)}")(q, k, v, out, lse, scale, sq)
        else:
            getattr(self.mod, f"fwd_{self._key(q, causal)}")(q, k, v, out, lse, scale)
        return out, lse

    def forward_varlen(self, q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, max_seqlen_q: int, *,
                       causal: bool, softmax_scale: float | None = None, out: Any = None,
                       lse: Any = None) -> tuple[Any, Any]:
        """Sequences packed along the first mode: q, k, v (total, heads, 128), ``cu_seqlens_*`` int32 (batch + 1) on
        the device; ``out`` like q and ``lse`` (heads, total_q), fp32. ``max_seqlen_q``: the longest query sequence
        (SM100's scheduler takes it from the host)."""
        import torch

        if q.shape[-1] != 128:
            raise ValueError(f"the library's variable-length forward is built for head dim 128 (got {q.shape[-1]})")
        scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else softmax_scale
        out = torch.empty_like(q) if out is None else out
        if lse is None:
            lse = torch.empty(q.shape[1], q.shape[0], dtype=torch.float32, device=q.device)
        key = f"varlen_d128{'_causal' if causal else ''}"
        if self._sm(q) // 10 == 10:
            getattr(self.mod, f"fwd_sm100_{key}")(q, k, v, out, lse, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q)
        else:
            getattr(self.mod, f"fwd_{key}")(q, k, v, out, lse, scale, cu_seqlens_q, cu_seqlens_k)
        return out, lse

    def backward_buffers(self, q: Any, causal: bool) -> tuple[Any, Any, Any]:
        """dPsum, LSE * log2(e) and the fp32 dQ accumulator, padded as this arch's kernels expect."""
        import torch

        b, sq, h, _ = q.shape
        cfg = self.meta["bwd"][str(self._sm(q) // 10 * 10)][self._key(q, causal)]
        tile_m, hd_pad = cfg["tile_m"], cfg["head_dim_padded"]
        sq_r = (sq + tile_m - 1) // tile_m * tile_m
        f32 = {"dtype": torch.float32, "device": q.device}
        return torch.empty(b, h, sq_r, **f32), torch.empty(b, h, sq_r, **f32), torch.empty(b, h, sq_r * hd_pad, **f32)

    def backward(self, q: Any, k: Any, v: Any, out: Any, dout: Any, lse: Any, *, causal: bool,
                 softmax_scale: float | None = None, dq: Any = None, dk: Any = None,
                 dv: Any = None) -> tuple[Any, Any, Any]:
        """dq, dk, dv as FA4 computes them: preprocess (dPsum = rowsum(O * dO), LSE * log2(e), dQ accumulator
        zeroed), the main kernel (dK, dV, the fp32 dQ accumulator), postprocess (dQ in the input dtype)."""
        import torch

        scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else softmax_scale
        dq = torch.empty_like(q) if dq is None else dq
        dk = torch.empty_like(k) if dk is None else dk
        dv = torch.empty_like(v) if dv is None else dv
        dpsum, lse_log2, dq_accum = self.backward_buffers(q, causal)
        key = self._key(q, causal)
        getattr(self.mod, f"bwd_pre_{key}")(out, dout, dpsum, lse, lse_log2, dq_accum, 1.0)
        getattr(self.mod, f"bwd_{key}")(q, k, v, dout, lse_log2, dpsum, dq_accum, dk, dv, scale)
        getattr(self.mod, f"bwd_post_{key}")(dq_accum, dq, scale)
        return dq, dk, dv
