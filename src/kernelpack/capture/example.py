"""What a captured project's example-arguments module calls: the tensors of a recorded call, with no memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def T(dtype: str, shape: Sequence[int], stride: Sequence[int], offset: int = 0) -> Any:  # noqa: N802 - short: it is
    """The meta tensor of ``dtype`` with this shape, strides and storage offset (elements): its address is the offset
    in bytes, so alignment and divisibility are the recorded tensor's."""  # written thousands of times
    import torch

    span = 1 + sum((n - 1) * abs(s) for n, s in zip(shape, stride)) if all(shape) else 0
    base = torch.empty(offset + span, dtype=getattr(torch, dtype), device="meta")
    return base.as_strided(tuple(shape), tuple(stride), offset)
