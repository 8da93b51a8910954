"""Float64 torch references for the CuTe kernels whose operation is simple and known, keyed by family-name prefix.

Each reference takes the launch's starting state (the rebuilt tensors and scalars, by ABI parameter name) and the
launcher's recorded arguments (``host_args``: constexprs such as ``ELEMENTWISE_AFFINE`` are there) and returns the
expected final value of the tensors the kernel writes, in float64, or None when the specialization takes a path
the reference does not model (the GPU run then says "no reference: Python == C++"). Works on CPU tensors too (the
tests run them there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Inputs = Mapping[str, Any]
HostArgs = Mapping[str, Mapping[str, Any]]


def _flag(host: HostArgs, name: str, default: Any) -> Any:
    return host.get(name, {}).get("value", default)


def rms_norm_fwd(x: Inputs, host: HostArgs) -> dict[str, Any] | None:
    """Y = X * rstd * (offset + W) (W only when ELEMENTWISE_AFFINE), rstd = 1 / sqrt(mean(X^2) + eps) per row."""
    X = x["mX"].double()
    rstd = (X.pow(2).mean(dim=-1) + float(x["eps"])).rsqrt()
    Y = X * rstd[:, None]
    if _flag(host, "ELEMENTWISE_AFFINE", True):
        Y = Y * (float(x["offset"]) + x["mW"].double())
    return {"mY": Y, "mRSTD": rstd}


def scale_in_place(x: Inputs, host: HostArgs) -> dict[str, Any] | None:
    """mX *= mScale[0] (every row)."""
    return {"mX": x["mX"].double() * x["mScale"].double()[0]}


_CE_OPTIONAL = ("HAS_ZLOSS", "RETURN_Z_LOSS", "HAS_SOFTCAP", "RETURN_TOKEN_ACCURACY", "RETURN_PREDICTED_TOKENS",
                "HAS_WEIGHT", "HAS_SMOOTHING", "HAS_PADDING")


def ce_fwd(x: Inputs, host: HostArgs) -> dict[str, Any] | None:
    """Plain cross entropy (no z-loss, softcap, weights, smoothing, padding): loss = (lse - x[y]) * inv_n_loss,
    0 on ignored rows; with HAS_GRAD the logits become (softmax - onehot(y)) * inv_n_loss (0 on ignored rows)."""
    import torch

    if any(_flag(host, k, False) for k in _CE_OPTIONAL):
        return None
    X = x["mX"].double()
    y = x["mY"].long()
    inv_n = float(x["inv_n_loss"])
    ignored = y == int(x["ignore_index"])
    ys = torch.where(ignored, torch.zeros_like(y), y)
    lse = torch.logsumexp(X, dim=-1)
    loss = (lse - X.gather(1, ys[:, None])[:, 0]) * inv_n
    loss = torch.where(ignored, torch.zeros_like(loss), loss)
    out = {"mLoss": loss}
    if _flag(host, "HAS_GRAD", True):
        grad = torch.softmax(X, dim=-1)
        grad.scatter_add_(1, ys[:, None], -torch.ones_like(grad[:, :1]))
        grad = grad * inv_n
        out["mX"] = torch.where(ignored[:, None], torch.zeros_like(grad), grad)
    return out


# family-name prefix -> reference (first match wins)
REFERENCES: tuple[tuple[str, Callable[[Inputs, HostArgs], dict[str, Any] | None]], ...] = (
    ("cute_rms_norm_fwd", rms_norm_fwd),
    ("cute_scale_in_place", scale_in_place),
    ("cute_ce_fwd", ce_fwd),
)


def reference_for(family: str) -> Callable[[Inputs, HostArgs], dict[str, Any] | None] | None:
    return next((fn for prefix, fn in REFERENCES if family.startswith(prefix)), None)
