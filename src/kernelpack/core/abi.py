"""The typed parameter ABI of a kernel: the single source of truth for the C generator and the Python runtime.

A kernel's ABI is an ordered tuple of :class:`Param`, each with a name and a type of one of four kinds:

* :class:`Scalar`  - i8..i64, u8..u64, f16, bf16, f32, f64, bool, passed by value at its exact width;
* :class:`Pointer` - a device pointer to an element dtype (the scalar dtypes and f8e4m3, f8e5m2; or untyped), with
  an address space;
* :class:`Struct`  - a by-value C struct of named fields (a tensor descriptor ``{data, shape*, stride*}``);
* :class:`Opaque`  - bytes of a given size and alignment (a 128-byte ``CUtensorMap``);
* :class:`TensorList` - a device pointer to descriptors of a list of tensors the launcher builds per launch (cuTile's
  list-of-arrays parameter), followed by its count (a param of role ``list_count``).

Each kind knows its size, alignment and C spelling, and serializes to JSON and back losslessly.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable, Mapping
from dataclasses import field
from enum import Enum
from typing import Any

from . import _reprs
from .errors import AbiError
from .records import record
from .suggest import did_you_mean

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class DType(str, Enum):
    """Element and scalar types, named as in the JSON form."""

    i8 = "i8"
    i16 = "i16"
    i32 = "i32"
    i64 = "i64"
    u8 = "u8"
    u16 = "u16"
    u32 = "u32"
    u64 = "u64"
    f16 = "f16"
    bf16 = "bf16"
    f32 = "f32"
    f64 = "f64"
    bool = "bool"
    f8e4m3 = "f8e4m3"  # OCP FP8 E4M3 (NVIDIA __nv_fp8_e4m3, torch.float8_e4m3fn): element type only, uint8_t storage
    f8e5m2 = "f8e5m2"  # OCP FP8 E5M2 (NVIDIA __nv_fp8_e5m2, torch.float8_e5m2): element type only, uint8_t storage

    @property
    def size(self) -> int:
        return _DTYPE_INFO[self][0]

    @property
    def c_type(self) -> str:
        return _DTYPE_INFO[self][1]

    @property
    def struct_format(self) -> str:
        """The :mod:`struct` code used to pack a Python value of this dtype (f16/bf16 as raw bits)."""
        return _DTYPE_INFO[self][2]

    @property
    def is_float(self) -> builtins.bool:  # `bool` here would name the member
        return self in (DType.f16, DType.bf16, DType.f32, DType.f64, DType.f8e4m3, DType.f8e5m2)

    @property
    def is_fp8(self) -> builtins.bool:  # `bool` here would name the member
        """An 8-bit float: an element type of pointers and tensors only (C has no fp8 type: stored as uint8_t)."""
        return self in (DType.f8e4m3, DType.f8e5m2)

    @property
    def is_signed(self) -> builtins.bool:  # `bool` here would name the member
        return self.value.startswith("i")

    @property
    def is_integer(self) -> builtins.bool:  # `bool` here would name the member
        return self.value[0] in "iu"

    @property
    def int_range(self) -> tuple[int, int]:
        """The smallest and largest value of an integer dtype."""
        bits = 8 * self.size
        return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if self.is_signed else (0, (1 << bits) - 1)

    @classmethod
    def parse(cls, text: str | DType) -> DType:
        """The dtype named ``text``, spelled as kernelpack spells it (``f16``); another library's spelling
        (``fp16``, ``float16``, ``half``) or a near miss is refused naming the one to use."""
        try:
            return cls(text)
        except ValueError:
            valid = ", ".join(d.value for d in cls)
            alias = DTYPE_ALIASES.get(text.strip().lower()) if isinstance(text, str) else None
            hint = f"; kernelpack spells it {alias.value!r}" if alias is not None else did_you_mean(
                text, [d.value for d in cls]) if isinstance(text, str) else ""
            raise AbiError(f"unknown dtype {text!r} (expected one of {valid}{hint})") from None


# what other libraries call kernelpack's dtypes (torch, numpy, Triton, C): named in messages, and accepted where a
# DSL's own spelling is (a Triton signature takes both)
DTYPE_ALIASES: dict[str, DType] = {
    **{d.value: d for d in DType},
    "int8": DType.i8, "int16": DType.i16, "int32": DType.i32, "int": DType.i32, "int64": DType.i64,
    "long": DType.i64, "uint8": DType.u8, "uint16": DType.u16, "uint32": DType.u32, "uint64": DType.u64,
    "fp16": DType.f16, "float16": DType.f16, "half": DType.f16, "bfloat16": DType.bf16, "fp32": DType.f32,
    "float32": DType.f32, "float": DType.f32, "fp64": DType.f64, "float64": DType.f64, "double": DType.f64,
    "i1": DType.bool, "u1": DType.bool, "bool_": DType.bool, "fp8e4nv": DType.f8e4m3, "float8_e4m3fn": DType.f8e4m3,
    "fp8e5": DType.f8e5m2, "float8_e5m2": DType.f8e5m2,
}

# size in bytes, C spelling (kp_f16/kp_bf16 are 2-byte structs in the generated header), struct code
_DTYPE_INFO: dict[DType, tuple[int, str, str]] = {
    DType.i8: (1, "int8_t", "b"),
    DType.i16: (2, "int16_t", "h"),
    DType.i32: (4, "int32_t", "i"),
    DType.i64: (8, "int64_t", "q"),
    DType.u8: (1, "uint8_t", "B"),
    DType.u16: (2, "uint16_t", "H"),
    DType.u32: (4, "uint32_t", "I"),
    DType.u64: (8, "uint64_t", "Q"),
    DType.f16: (2, "kp_f16", "e"),
    DType.bf16: (2, "kp_bf16", "H"),
    DType.f32: (4, "float", "f"),
    DType.f64: (8, "double", "d"),
    DType.bool: (1, "bool", "?"),
    DType.f8e4m3: (1, "uint8_t", "B"),  # C has no fp8 type: the raw byte, as cuda_fp8.h's __nv_fp8_storage_t
    DType.f8e5m2: (1, "uint8_t", "B"),
}


def align_up(value: int, align: int) -> int:
    return (value + align - 1) // align * align


def _check_ident(name: str, what: str) -> None:
    if not isinstance(name, str) or not _IDENT.match(name):
        raise AbiError(f"{what} name {name!r} is not a C identifier")


@record(frozen=True)
class Scalar:
    """A by-value scalar of an exact width."""

    dtype: DType

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", DType.parse(self.dtype))
        if self.dtype.is_fp8:
            raise AbiError(f"scalar of dtype {self.dtype.value}: fp8 is an element type of pointers and tensors only "
                           f"(expected a scalar dtype: one of {', '.join(d.value for d in DType if not d.is_fp8)})")

    @property
    def size(self) -> int:
        return self.dtype.size

    @property
    def align(self) -> int:
        return self.dtype.size

    @property
    def c_type(self) -> str:
        return self.dtype.c_type


ADDRESS_SPACES = ("global", "generic", "shared", "const")


@record(frozen=True)
class Pointer:
    """A 64-bit device pointer. ``pointee`` None means untyped (``void*``)."""

    pointee: DType | None = None
    const: bool = False
    space: str = "global"

    def __post_init__(self) -> None:
        if self.pointee is not None:
            object.__setattr__(self, "pointee", DType.parse(self.pointee))
        if self.space not in ADDRESS_SPACES:
            raise AbiError(f"unknown address space {self.space!r} (expected one of {', '.join(ADDRESS_SPACES)})")

    size = 8
    align = 8

    @property
    def c_type(self) -> str:
        base = self.pointee.c_type if self.pointee is not None else "void"
        return f"{'const ' if self.const else ''}{base}*"


@record(frozen=True)
class Opaque:
    """Bytes of a fixed size and alignment whose content the ABI does not model (e.g. ``CUtensorMap``)."""

    size: int
    align: int = 1
    name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.size, int) or self.size <= 0:
            raise AbiError(f"opaque size must be a positive int (got {self.size!r})")
        if not isinstance(self.align, int) or self.align <= 0 or self.align & (self.align - 1):
            raise AbiError(f"opaque alignment must be a power of two (got {self.align!r})")
        if self.size % self.align:
            raise AbiError(f"opaque size {self.size} is not a multiple of its alignment {self.align}")
        if self.name:
            _check_ident(self.name, "opaque type")

    @property
    def c_type(self) -> str:
        return f"kp_{self.name}" if self.name else f"kp_opaque{self.size}_a{self.align}"


@record(frozen=True)
class TensorSpec:
    """What a tensor-descriptor struct describes: dtype, rank and which modes are static.

    ``shape[i]``/``stride[i]`` is an int for a mode fixed at compile time, None for one passed at run
    time (as struct field ``shape{i}``/``stride{i}``). Strides are in elements.
    """

    dtype: DType
    shape: tuple[int | None, ...]
    stride: tuple[int | None, ...]
    shape_dtype: DType = DType.i32
    stride_dtype: DType = DType.i64
    align: int = 1  # guaranteed alignment of the data pointer in bytes (a dispatch constraint)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", DType.parse(self.dtype))
        object.__setattr__(self, "shape_dtype", DType.parse(self.shape_dtype))
        object.__setattr__(self, "stride_dtype", DType.parse(self.stride_dtype))
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "stride", tuple(self.stride))
        if len(self.shape) != len(self.stride):
            raise AbiError(f"tensor shape has rank {len(self.shape)} but stride has rank {len(self.stride)}")
        for dt in (self.shape_dtype, self.stride_dtype):
            if not dt.is_integer:
                raise AbiError(f"tensor shape/stride dtype must be an integer type (got {dt.value})")

    @property
    def rank(self) -> int:
        return len(self.shape)

    def fields(self) -> tuple[Field, ...]:
        out = [Field("data", Pointer(self.dtype))]
        out += [Field(f"shape{i}", Scalar(self.shape_dtype)) for i, s in enumerate(self.shape) if s is None]
        out += [Field(f"stride{i}", Scalar(self.stride_dtype)) for i, s in enumerate(self.stride) if s is None]
        return tuple(out)


@record(frozen=True, repr=False)  # its own __repr__
class Field:
    """One named field of a :class:`Struct`."""

    name: str
    type: ParamType

    def __post_init__(self) -> None:
        _check_ident(self.name, "struct field")

    def __repr__(self) -> str:
        return f"<Field {_reprs.clip(self.type.c_type, 80)} {_reprs.clip(self.name, 80)}>"


@record(frozen=True, repr=False)  # its own __repr__
class Struct:
    """A by-value C struct laid out by the C rules (each field at its natural alignment)."""

    name: str
    fields: tuple[Field, ...]
    tensor: TensorSpec | None = None
    min_align: int = 1

    def __post_init__(self) -> None:
        _check_ident(self.name, "struct")
        object.__setattr__(self, "fields", tuple(self.fields))
        if not self.fields:
            raise AbiError(f"struct {self.name} has no fields")
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise AbiError(f"struct {self.name} has duplicate field names: {names}")
        if self.tensor is not None and self.tensor.fields() != self.fields:
            raise AbiError(f"struct {self.name}: fields do not match its tensor spec")

    @classmethod
    def tensor_descriptor(cls, name: str, spec: TensorSpec) -> Struct:
        return cls(name, spec.fields(), tensor=spec)

    @property
    def field_offsets(self) -> tuple[int, ...]:
        offsets, cur = [], 0
        for f in self.fields:
            cur = align_up(cur, f.type.align)
            offsets.append(cur)
            cur += f.type.size
        return tuple(offsets)

    @property
    def align(self) -> int:
        return max([self.min_align] + [f.type.align for f in self.fields])

    @property
    def size(self) -> int:
        last = self.field_offsets[-1] + self.fields[-1].type.size
        return align_up(last, self.align)

    @property
    def c_type(self) -> str:
        return self.name

    def __repr__(self) -> str:
        fields = _reprs.listing((f.name for f in self.fields), 120)
        return f"<Struct {_reprs.clip(self.name, 64)} {{{fields}}}, {self.size} bytes>"


LIST_MAX_RANK = 8  # a list element's rank: what a C caller's kp_tensor holds (KP_MAX_RANK)


@record(frozen=True)
class TensorList:
    """A list of tensors, passed to the kernel as a 64-bit device pointer to one descriptor per tensor.

    Each descriptor is ``1 + 2 * rank`` 64-bit words in global memory: the data pointer, every extent, every stride
    (in elements; static modes included), one descriptor after the other. The launcher builds them from the caller's
    list for each launch (kernelpack.launch.plan: OP_LIST); the number of tensors is the parameter that follows, of
    role ``list_count``. ``element`` is what every tensor of the list must be: dtype, rank, static modes (None: any),
    the index type its extents and strides must fit (``shape_dtype``, the same as ``stride_dtype``: the kernel may
    read only the low bits of each word) and the alignment of its data in bytes. Per mode, ``shape_div`` and
    ``stride_div`` are the multiples the extents and strides must be, ``stride_min`` the least stride (None: any).
    """

    element: TensorSpec
    shape_div: tuple[int, ...] = ()
    stride_div: tuple[int, ...] = ()
    stride_min: tuple[int | None, ...] = ()

    size = 8
    align = 8

    def __post_init__(self) -> None:
        e = self.element
        if not isinstance(e, TensorSpec):
            raise AbiError(f"a tensor list's element must be a TensorSpec (got {type(e).__name__})")
        n = e.rank
        if not 1 <= n <= LIST_MAX_RANK:
            raise AbiError(f"a tensor list's elements must have rank 1 to {LIST_MAX_RANK} (got {n})")
        if e.shape_dtype != e.stride_dtype:
            raise AbiError(f"a tensor list's extents and strides share one index type (got {e.shape_dtype.value} and "
                           f"{e.stride_dtype.value})")
        for name, default in (("shape_div", 1), ("stride_div", 1), ("stride_min", None)):
            v = tuple(getattr(self, name)) or (default,) * n
            if len(v) != n:
                raise AbiError(f"tensor list {name} has {len(v)} modes, its elements have rank {n}")
            if name != "stride_min" and any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in v):
                raise AbiError(f"tensor list {name} must be ints >= 1 (got {list(v)})")
            if name == "stride_min" and any(d is not None and (isinstance(d, bool) or not isinstance(d, int))
                                            for d in v):
                raise AbiError(f"tensor list stride_min must be ints or None (got {list(v)})")
            object.__setattr__(self, name, v)

    @property
    def rank(self) -> int:
        return self.element.rank

    @property
    def words(self) -> int:
        """64-bit words per descriptor: the data pointer, the extents, the strides."""
        return 1 + 2 * self.element.rank

    @property
    def c_type(self) -> str:
        return "kp_tensor_list"

    def describe(self) -> str:
        """``f32[?, 64] stride [?, 1], 16-byte aligned``: what each tensor must be."""
        e = self.element
        dims = ", ".join("?" if d is None else str(d) for d in e.shape)
        strides = ", ".join("?" if d is None else str(d) for d in e.stride)
        extra = [f"{e.align}-byte aligned"] if e.align > 1 else []
        extra += [f"shape[{i}] % {d} == 0" for i, d in enumerate(self.shape_div) if d > 1]
        extra += [f"stride[{i}] % {d} == 0" for i, d in enumerate(self.stride_div) if d > 1]
        extra += [f"stride[{i}] >= {d}" for i, d in enumerate(self.stride_min) if d is not None]
        return f"{e.dtype.value}[{dims}] stride [{strides}]" + "".join(f", {x}" for x in extra)


ParamType = Scalar | Pointer | Struct | Opaque | TensorList

PARAM_ROLES = ("arg", "global_scratch", "profile_scratch", "list_count")
# hidden params the launcher fills from the device it launches on, queried once per device (kernelpack.launch.device);
# "max_active_clusters" takes the cluster size in blocks: "max_active_clusters:2"
DEVICE_ROLES = ("sm_count", "max_dynamic_smem", "max_active_clusters")
_CLUSTER_ROLE = r"^max_active_clusters:([1-9][0-9]?)$"  # compiled on first use (re caches it)


def device_role(role: str) -> tuple[str, int] | None:
    """(property, cluster size) of a device-derived role (``"sm_count"`` -> ``("sm_count", 0)``,
    ``"max_active_clusters:2"`` -> ``("max_active_clusters", 2)``); None for any other role."""
    if role in ("sm_count", "max_dynamic_smem"):
        return role, 0
    m = re.match(_CLUSTER_ROLE, role) if isinstance(role, str) else None
    return ("max_active_clusters", int(m.group(1))) if m else None


@record(frozen=True, repr=False)  # its own __repr__
class Param:
    """One kernel parameter.

    ``divisibility``: a dispatch constraint; the integer value (or pointer address) is a multiple of it.
    ``role``: ``arg`` for a caller-visible argument; the others are hidden params the launcher fills: Triton's
    scratch pointers (``global_scratch``, ``profile_scratch``), the number of tensors of the :class:`TensorList`
    param just before it (``list_count``, a 32- or 64-bit integer) and values read from the launch device
    (:data:`DEVICE_ROLES`: ``sm_count``, ``max_dynamic_smem``, ``max_active_clusters:<blocks per cluster>``), which
    must be 32- or 64-bit integers.
    """

    name: str
    type: ParamType
    divisibility: int = 1
    role: str = "arg"

    def __post_init__(self) -> None:
        _check_ident(self.name, "parameter")
        if not isinstance(self.type, (Scalar, Pointer, Struct, Opaque, TensorList)):
            raise AbiError(f"parameter {self.name}: {self.type!r} is not an ABI type")
        if not isinstance(self.divisibility, int) or self.divisibility < 1:
            raise AbiError(f"parameter {self.name}: divisibility must be an int >= 1 (got {self.divisibility!r})")
        if self.role not in PARAM_ROLES and device_role(self.role) is None:
            raise AbiError(f"parameter {self.name}: unknown role {self.role!r} (expected one of {PARAM_ROLES}, "
                           f"{DEVICE_ROLES[0]!r}, {DEVICE_ROLES[1]!r} or '{DEVICE_ROLES[2]}:<blocks per cluster>')")
        if isinstance(self.type, TensorList) and self.role != "arg":
            raise AbiError(f"parameter {self.name}: a tensor list is a caller's argument (role 'arg', not "
                           f"{self.role!r})")
        if (device_role(self.role) is not None or self.role == "list_count") and not (
                isinstance(self.type, Scalar) and self.type.dtype.is_integer and self.type.size in (4, 8)):
            raise AbiError(f"parameter {self.name}: role {self.role!r} fills a 32- or 64-bit integer, not "
                           f"{self.type.c_type}")

    def describe(self, limit: int | None = None) -> str:
        """``int32_t n``, with its divisibility and role when they are not the defaults (type and name each cut to
        ``limit`` characters when given)."""
        t, n = self.type.c_type, self.name
        if limit is not None:
            t, n = _reprs.clip(t, limit), _reprs.clip(n, limit)
        return (f"{t} {n}" + (f" (divisible by {self.divisibility})" if self.divisibility > 1 else "")
                + (f" (role {self.role})" if self.role != "arg" else ""))

    def __repr__(self) -> str:
        return f"<Param {self.describe(80)}>"


@record(frozen=True, repr=False)  # its own __repr__
class Abi:
    """The ordered parameters of one kernel entry."""

    params: tuple[Param, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise AbiError(f"duplicate parameter names: {', '.join(dupes)}")
        for i, p in enumerate(self.params):  # a tensor list, then its count
            nxt = self.params[i + 1] if i + 1 < len(self.params) else None
            if isinstance(p.type, TensorList) and (nxt is None or nxt.role != "list_count"):
                raise AbiError(f"parameter {p.name}: a tensor list must be followed by its count (a parameter of role "
                               f"'list_count')")
            if p.role == "list_count" and (i == 0 or not isinstance(self.params[i - 1].type, TensorList)):
                raise AbiError(f"parameter {p.name}: role 'list_count' must follow a tensor list parameter")

    def __len__(self) -> int:
        return len(self.params)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.params)

    def offsets(self, base: int = 0) -> tuple[int, ...]:
        """Byte offsets of each param in the parameter buffer.

        ``base`` is the absolute constant-bank address where the buffer starts (from the cubin);
        alignment applies to the absolute address, so offsets can differ between archs.
        """
        if base == 0:  # the base every launch plan uses: computed once per Abi
            got = vars(self).get("_offsets0")
            if got is not None:
                return got  # type: ignore[no-any-return]
        out, cur = [], 0
        for p in self.params:
            cur = align_up(base + cur, p.type.align) - base
            out.append(cur)
            cur += p.type.size
        got = tuple(out)
        if base == 0:
            vars(self)["_offsets0"] = got  # outside the fields: equality, hashing and repr are unaffected
        return got

    def param_bytes(self, base: int = 0) -> int:
        if not self.params:
            return 0
        return self.offsets(base)[-1] + self.params[-1].type.size

    @property
    def args(self) -> tuple[Param, ...]:
        """The caller-visible params (hidden launcher-filled ones removed)."""
        return tuple(p for p in self.params if p.role == "arg")

    def to_json(self) -> list[dict[str, Any]]:
        return [param_to_json(p) for p in self.params]

    @classmethod
    def from_json(cls, data: Iterable[Mapping[str, Any]]) -> Abi:
        if not isinstance(data, list):
            raise AbiError(f"ABI JSON must be a list of params (got {type(data).__name__})")
        return cls(tuple(param_from_json(d) for d in data))

    def describe(self) -> str:
        return ", ".join(f"{p.type.c_type} {p.name}" for p in self.params)

    def __repr__(self) -> str:
        return f"<Abi ({_reprs.clip(self.describe(), 200)})>"


# ---------------------------------------------------------------- JSON


def type_to_json(t: ParamType) -> dict[str, Any]:
    if isinstance(t, Scalar):
        return {"kind": "scalar", "dtype": t.dtype.value}
    if isinstance(t, Pointer):
        return {
            "kind": "pointer",
            "pointee": t.pointee.value if t.pointee is not None else None,
            "const": t.const,
            "space": t.space,
        }
    if isinstance(t, Opaque):
        return {"kind": "opaque", "size": t.size, "align": t.align, "name": t.name}
    if isinstance(t, TensorList):
        return {"kind": "tensor_list", "element": _spec_to_json(t.element), "shape_div": list(t.shape_div),
                "stride_div": list(t.stride_div), "stride_min": list(t.stride_min)}
    out: dict[str, Any] = {
        "kind": "struct",
        "name": t.name,
        "fields": [{"name": f.name, "type": type_to_json(f.type)} for f in t.fields],
        "min_align": t.min_align,
    }
    if t.tensor is not None:
        out["tensor"] = _spec_to_json(t.tensor)
    return out


def _spec_to_json(s: TensorSpec) -> dict[str, Any]:
    return {
        "dtype": s.dtype.value,
        "shape": list(s.shape),
        "stride": list(s.stride),
        "shape_dtype": s.shape_dtype.value,
        "stride_dtype": s.stride_dtype.value,
        "align": s.align,
    }


def _spec_from_json(s: Mapping[str, Any]) -> TensorSpec:
    return TensorSpec(DType.parse(s["dtype"]), tuple(s["shape"]), tuple(s["stride"]), DType.parse(s["shape_dtype"]),
                      DType.parse(s["stride_dtype"]), int(s.get("align", 1)))


def type_from_json(d: Mapping[str, Any]) -> ParamType:
    if not isinstance(d, Mapping):
        raise AbiError(f"ABI type must be a JSON object (got {d!r})")
    kind = d.get("kind")
    try:
        if kind == "scalar":
            return Scalar(DType.parse(d["dtype"]))
        if kind == "pointer":
            pointee = d.get("pointee")
            return Pointer(DType.parse(pointee) if pointee is not None else None, bool(d["const"]), d["space"])
        if kind == "opaque":
            return Opaque(int(d["size"]), int(d["align"]), str(d.get("name", "")))
        if kind == "struct":
            fields = tuple(Field(f["name"], type_from_json(f["type"])) for f in d["fields"])
            tensor = _spec_from_json(d["tensor"]) if d.get("tensor") is not None else None
            return Struct(d["name"], fields, tensor, int(d.get("min_align", 1)))
        if kind == "tensor_list":
            return TensorList(_spec_from_json(d["element"]), tuple(d["shape_div"]), tuple(d["stride_div"]),
                              tuple(d["stride_min"]))
    except (KeyError, TypeError, ValueError) as e:
        raise AbiError(f"malformed ABI type {dict(d)!r}: {e!r}") from None
    raise AbiError(f"unknown ABI type kind {kind!r} (expected scalar, pointer, struct, opaque or tensor_list)")


def param_to_json(p: Param) -> dict[str, Any]:
    return {"name": p.name, "type": type_to_json(p.type), "divisibility": p.divisibility, "role": p.role}


def param_from_json(d: Mapping[str, Any]) -> Param:
    if not isinstance(d, Mapping) or "name" not in d or "type" not in d:
        raise AbiError(f"ABI param must be an object with 'name' and 'type' (got {d!r})")
    return Param(d["name"], type_from_json(d["type"]), int(d.get("divisibility", 1)), str(d.get("role", "arg")))
