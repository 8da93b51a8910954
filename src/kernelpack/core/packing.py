"""Pack Python values into a kernel's parameter buffer, laid out exactly as the ABI (and the cubin) says.

This is the reference packer: the pure-Python launch path and the tests use it; the fast runtime
compiles the same layout into a per-kernel plan.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from .abi import Abi, DType, Opaque, ParamType, Pointer, Scalar, Struct, TensorList
from .errors import KernelpackError


def bf16_bits(value: float) -> int:
    """Round a float to bfloat16 (nearest even) and return its 16 bits."""
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:  # NaN stays NaN
        return (bits >> 16) | 0x40
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def _scalar(dt: DType, value: Any, where: str) -> bytes:
    if dt.is_integer:
        if isinstance(value, bool) or not isinstance(value, int):
            raise KernelpackError(f"{where}: expected an int for {dt.c_type}, got {type(value).__name__}")
        lo, hi = dt.int_range
        if not lo <= value <= hi:
            raise KernelpackError(f"{where}: {value} does not fit {dt.c_type} [{lo}, {hi}]")
        return struct.pack("<" + dt.struct_format, value)
    if dt is DType.bool:
        return struct.pack("<?", bool(value))
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise KernelpackError(f"{where}: expected a float for {dt.value}, got {type(value).__name__}")
    if dt is DType.bf16:
        return struct.pack("<H", bf16_bits(float(value)))
    try:
        return struct.pack("<" + dt.struct_format, float(value))
    except OverflowError:
        raise KernelpackError(f"{where}: {value} overflows {dt.value}") from None


def pack_value(t: ParamType, value: Any, where: str) -> bytes:
    """The bytes of one value of ABI type ``t`` (``where`` names it in errors)."""
    if isinstance(t, Scalar):
        return _scalar(t.dtype, value, where)
    if isinstance(t, (Pointer, TensorList)):  # a tensor list: the device address of its descriptors
        ptr = value.data_ptr() if hasattr(value, "data_ptr") else value
        if isinstance(ptr, bool) or not isinstance(ptr, int) or not 0 <= ptr < 1 << 64:
            raise KernelpackError(f"{where}: expected a device pointer (int or tensor), got {type(value).__name__}")
        return struct.pack("<Q", ptr)
    if isinstance(t, Opaque):
        if not isinstance(value, (bytes, bytearray, memoryview)) or len(value) != t.size:
            got = f"{len(value)} bytes" if isinstance(value, (bytes, bytearray, memoryview)) else type(value).__name__
            raise KernelpackError(f"{where}: expected {t.size} bytes for {t.c_type}, got {got}")
        return bytes(value)
    return _struct(t, value, where)


def _struct(t: Struct, value: Any, where: str) -> bytes:
    if isinstance(value, Mapping):
        missing = [f.name for f in t.fields if f.name not in value]
        if missing:
            raise KernelpackError(f"{where}: struct {t.name} is missing fields {missing}")
        values = [value[f.name] for f in t.fields]
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        if len(value) != len(t.fields):
            raise KernelpackError(f"{where}: struct {t.name} has {len(t.fields)} fields, got {len(value)} values")
        values = list(value)
    else:
        raise KernelpackError(f"{where}: expected a mapping or sequence for struct {t.name}")
    out = bytearray(t.size)
    for f, off, v in zip(t.fields, t.field_offsets, values):
        b = pack_value(f.type, v, f"{where}.{f.name}")
        out[off:off + len(b)] = b
    return bytes(out)


def pack_params(abi: Abi, values: Sequence[Any], *, base: int = 0, kernel: str = "kernel") -> bytes:
    """The whole parameter buffer for ``values`` (one per param), at the offsets for param base ``base``."""
    if len(values) != len(abi.params):
        raise KernelpackError(f"kernel {kernel}: expected {len(abi.params)} arguments ({abi.describe()}), "
                              f"got {len(values)}")
    out = bytearray(abi.param_bytes(base))
    for i, (p, off, v) in enumerate(zip(abi.params, abi.offsets(base), values)):
        b = pack_value(p.type, v, f"kernel {kernel}: parameter {i} '{p.name}'")
        out[off:off + len(b)] = b
    return bytes(out)
