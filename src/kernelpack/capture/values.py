"""Captured arguments as Python source for the project's example-arguments module.

A tensor is written as ``T("bfloat16", (2112, 4096), (4096, 1))`` (with its storage offset in elements when not 0):
:func:`kernelpack.capture.example.T` makes the meta tensor of that dtype, shape, strides and offset, whose address
is its offset in bytes -- aligned and 16-divisible exactly as the captured tensor was (CPU storage is 64-byte
aligned, GPU allocations 256). Python scalars, None, strings, torch and Triton dtypes, ``tl.constexpr`` values,
Triton tensor descriptors and tuples/lists of these are written as themselves; anything else cannot be written
(:class:`Unwritable` names it), and the launch is skipped with that reason.
"""

from __future__ import annotations

import math
from typing import Any


class Unwritable(Exception):
    """A value with no source form."""


def to_meta(v: Any) -> Any:
    """A captured tensor without its memory: the meta tensor of the same dtype, shape, strides and storage offset
    (tuples and lists element by element; other values as they are)."""
    import torch

    if isinstance(v, torch.Tensor) and v.device.type != "meta":
        base = torch.empty(v.untyped_storage().nbytes() // max(1, v.element_size()), dtype=v.dtype, device="meta")
        return base.as_strided(v.shape, v.stride(), v.storage_offset())
    if isinstance(v, tuple) and type(v) is tuple:
        return tuple(to_meta(x) for x in v)
    if isinstance(v, list):
        return [to_meta(x) for x in v]
    return v


def source(v: Any, imports: set[str]) -> str:
    """Python source for ``v``; adds to ``imports`` the names the source needs (``torch``, ``tl``, ``T``...)."""
    if v is None or isinstance(v, (bool, str)):
        return repr(v)
    if isinstance(v, int):
        return repr(int(v))
    if isinstance(v, float):
        if math.isfinite(v):
            return repr(v)
        return "float('nan')" if math.isnan(v) else ("float('inf')" if v > 0 else "-float('inf')")
    mod = type(v).__module__ or ""
    if mod == "torch" and type(v).__name__ == "dtype":
        imports.add("torch")
        return str(v)
    if mod.startswith("numpy"):
        import numpy as np

        if isinstance(v, np.generic):
            return source(v.item(), imports)
    if mod.startswith("triton"):
        return _triton(v, imports)
    if type(v).__name__ in ("Tensor", "Parameter") and hasattr(v, "untyped_storage"):
        return _tensor(v, imports)
    if isinstance(v, tuple) and type(v) is tuple:
        items = [source(x, imports) for x in v]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(v, list):
        return "[" + ", ".join(source(x, imports) for x in v) + "]"
    raise Unwritable(f"a {type(v).__module__}.{type(v).__qualname__} has no source form for the project")


def _tensor(t: Any, imports: set[str]) -> str:
    imports.add("T")
    dtype = str(t.dtype).removeprefix("torch.")
    shape, stride = tuple(int(s) for s in t.shape), tuple(int(s) for s in t.stride())
    off = int(t.storage_offset())
    return f"T({dtype!r}, {shape!r}, {stride!r}" + (f", {off})" if off else ")")


def _triton(v: Any, imports: set[str]) -> str:
    name = type(v).__name__
    if name == "constexpr":
        return source(v.value, imports)
    if name == "dtype" or hasattr(v, "is_floating") and hasattr(v, "primitive_bitwidth"):
        attr = _tl_names().get(str(v))
        if attr is None:
            raise Unwritable(f"Triton dtype {v} is no attribute of triton.language")
        imports.add("tl")
        return f"tl.{attr}"
    if name == "TensorDescriptor":
        imports.add("TensorDescriptor")
        parts = [source(v.base, imports), source(list(v.shape), imports), source(list(v.strides), imports),
                 source(list(v.block_shape), imports)]
        pad = getattr(v, "padding", "zero")
        return f"TensorDescriptor({', '.join(parts)}" + (f", padding={pad!r})" if pad != "zero" else ")")
    raise Unwritable(f"a {type(v).__module__}.{name} has no source form for the project")


def _tl_names() -> dict[str, str]:
    """A Triton dtype's name (``bf16``) -> its attribute in ``triton.language`` (``bfloat16``)."""
    import triton.language as tl

    out: dict[str, str] = {}
    for attr, v in sorted(vars(tl).items(), key=lambda kv: -len(kv[0])):
        if type(v).__name__ == "dtype" and not attr.startswith("_"):
            out[str(v)] = attr
    return out


HEADER = {
    "torch": "import torch",
    "tl": "import triton.language as tl",
    "T": "from kernelpack.capture.example import T",
    "TensorDescriptor": "from triton.tools.tensor_descriptor import TensorDescriptor",
}
