"""Arguments of one CuTe host program's C entry, from Python: checks and ctypes values.

A host program's entry (``kp_status NAME_prog(<typed params>)``, ``kernelpack.clib.host.entry``) takes tensor
descriptors by value (``{data; dynamic shapes; dynamic strides}`` at exact widths), scalars at their exact type,
pointers, and a ``void*`` stream. Each argument is checked here as the kernel runtime checks a kernel argument
(``checks.check_arg``: dtype, rank, static modes, field widths, alignment) plus the divisibility contracts the
entry itself enforces, then converted to the ctypes value the entry takes.
"""

from __future__ import annotations

import ctypes
import math
import struct
from typing import Any

from ..bundle.host_manifest import HostEntryInfo, HostParam
from ..core.abi import Abi, DType, Opaque, Param, Pointer, Scalar, Struct
from ..core.names import py_arg_names
from ..core.packing import bf16_bits
from ..launch.family import plan_specificity
from ..launch.plan import Plan, Slot
from . import checks
from .adapters import TensorView
from .errors import ArgumentTypeError, ArgumentValueError


class _Half(ctypes.Structure):
    _fields_ = [("bits", ctypes.c_uint16)]  # kp_f16 / kp_bf16: a struct of the raw bits


_SCALARS: dict[DType, Any] = {
    DType.i8: ctypes.c_int8, DType.i16: ctypes.c_int16, DType.i32: ctypes.c_int32, DType.i64: ctypes.c_int64,
    DType.u8: ctypes.c_uint8, DType.u16: ctypes.c_uint16, DType.u32: ctypes.c_uint32, DType.u64: ctypes.c_uint64,
    DType.f32: ctypes.c_float, DType.f64: ctypes.c_double, DType.bool: ctypes.c_bool, DType.f16: _Half,
    DType.bf16: _Half,
}
_STRUCTS: dict[Struct, Any] = {}


class Unsupported(Exception):
    """A parameter type ctypes cannot pass exactly as the C entry takes it."""


def ctype_of(t: Any) -> Any:
    if isinstance(t, Pointer):
        return ctypes.c_void_p
    if isinstance(t, Scalar):
        return _SCALARS[t.dtype]
    if isinstance(t, Opaque):
        raise Unsupported(f"an opaque {t.size}-byte {t.c_type}")
    cls = _STRUCTS.get(t)
    if cls is None:
        cls = type(f"kp_{t.name}", (ctypes.Structure,), {"_fields_": [(f.name, ctype_of(f.type)) for f in t.fields]})
        offsets = tuple(getattr(cls, f.name).offset for f in t.fields)
        if ctypes.sizeof(cls) != t.size or ctypes.alignment(cls) != t.align or offsets != t.field_offsets:
            raise Unsupported(f"struct {t.name} ({t.size} bytes, {t.align}-byte aligned), which ctypes lays out "
                              f"differently")
        _STRUCTS[t] = cls
    return cls


def _half(dt: DType, v: float) -> _Half:
    if dt is DType.bf16:
        return _Half(bf16_bits(v))
    return _Half(struct.unpack("<H", struct.pack("<e", v))[0])


def call_signature(info: HostEntryInfo) -> tuple[tuple[str, ...], bool]:
    """A host program's Python argument names (the stream left out) and whether it takes a stream."""
    heads = info.heads  # the names alone: a library's programs' types are parsed when each is first called
    return py_arg_names([n for n, stream in heads if not stream], ("stream",)), any(stream for _, stream in heads)


class HostCall:
    """One host program's entry: its checked, typed arguments (``arg_names`` excludes the stream)."""

    def __init__(self, info: HostEntryInfo) -> None:
        self.info = info
        self.label = info.label
        self.arg_names, self.has_stream = call_signature(info)
        abi = Abi(tuple(Param(p.name, p.type, _data_align(p)) for p in info.params))
        self.plan = Plan.of(abi)
        self.slots: tuple[Slot, ...] = self.plan.slots
        self.params: tuple[HostParam, ...] = info.params
        self.argtypes: list[Any] | None = []
        self.unsupported = ""  # why ctypes cannot call the entry ("" when it can)
        for p in info.params:
            try:
                self.argtypes.append(ctype_of(p.type))
            except Unsupported as e:
                self.argtypes, self.unsupported = None, f"parameter '{p.name}' is {e}"
                break
        self.specificity = plan_specificity(self.plan)  # the dispatch key kernel families order by
        # per tensor param: the modes whose shape / stride the struct carries, in field order
        self._dynamic = [None if s.tensor is None else (
            tuple(i for i, d in enumerate(s.tensor.spec.shape) if d is None),
            tuple(i for i, d in enumerate(s.tensor.spec.stride) if d is None)) for s in self.slots]

    def where(self, s: Slot) -> str:
        return f"host program {self.label}: parameter {s.index} '{s.name}'"

    def fit(self, values: dict[str, Any], views: dict[str, TensorView | None]) -> list[Any]:
        """The checked values, in parameter order (the stream's is None here)."""
        out: list[Any] = []
        for p, s in zip(self.params, self.slots):
            if p.stream:
                out.append(None)
                continue
            value, view = values[p.name], views[p.name]
            try:
                v = checks.check_arg(self.label, s, value, view)
            except (ArgumentTypeError, ArgumentValueError) as e:
                raise type(e)(e.message.replace(f"kernel {self.label}:", f"host program {self.label}:", 1)) from None
            if s.tensor is not None:
                self._contracts(s, p, v)
            out.append(v)
        return out

    def _contracts(self, s: Slot, p: HostParam, v: tuple[int, tuple[int, ...], tuple[int, ...]]) -> None:
        _, shape, strides = v
        for field, div in p.checks:
            if field == "data":
                continue  # the alignment, checked with the slot
            what, i = ("shape", int(field[5:])) if field.startswith("shape") else ("stride", int(field[6:]))
            values = shape if what == "shape" else strides
            if values[i] % div:
                raise ArgumentValueError(f"{self.where(s)}: {what}[{i}] = {values[i]} must be a multiple of {div} "
                                         f"(the kernel was compiled for it; {what} {list(values)})")

    def c_args(self, packed: list[Any], stream: int) -> list[Any]:
        """ctypes values for the entry, in parameter order."""
        assert self.argtypes is not None
        out: list[Any] = []
        for p, cls, dyn, v in zip(self.params, self.argtypes, self._dynamic, packed):
            t = p.type
            if p.stream:
                out.append(stream or None)
            elif dyn is not None:
                ptr, shape, strides = v
                out.append(cls(ptr, *[shape[i] for i in dyn[0]], *[strides[i] for i in dyn[1]]))
            elif isinstance(t, Scalar) and t.dtype in (DType.f16, DType.bf16):
                out.append(_half(t.dtype, v))
            elif isinstance(t, Pointer):
                out.append(v or None)
            elif isinstance(t, Struct):
                out.append(cls.from_buffer_copy(v))
            else:
                out.append(v)
        return out

    def extents(self, packed: list[Any]) -> list[int]:
        """The dynamic extents of every tensor argument (what the entry checks for 0)."""
        return [v[1][i] for s, v in zip(self.slots, packed) if s.tensor is not None
                for i, d in enumerate(s.tensor.spec.shape) if d is None]

    def describe(self) -> str:
        """``name: type`` of each caller argument, contracts included."""
        return ", ".join(self.describe_arg(i) for i in range(len(self.arg_names)))

    def describe_arg(self, i: int) -> str:
        name = self.arg_names[i]
        k = next(j for j, p in enumerate(self.params) if p.name == name)
        text = self.slots[k].describe()
        extra = [f"{f[:5]}[{f[5:]}] % {d}" if f.startswith("shape") else f"{f[:6]}[{f[6:]}] % {d}"
                 for f, d in self.params[k].checks if f != "data"]
        return text + (f" ({', '.join(extra)} == 0)" if extra else "")


def _data_align(p: HostParam) -> int:
    return math.lcm(1, *(d for f, d in p.checks if f == "data"))
