"""Entry points for liger code paths its public wrappers only take on a GPU (each calls liger's own functions).

``LigerMLPFunction.forward`` asserts ``input.is_cuda`` before anything else; the calls below are its body minus the
assert (training forward, inference forward, both backward kernels), in liger's order.
"""

from __future__ import annotations

from typing import Any


def mlp_forward_backward(x: Any, gate_weight: Any, up_weight: Any, down_weight: Any) -> Any:
    import torch
    from liger_kernel.ops import mlp

    x, gate_weight, up_weight, down_weight = mlp._check_inputs(x, gate_weight, up_weight, down_weight)
    agu, cfg = mlp.gemm_swiglu(x, gate_weight, up_weight, 1.0, True)
    out, _ = mlp.gemm_swiglu(x, gate_weight, up_weight, 1.0, False)
    d_out = torch.randn(*x.shape[:-1], down_weight.shape[0], dtype=x.dtype, device=x.device)
    mlp.swiglu_backward_dGU(mlp._ensure_tma_compatible(d_out), down_weight, agu, cfg, 1.0, 1.0)
    return mlp.swiglu_backward_dI(gate_weight, up_weight, agu), out


def rms_norm_dw_reduce(dw_partial: Any, dtype: Any, warps: int) -> Any:
    """``reduce_dw_partials`` with ``LIGER_RMS_DW_REDUCTION_WARPS`` (read once at import) set to ``warps``."""
    from liger_kernel.ops.cutedsl.ops import rms_norm_dw_reduce as m

    saved = m._REDUCTION_WARPS
    m._REDUCTION_WARPS = int(warps)
    try:
        return m.reduce_dw_partials(dw_partial, dtype)
    finally:
        m._REDUCTION_WARPS = saved


def rms_norm_scalar(x: Any, weight: Any, eps: float) -> Any:
    """liger's CuTe RMSNorm forward and backward on its scalar path (``LIGER_RMS_FORCE_NO_FAST=1``, read once at
    import): the fwd / bwd_dx / bwd_dw launchers the vectorized path replaces."""
    import torch
    from liger_kernel.ops.cutedsl.ops import rms_norm as m

    saved = m._FORCE_NO_FAST
    m._FORCE_NO_FAST = True
    try:
        y = m.LigerRMSNormFunction.apply(x, weight, eps)
        y.backward(torch.ones_like(y))
        return y.detach()
    finally:
        m._FORCE_NO_FAST = saved
