"""The pure-Python launch path's packer: checked argument values into a parameter buffer laid out by a
:class:`~kernelpack.launch.plan.Plan` (the C extension packs from the same plan's ``to_c`` tuples)."""

from __future__ import annotations

import ctypes
import struct
from typing import Any

from ..core.abi import DType, Scalar
from ..core.packing import bf16_bits
from ..launch.plan import (
    OP_DESC,
    OP_DESC_FIELD,
    OP_DEVICE,
    OP_LIST,
    OP_LIST_COUNT,
    OP_NULL,
    OP_PTR,
    OP_SCALAR,
    OP_SCRATCH,
    OP_TENSOR,
    Plan,
)


def pack(plan: Plan, values: list[Any], hidden: dict[str, int] | None = None) -> tuple[Any, Any]:
    """Pack already checked values (one per caller argument; ints for pointers, (ptr, shape, strides) for
    tensors, numbers for scalars, bytes for structs, for a tensor descriptor the values of every param it
    fills with the map as bytes, for a tensor list its descriptors' device address and its count:
    :func:`kernelpack.runtime.pylaunch.staged_lists`) into (buffer, ``void*[]``); ``hidden``: role -> value of the
    hidden params (an
    allocated scratch address, a device-derived value). Keep both alive until the launch returns."""
    buf = ctypes.create_string_buffer(plan.nbytes)
    base = ctypes.addressof(buf)
    for s in plan.slots:
        if s.op == OP_NULL:
            continue
        if s.op == OP_SCRATCH:
            struct.pack_into("<Q", buf, s.offset, (hidden or {}).get(s.param.role, 0))
            continue
        if s.op == OP_DEVICE:
            assert s.dtype is not None and hidden is not None
            struct.pack_into("<" + s.dtype.struct_format, buf, s.offset, hidden[s.param.role])
            continue
        v = values[s.arg]
        if s.op in (OP_DESC, OP_DESC_FIELD):
            x = v[s.desc_pos]
            t = s.param.type
            if isinstance(t, Scalar):
                struct.pack_into("<" + t.dtype.struct_format, buf, s.offset, scalar_bits(t.dtype, x))
            elif isinstance(x, bytes):
                struct.pack_into(f"{len(x)}s", buf, s.offset, x)
            else:
                struct.pack_into("<Q", buf, s.offset, x)
        elif s.op == OP_PTR:
            struct.pack_into("<Q", buf, s.offset, v)
        elif s.op in (OP_LIST, OP_LIST_COUNT):
            assert s.dtype is not None
            fmt = "<Q" if s.op == OP_LIST else "<" + s.dtype.struct_format
            struct.pack_into(fmt, buf, s.offset, v[s.op == OP_LIST_COUNT])
        elif s.op == OP_SCALAR:
            assert s.dtype is not None
            struct.pack_into("<" + s.dtype.struct_format, buf, s.offset, scalar_bits(s.dtype, v))
        elif s.op == OP_TENSOR:
            assert s.tensor is not None
            ptr, shape, strides = v
            tf = s.tensor
            struct.pack_into("<Q", buf, s.offset + tf.data, ptr)
            for offs, vals, dt in ((tf.shape, shape, tf.spec.shape_dtype), (tf.stride, strides,
                                                                           tf.spec.stride_dtype)):
                for off, val in zip(offs, vals):
                    if off >= 0:
                        struct.pack_into("<" + dt.struct_format, buf, s.offset + off, val)
        else:
            struct.pack_into(f"{s.size}s", buf, s.offset, bytes(v))
    ptrs = (ctypes.c_void_p * max(len(plan.slots), 1))(*(base + s.offset for s in plan.slots))
    return buf, ptrs


def scalar_bits(dt: DType, value: Any) -> Any:
    """The value :mod:`struct` packs for ``dt`` (f16 via 'e', bf16 as its 16 bits, bool as bool)."""
    if dt is DType.bf16:
        return bf16_bits(float(value))
    if dt.is_float:
        return float(value)
    if dt is DType.bool:
        return bool(value)
    return int(value)
