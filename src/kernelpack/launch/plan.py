"""The argument plan of one specialization, derived once from its typed ABI (kernelpack.core.abi is the only source).

A plan is one :class:`Slot` per kernel parameter: where its value lives in a parameter buffer laid out at the
ABI's natural offsets (base 0), how wide it is, which caller argument fills it and which constraints the
argument must meet. The launch passes the driver one pointer per parameter (``kernelParams``), so the layout of
the buffer never depends on the arch; the driver places each value at the cubin's own offset.

The C library's generator renders a plan as C statements (``clib/launchgen.py``); the runtime's pure-Python path
packs from it (``runtime/packer.py``) and its C extension receives it as tuples (:meth:`Plan.to_c`) and packs from
them without looking at the ABI again. The op and grid-step codes are in ``csrc/kp_model.h`` for C.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..core.abi import Abi, DType, Param, Pointer, Scalar, Struct, TensorList, TensorSpec, device_role
from ..core.launchspec import GRID_OPS, GridExpr, LaunchSpec
from ..core.records import record
from .codes import DTYPE_CODE, INT64_RANGE, INT_RANGE  # noqa: F401 - INT_RANGE: the ranges every plan check uses

if TYPE_CHECKING:  # annotations only: a plan holds the descriptors and ranges its artifact gives
    from ..core.tma import TensorDescSpec
    from .ranges import Range

KP_DYN = -(2**63)  # a mode passed at run time (C plans; KP_DYN in kp_model.h)

# how a parameter is filled; the C extension packs the first five and "device" itself and leaves plans with the
# others (launch-derived values: a Triton scratch buffer, the first param of a tensor descriptor -- the caller's
# tensor -- and the other params that descriptor fills, a tensor list) to the Python path. "device": a hidden param
# filled with a property of the launch device (its role names it: kernelpack.launch.device). "list": a TensorList
# param -- the caller's list of tensors, whose descriptors the launch copies into device memory of its own (the
# param is their address) -- and "list_count" the count param after it, filled from the same caller argument
OPS: dict[str, int] = {"null": 0, "ptr": 1, "scalar": 2, "tensor": 3, "bytes": 4, "scratch": 5, "desc": 6,
                       "desc_field": 7, "device": 8, "list": 9, "list_count": 10}
OP_NULL, OP_PTR, OP_SCALAR, OP_TENSOR, OP_BYTES = OPS["null"], OPS["ptr"], OPS["scalar"], OPS["tensor"], OPS["bytes"]
OP_SCRATCH, OP_DESC, OP_DESC_FIELD, OP_DEVICE = OPS["scratch"], OPS["desc"], OPS["desc_field"], OPS["device"]
OP_LIST, OP_LIST_COUNT = OPS["list"], OPS["list_count"]


@record(frozen=True)
class TensorFields:
    """Where a tensor-descriptor struct keeps its data pointer and its run-time shape/stride values."""

    spec: TensorSpec
    data: int  # offset of the data pointer inside the struct
    shape: tuple[int, ...]  # per mode: field offset, or -1 for a static mode
    stride: tuple[int, ...]

    @classmethod
    def of(cls, t: Struct) -> TensorFields:
        assert t.tensor is not None
        offs = dict(zip((f.name for f in t.fields), t.field_offsets))
        spec = t.tensor
        return cls(spec, offs["data"],
                   tuple(offs[f"shape{i}"] if s is None else -1 for i, s in enumerate(spec.shape)),
                   tuple(offs[f"stride{i}"] if s is None else -1 for i, s in enumerate(spec.stride)))


@record(frozen=True)
class Slot:
    """One kernel parameter in the plan."""

    index: int  # position in the ABI
    param: Param
    arg: int  # caller argument that fills it; -1 for hidden (launcher-filled) params
    offset: int  # in the base-0 parameter buffer
    size: int
    op: int  # OP_*
    dtype: DType | None  # scalar type, pointee, or tensor element type
    align: int  # required alignment of the pointer / tensor data in bytes (1 = none)
    divisor: int  # an int argument must be a multiple of it (1 = none)
    tensor: TensorFields | None = None
    desc: TensorDescSpec | None = None  # OP_DESC / OP_DESC_FIELD: the descriptor, and this param's place in it
    desc_pos: int = 0
    # range constraints (kernelpack.launch.ranges), each (mode, lo, hi): mode -1 bounds an integer argument's value,
    # mode k a tensor's extent k (one the argument's type holds whole is left out)
    ranges: tuple[tuple[int, int, int], ...] = ()
    tlist: TensorList | None = None  # OP_LIST: what each tensor of the list must be

    @property
    def name(self) -> str:
        """The caller's name for it: a tensor descriptor's argument name for the slot that stands for the
        descriptor (its first kernel param may be named otherwise, e.g. ``a_base`` where it is decomposed)."""
        return self.desc.arg if self.op == OP_DESC and self.desc is not None else self.param.name

    def describe(self) -> str:
        """The argument as a user writes it: ``x: const f32*`` or ``t: tensor f16[?, 64] stride [?, 1]``."""
        t = self.param.type
        if self.desc is not None:  # its lowering and box are the binary's (they may differ per arch)
            d = self.desc
            return f"{d.arg}: tensor {d.dtype}, rank {d.rank} (tensor descriptor)"
        if self.tlist is not None:
            return f"{self.name}: list of tensors {self.tlist.describe()}"
        if self.tensor is not None:
            s = self.tensor.spec
            dims = ", ".join("?" if d is None else str(d) for d in s.shape)
            strides = ", ".join("?" if d is None else str(d) for d in s.stride)
            extra = f", {self.align}-byte aligned" if self.align > 1 else ""
            return f"{self.name}: tensor {s.dtype.value}[{dims}] stride [{strides}]{extra}"
        if isinstance(t, Pointer):
            base = t.pointee.value if t.pointee is not None else "void"
            extra = f", {self.align}-byte aligned" if self.align > 1 else ""
            return f"{self.name}: {'const ' if t.const else ''}{base}*{extra}"
        if isinstance(t, Scalar):
            extra = f", multiple of {self.divisor}" if self.divisor > 1 else ""
            return f"{self.name}: {t.dtype.value}{extra}"
        if isinstance(t, Struct):
            return f"{self.name}: struct {t.name} ({t.size} bytes)"
        return f"{self.name}: {t.c_type} ({t.size} bytes)"


def list_weight(t: TensorList) -> float:
    """How much a tensor list's element constraint narrows (family dispatch): static modes, alignment, divisors,
    stride bounds."""
    e = t.element
    return (sum(d is not None for d in e.shape + e.stride) + _log2(e.align)
            + sum(_log2(d) for d in t.shape_div + t.stride_div) + sum(m is not None for m in t.stride_min))


def _log2(n: int) -> float:
    return math.log2(n) if n > 1 else 0.0


def _slot(index: int, p: Param, arg: int, offset: int, launch: LaunchSpec) -> Slot:
    t = p.type
    if p.role == "list_count" and isinstance(t, Scalar):  # the count of the tensor list before it (caller arg - 1)
        return Slot(index, p, arg - 1, offset, t.size, OP_LIST_COUNT, t.dtype, 1, 1)
    if isinstance(t, TensorList):
        return Slot(index, p, arg, offset, 8, OP_LIST, t.element.dtype, t.element.align, 1, tlist=t)
    if p.role in ("global_scratch", "profile_scratch") and getattr(launch, p.role):
        return Slot(index, p, -1, offset, t.size, OP_SCRATCH, None, 1, 1)
    if device_role(p.role) is not None and isinstance(t, Scalar):
        return Slot(index, p, -1, offset, t.size, OP_DEVICE, t.dtype, 1, 1)
    if p.role != "arg":
        return Slot(index, p, -1, offset, t.size, OP_NULL, None, 1, 1)
    if isinstance(t, Pointer):
        return Slot(index, p, arg, offset, 8, OP_PTR, t.pointee, p.divisibility, 1)
    if isinstance(t, Scalar):
        return Slot(index, p, arg, offset, t.size, OP_SCALAR, t.dtype, 1, p.divisibility if t.dtype.is_integer else 1)
    if isinstance(t, Struct) and t.tensor is not None:
        align = math.lcm(t.tensor.align, p.divisibility)
        return Slot(index, p, arg, offset, t.size, OP_TENSOR, t.tensor.dtype, align, 1, TensorFields.of(t))
    return Slot(index, p, arg, offset, t.size, OP_BYTES, None, 1, 1)


@record(frozen=True)
class Plan:
    """Every parameter of one specialization, in ABI order."""

    slots: tuple[Slot, ...]
    nbytes: int  # size of the base-0 buffer
    nargs: int  # caller-visible arguments

    @classmethod
    def of(cls, abi: Abi, launch: LaunchSpec | None = None, ranges: Sequence[Range] = (),
           cache: dict[Any, Slot] | None = None) -> Plan:
        """``launch``: the artifact's LaunchSpec; a tensor descriptor turns the params it fills into one argument
        (at the place of its first param), a scratch size makes that hidden param an allocated buffer. ``ranges``:
        the artifact's range constraints (kernelpack.launch.ranges; checked against the arguments by
        ``ranges.check`` when the artifact is made), attached to the slots of the arguments they name."""
        plan = cls._of(abi, launch, cache)
        if not ranges:
            return plan
        slots = tuple(replace(s, ranges=slot_ranges(s, ranges)) if s.arg >= 0 and s.op not in _FILLED else s
                      for s in plan.slots)
        return cls(slots, plan.nbytes, plan.nargs)

    @classmethod
    def _of(cls, abi: Abi, launch: LaunchSpec | None = None, cache: dict[Any, Slot] | None = None) -> Plan:
        """``cache``: slots already made, reused where the same parameter object sits at the same place (the
        specializations of a family repeat most of their parameters)."""
        ls = launch or LaunchSpec()
        descs = {n: (d, i) for d in ls.tensor_descs for i, n in enumerate(d.params)}
        offsets = abi.offsets(0)
        slots: list[Slot] = []
        arg = 0
        desc_arg: dict[str, int] = {}
        scratch = (ls.global_scratch, ls.profile_scratch)
        for i, (p, off) in enumerate(zip(abi.params, offsets)):
            hit = descs.get(p.name) if descs else None
            if hit is not None and p.role == "arg":
                d, pos = hit
                if pos == 0:
                    desc_arg[d.arg] = arg
                    arg += 1
                op = OP_DESC if pos == 0 else OP_DESC_FIELD
                dtype = p.type.dtype if isinstance(p.type, Scalar) else None
                slots.append(Slot(i, p, desc_arg[d.arg], off, p.type.size, op, dtype, 1, 1, desc=d, desc_pos=pos))
                continue
            if cache is None:
                slots.append(_slot(i, p, arg, off, ls))
            else:
                key = (id(p), i, arg, off, scratch)
                got = cache.get(key)
                if got is None or got.param is not p:
                    got = cache[key] = _slot(i, p, arg, off, ls)
                slots.append(got)
            arg += p.role == "arg"
        return cls(tuple(slots), max(abi.param_bytes(0), 1), arg)

    @cached_property
    def args(self) -> tuple[Slot, ...]:
        """One slot per caller argument (a tensor descriptor's first param stands for the whole descriptor, a tensor
        list's pointer for the list)."""
        return tuple(s for s in self.slots if s.arg >= 0 and s.op not in _FILLED)

    @property
    def derived(self) -> bool:
        """Launches need values the C extension does not compute (scratch buffers, tensor maps, tensor lists)."""
        return any(OP_SCRATCH <= s.op <= OP_DESC_FIELD or s.op in (OP_LIST, OP_LIST_COUNT) for s in self.slots)

    @cached_property
    def lists(self) -> tuple[Slot, ...]:
        """The tensor-list arguments (OP_LIST), in order."""
        return tuple(s for s in self.slots if s.op == OP_LIST)

    @cached_property
    def device_slots(self) -> tuple[Slot, ...]:
        """The params filled with a property of the launch device, in order (the C extension's entry values)."""
        return tuple(s for s in self.slots if s.op == OP_DEVICE)

    @cached_property
    def c_form(self) -> tuple[Any, ...]:
        """:meth:`to_c`, made once per plan (the specializations of a family share their plans)."""
        return self.to_c()

    def to_c(self) -> tuple[Any, ...]:
        """The plan as plain tuples for the C extension (see ``_launch.h``: ``kp_slot``). Bundles store these rows in
        their dispatch records (``runtime/record.py``): a change to them bumps ``record.VERSION``."""
        out = []
        for s in self.slots:
            tf = s.tensor
            tensor: tuple[Any, ...] | None
            if tf is not None:
                spec = tf.spec
                shape = tuple(KP_DYN if d is None else d for d in spec.shape)
                stride = tuple(KP_DYN if d is None else d for d in spec.stride)
                tensor = (shape, stride, tf.data, tf.shape, tf.stride, DTYPE_CODE[spec.shape_dtype],
                          DTYPE_CODE[spec.stride_dtype])
            elif s.tlist is not None:
                tensor = _list_c(s.tlist)
            else:
                tensor = _desc_c(s)
            op = s.op if s.op < OP_SCRATCH or s.op in (OP_DEVICE, OP_LIST_COUNT) or tensor is not None else -1
            # others (-1): the Python path's; device: which entry value
            arg = self.device_slots.index(s) if s.op == OP_DEVICE else s.arg
            dtype = s.dtype if s.op != OP_DESC or s.desc is None else s.desc.element_dtype
            out.append((op, arg, s.offset, s.size, DTYPE_CODE.get(dtype, 0) if dtype else 0, s.align,
                        s.divisor, tensor, s.ranges))
        return tuple(out)


_FILLED = (OP_DESC_FIELD, OP_LIST_COUNT)  # params filled from a caller argument another slot stands for


def _list_c(t: TensorList) -> tuple[Any, ...]:
    """What the C extension needs of a tensor-list slot (``_launch_family.c`` parse_list): ``(rank, index dtype, lo,
    hi, shape, stride, shape divisors, stride divisors, least strides)``, static modes and least strides KP_DYN where
    there are none; the element dtype and alignment are the slot's."""
    e = t.element
    lo, hi = INT64_RANGE[e.shape_dtype]
    return (e.rank, DTYPE_CODE[e.shape_dtype], lo, hi, tuple(KP_DYN if d is None else d for d in e.shape),
            tuple(KP_DYN if d is None else d for d in e.stride), t.shape_div, t.stride_div,
            tuple(KP_DYN if d is None else d for d in t.stride_min))


def _desc_c(s: Slot) -> tuple[Any, ...] | None:
    """What the C extension needs of a tensor-descriptor slot (``_launch_desc.c`` parse_desc), None when such launches
    take the Python path (a slot of no descriptor, an element type kernelpack has no dtype for, e.g. fp8e4b15).
    OP_DESC: ``(tma, rank, elem_type, elem_size, swizzle, fp4_padded, box)``; OP_DESC_FIELD: ``(field, pos, rank)``,
    field 0 the extent ``pos``, 1 the stride ``pos`` (elements), 2 a flag (the C path passes 0: no NaN padding, no
    TF32 rounding, as the Python path's defaults)."""
    d = s.desc
    if d is None or s.op not in (OP_DESC, OP_DESC_FIELD) or d.element_dtype is None:
        return None
    if s.op == OP_DESC:
        return (int(d.lowering == "tma"), d.rank, d.elem_type, d.elem_size, d.swizzle, int(d.fp4_padded),
                d.block_shape)
    n, q = d.rank, s.desc_pos - 1  # the params after the first: see kernelpack.core.tma.expected_params
    if d.lowering == "decomposed":
        nf = len(d.flags)
        if 2 * n <= q < 2 * n + nf:
            return (2, 0, n)
        if q >= 2 * n + nf:
            q -= 2 * n + nf
    return (0, q, n) if q < n else (1, q - n, n)


def value_range(s: Slot, mode: int) -> tuple[int, int] | None:
    """What argument slot ``s`` can hold at ``mode`` (-1: its integer value, k: extent k of a tensor), as int64
    bounds; None where it has no such integer (a pointer, a float, a mode beyond the rank)."""
    if mode < 0:
        if s.op == OP_SCALAR and s.dtype is not None and s.dtype.is_integer:
            return INT64_RANGE[s.dtype]
        return None
    if s.tensor is not None and mode < s.tensor.spec.rank:
        lo, hi = INT64_RANGE[s.tensor.spec.shape_dtype]
        static = s.tensor.spec.shape[mode]
        return (static, static) if static is not None else (max(lo, 0), hi)
    if s.op == OP_DESC and s.desc is not None and mode < s.desc.rank:
        return (0, INT64_RANGE[DType.i64][1])
    return None


def slot_ranges(s: Slot, ranges: Sequence[Range]) -> tuple[tuple[int, int, int], ...]:
    """The rows of ``ranges`` naming slot ``s`` that narrow what it can hold (a mode it cannot hold: left out;
    ``ranges.check`` refuses those when the artifact is made)."""
    out = []
    for r in ranges:
        if r.arg != s.name:
            continue
        have = value_range(s, r.mode)
        if have is not None:
            if (max(r.lo, have[0]), min(r.hi, have[1])) != have:  # a range the type holds anyway constrains nothing
                out.append((r.mode, r.lo, r.hi))
    return tuple(out)


# grid program steps (_launch.h kp_gop): push a constant, push a packed integer, or an operator of GRID_OPS
GRID_OPS_CODES: dict[str, int] = {"const": 0, "load": 1, **{op: 2 + i for i, op in enumerate(GRID_OPS)}}
G_CONST, G_LOAD = GRID_OPS_CODES["const"], GRID_OPS_CODES["load"]
_G_OP = {op: GRID_OPS_CODES[op] for op in GRID_OPS}
_G_STACK = 16  # the C evaluator's stack


class _NotInC(Exception):
    pass


def grid_program(plan: Plan, rule: tuple[GridExpr, GridExpr, GridExpr] | None) -> Any:
    """``LaunchSpec.grid`` for the C extension: per dimension, postfix steps ``(op, value, dtype)`` reading the
    integer values from the packed parameter buffer. None without a rule;
    False when the C path cannot evaluate it (it reads a tensor-descriptor or hidden param, a constant beyond
    64 bits, a formula too deep): such launches take the Python path."""
    if rule is None:
        return None
    by_name = {s.name: s for s in plan.device_slots}
    by_name.update({s.name: s for s in plan.args})
    try:
        out = []
        for e in rule:
            steps = _grid_steps(e, by_name)
            depth = peak = 0
            for op, _, _ in steps:
                depth += 1 if op <= G_LOAD else -1
                peak = max(peak, depth)
            if peak > _G_STACK:
                raise _NotInC
            out.append(tuple(steps))
        return tuple(out)
    except _NotInC:
        return False


def _grid_steps(e: GridExpr, by_name: dict[str, Slot]) -> list[tuple[int, int, int]]:
    if isinstance(e, int):
        if not -(2**63) <= e < 2**63:
            raise _NotInC
        return [(G_CONST, e, 0)]
    if e[0] == "arg":
        return [_grid_load(by_name.get(e[1]), e[2])]
    return _grid_steps(e[1], by_name) + _grid_steps(e[2], by_name) + [(_G_OP[e[0]], 0, 0)]


def _grid_load(s: Slot | None, fld: str | None) -> tuple[int, int, int]:
    """Where the packed buffer holds the value the formula reads (as runtime/family.py _grid_field reads it)."""
    if s is None or s.op not in (OP_SCALAR, OP_TENSOR, OP_BYTES, OP_DEVICE):
        raise _NotInC
    if fld is None:
        if s.op not in (OP_SCALAR, OP_DEVICE) or s.dtype is None:
            raise _NotInC
        return (G_LOAD, s.offset, DTYPE_CODE[s.dtype])
    if s.tensor is not None:
        tf = s.tensor
        shape = fld.startswith("shape")
        i = int(fld[5:] if shape else fld[6:])
        off = (tf.shape if shape else tf.stride)[i]
        if off < 0:  # a static mode is no field (LaunchSpec validation refuses such formulas)
            raise _NotInC
        return (G_LOAD, s.offset + off, DTYPE_CODE[tf.spec.shape_dtype if shape else tf.spec.stride_dtype])
    t = s.param.type
    if not isinstance(t, Struct):
        raise _NotInC
    for f, off in zip(t.fields, t.field_offsets):
        if f.name == fld and isinstance(f.type, Scalar):
            return (G_LOAD, s.offset + off, DTYPE_CODE[f.type.dtype])
    raise _NotInC
