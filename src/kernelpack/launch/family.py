"""A kernel family: the specializations sharing one name, as both back ends dispatch it.

* **Consistency** (:func:`family_args`): every specialization takes the same caller arguments by name; an argument
  may differ between specializations only in a pointer's element type (the C entry then takes ``void*`` plus a
  ``kp_dtype``) or a tensor's (or a tensor list's elements') static shape/dtype; a tensor-descriptor argument is one
  in every specialization, and so is a tensor list.
* **Constraints** (:func:`constraints`): what an argument must satisfy for a specialization to accept it, as data
  (the C generator renders each as a C expression, the runtime checks them in ``runtime/checks.py``).
* **Dispatch order** (:func:`specificity`, :func:`dispatch_order`): the most specific specialization first -- how
  many constraints narrow it (each range constraint counts one), then how much (static tensor modes, log2 of
  alignment or divisibility), then the narrower ranges (the smaller sum of the range widths) -- then, at run time,
  the better binary for the device (:mod:`.binaries`), then bundle order.
* **Ranges** (:func:`check_ranges`; :mod:`.ranges`): among specializations whose other constraints are the same,
  the range constraints of two must be disjoint or nested (one's box of ranges inside the other's: it is the more
  specific, and the order above puts it first); two with the same ranges, or with ranges that overlap with
  neither inside the other, are refused as ambiguous, naming both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..core.abi import DType, Pointer
from ..core.errors import KernelpackError
from ..core.records import record
from .plan import OP_DESC, OP_LIST, OP_PTR, OP_TENSOR, Plan, Slot, list_weight

if TYPE_CHECKING:  # the launch model reads artifacts; it is below the bundle layer that defines them
    from ..bundle.artifact import KernelArtifact
    from ..core.tma import TensorDescSpec


@record(frozen=True)
class FamilyArg:
    """One caller-visible argument of a family, as every specialization takes it."""

    name: str
    kind: str  # "ptr" (element type may vary), "tensor", "desc" (a tensor descriptor), "list" (a tensor list),
    #            "value" (same type in all)
    slot: Slot  # the first specialization's
    varying: bool = False  # a pointer whose element type differs between specializations
    const: bool = False  # a pointer that is const in every specialization


@record(frozen=True)
class Constraint:
    """What argument ``arg`` (index into the family's arguments) must satisfy for one specialization.

    ``kind``: ``dtype`` (a varying pointer's element type is ``value``), ``align`` (the pointer or tensor data is a
    multiple of ``value`` bytes), ``divisible`` (the integer is a multiple of ``value``), ``tensor`` (dtype, rank,
    static modes, index ranges and alignment of the tensor spec ``tensor``), ``list`` (every tensor of a list fits
    the element of the TensorList of slot ``tensor``: dtype, rank, static modes, index ranges, alignment, divisors,
    stride bounds), ``desc`` (a tensor descriptor's dtype
    and rank pick between specializations), ``range`` (``lo <= x <= hi`` where x is the integer (``value`` -1) or
    the extent ``value`` of a tensor)."""

    arg: int
    kind: str
    value: int = 0
    dtype: DType | None = None
    tensor: Slot | None = None
    desc: TensorDescSpec | None = None
    lo: int = 0
    hi: int = 0
    name: str = ""  # range: the argument's name (messages)

    @property
    def target(self) -> str:
        return self.name if self.value < 0 else f"{self.name}.shape[{self.value}]"

    def range_text(self) -> str:
        from .ranges import Range

        return Range(self.name, self.value, self.lo, self.hi).text()

    @property
    def weight(self) -> float:
        """How much it narrows (0: it only tells element types apart)."""
        if self.kind in ("align", "divisible"):
            return log2(self.value)
        if self.kind == "tensor":
            assert self.tensor is not None and self.tensor.tensor is not None
            spec = self.tensor.tensor.spec
            return sum(d is not None for d in spec.shape + spec.stride) + log2(self.tensor.align)
        if self.kind == "list":
            assert self.tensor is not None and self.tensor.tlist is not None
            return list_weight(self.tensor.tlist)
        return 0.0


def log2(n: int) -> float:
    return math.log2(n) if n > 1 else 0.0


def family_args(name: str, specs: Sequence[tuple[str, Plan]]) -> tuple[FamilyArg, ...]:
    """The caller arguments of family ``name`` from its specializations' ``(label, plan)``; KernelpackError when
    they are not one family."""
    label0, plan0 = specs[0]
    names0 = [s.name for s in plan0.args]
    for label, plan in specs[1:]:
        names = [s.name for s in plan.args]
        if names != names0:
            raise KernelpackError(f"kernel family {name}: specializations {label0} ({', '.join(names0)}) and "
                                  f"{label} ({', '.join(names)}) take different arguments; give them different names")
    out = []
    for i, s0 in enumerate(plan0.args):
        items = [(label, plan.args[i]) for label, plan in specs]
        for op, what in ((OP_DESC, "a tensor descriptor"), (OP_LIST, "a list of tensors")):
            marks = [s.op == op for _, s in items]
            if any(marks) and not all(marks):
                raise KernelpackError(f"kernel family {name}: argument {i} '{s0.name}' is {what} in some "
                                      f"specializations only")
        if s0.op in (OP_DESC, OP_LIST):
            out.append(FamilyArg(s0.name, "desc" if s0.op == OP_DESC else "list", s0))
            continue
        types = [s.param.type for _, s in items]
        if all(s.op == OP_PTR for _, s in items):
            ptrs = [t for t in types if isinstance(t, Pointer)]
            out.append(FamilyArg(s0.name, "ptr", s0, len({t.pointee for t in ptrs}) > 1, all(t.const for t in ptrs)))
        elif all(s.op == OP_TENSOR for _, s in items):
            out.append(FamilyArg(s0.name, "tensor", s0))
        elif all(t == types[0] for t in types):
            out.append(FamilyArg(s0.name, "value", s0))
        else:
            kinds = ", ".join(f"{label}: {t.c_type}" for (label, _), t in zip(items, types, strict=True))
            raise KernelpackError(f"kernel family {name}: argument {i} '{s0.name}' has different types across "
                                  f"specializations ({kinds}); only pointer element types and tensor descriptors "
                                  f"may vary within a family")
    args = tuple(out)
    if any(s.ranges for _, plan in specs for s in plan.args):
        check_ranges(name, [(label, constraints(args, plan)) for label, plan in specs])
    return args


def constraints(args: Sequence[FamilyArg], plan: Plan) -> tuple[Constraint, ...]:
    """What each argument must satisfy for the specialization ``plan``. A tensor descriptor's dtype and rank choose
    the specialization; everything else about it is checked when it is encoded (KP_ERROR_INVALID_ARGUMENT)."""
    out: list[Constraint] = []
    for i, (fa, s) in enumerate(zip(args, plan.args, strict=True)):
        if s.op == OP_DESC:
            out.append(Constraint(i, "desc", desc=s.desc))
            continue
        if s.op == OP_TENSOR:
            out.append(Constraint(i, "tensor", tensor=s))
            continue
        if s.op == OP_LIST:
            out.append(Constraint(i, "list", tensor=s))
            continue
        if fa.varying and s.dtype is not None:
            out.append(Constraint(i, "dtype", dtype=s.dtype))
        if s.align > 1:
            out.append(Constraint(i, "align", s.align))
        if s.divisor > 1:
            out.append(Constraint(i, "divisible", s.divisor))
    for i, s in enumerate(plan.args):
        out += [Constraint(i, "range", mode, lo=lo, hi=hi, name=s.name) for mode, lo, hi in s.ranges]
    return tuple(out)


Specificity = tuple[int, float, int]


def specificity(cons: Sequence[Constraint]) -> Specificity:
    """(how many constraints narrow, how much the others than ranges do, minus the sum of the range widths): the
    dispatch order's key, most specific (the greatest) first."""
    narrowing = [c.weight for c in cons if c.weight > 0]
    ranges = [c for c in cons if c.kind == "range"]
    return len(narrowing) + len(ranges), sum(narrowing), -sum(c.hi - c.lo + 1 for c in ranges)


def order_key(key: Specificity) -> tuple[int, float, int]:
    """The ascending sort key of a specificity (most specific first)."""
    return -key[0], -key[1], -key[2]


def check_ranges(name: str, specs: Sequence[tuple[str, Sequence[Constraint]]]) -> None:
    """KernelpackError naming both specializations where two of family ``name`` (``(label, constraints)``) have
    the same other constraints and range constraints that are the same, or that overlap with neither's box inside
    the other's: no order makes one of them the more specific for every call both accept."""
    groups: dict[tuple[object, ...], list[tuple[str, dict[tuple[int, int], tuple[int, int]], str]]] = {}
    for label, cons in specs:
        box = {(c.arg, c.value): (c.lo, c.hi) for c in cons if c.kind == "range"}
        text = ", ".join(c.range_text() for c in cons if c.kind == "range") or "no range constraints"
        groups.setdefault(_base_key(cons), []).append((label, box, text))
    for members in groups.values():
        if not any(box for _, box, _ in members):
            continue
        for i, (la, a, ta) in enumerate(members):
            for lb, b, tb in members[i + 1:]:
                if not a and not b:  # neither has ranges: a tie as without ranges (device fit, bundle order)
                    continue
                if a == b:
                    raise KernelpackError(f"kernel family {name}: specializations {la} and {lb} have the same range "
                                          f"constraints ({ta}) and otherwise the same constraints; dispatch cannot "
                                          f"choose between them (give one other ranges, or remove one)")
                if _overlap(a, b) and not (_inside(a, b) or _inside(b, a)):
                    raise KernelpackError(f"kernel family {name}: the ranges of specializations {la} ({ta}) and {lb} "
                                          f"({tb}) overlap and neither lies inside the other, so neither is the more "
                                          f"specific where both fit; make them disjoint or nested")


def _base_key(cons: Sequence[Constraint]) -> tuple[object, ...]:
    out: list[object] = []
    for c in cons:
        if c.kind == "range":
            continue
        tensor: object = None
        if c.tensor is not None and c.tensor.tensor is not None:
            tensor = (repr(c.tensor.tensor.spec), c.tensor.align)
        elif c.tensor is not None and c.tensor.tlist is not None:
            tensor = repr(c.tensor.tlist)
        out.append((c.arg, c.kind, c.value, c.dtype, tensor, repr(c.desc) if c.desc is not None else None))
    return tuple(out)


Box = dict[tuple[int, int], tuple[int, int]]


def _overlap(a: Box, b: Box) -> bool:
    """Some call fits both boxes (a target one leaves open is unbounded)."""
    for key in a.keys() & b.keys():
        (alo, ahi), (blo, bhi) = a[key], b[key]
        if max(alo, blo) > min(ahi, bhi):
            return False
    return True


def _inside(a: Box, b: Box) -> bool:
    """Every call fitting box ``a`` fits box ``b``."""
    for key, (blo, bhi) in b.items():
        if key not in a:
            return False
        alo, ahi = a[key]
        if alo < blo or ahi > bhi:
            return False
    return True


def plan_specificity(plan: Plan) -> Specificity:
    """The specificity of one specialization on its own (its constraints as the only member of a family):
    ``specificity(constraints(...))`` computed from the slots directly (a family's first use computes one per
    distinct parameter list; the dtype of a varying pointer, the only constraint a family adds, weighs nothing)."""
    count, weight, width = 0, 0.0, 0
    for s in plan.args:
        if s.op == OP_DESC:
            pass
        elif s.op == OP_TENSOR:
            assert s.tensor is not None
            spec = s.tensor.spec
            w = sum(d is not None for d in spec.shape + spec.stride) + log2(s.align)
            if w > 0:
                count, weight = count + 1, weight + w
        elif s.op == OP_LIST:
            assert s.tlist is not None
            w = list_weight(s.tlist)
            if w > 0:
                count, weight = count + 1, weight + w
        else:
            if s.align > 1:
                count, weight = count + 1, weight + log2(s.align)
            if s.divisor > 1:
                count, weight = count + 1, weight + log2(s.divisor)
        for _, lo, hi in s.ranges:
            count, width = count + 1, width + hi - lo + 1
    return count, weight, -width


def _args_of(plan: Plan) -> tuple[FamilyArg, ...]:
    return tuple(FamilyArg(s.name, "value", s) for s in plan.args)


def dispatch_order(keys: Sequence[Specificity]) -> list[int]:
    """Indices of the specializations (their specificity keys in bundle order) in dispatch order."""
    return sorted(range(len(keys)), key=lambda i: (*order_key(keys[i]), i))


def check_families(families: Mapping[str, Sequence[KernelArtifact]]) -> None:
    """KernelpackError where a family with range constraints (``Bundle.families()``) is not one family or has
    ambiguous ranges: what the C generator and the runtime would refuse, found when a bundle is built."""
    from .facts import plans

    for name, arts in families.items():
        if any(a.range_rules for a in arts):
            family_args(name, [(a.label, plans(a)[0]) for a in arts])


def shadowed(name: str, arts: Sequence[KernelArtifact]) -> dict[str, list[str]]:
    """Specializations of family ``name`` that no call ever reaches: each accepts exactly the calls an earlier one in
    dispatch order accepts (the same constraints, requirements and binaries), so dispatch always stops before it.
    Returns the label launched -> the labels it hides (an untuned autotune family: its first config -> the
    others). Empty for a family that is not one (the runtime refuses it by itself)."""
    from .facts import plans

    first = [plans(a)[0] for a in arts]
    try:
        args = family_args(name, [(a.label, p) for a, p in zip(arts, first)])
    except KernelpackError:
        return {}
    keys = [specificity(constraints(args, p)) for p in first]
    winners: dict[tuple[object, ...], str] = {}
    out: dict[str, list[str]] = {}
    for i in dispatch_order(keys):
        a, cons = arts[i], constraints(args, first[i])
        key = (_base_key(cons), tuple((c.arg, c.value, c.lo, c.hi) for c in cons if c.kind == "range"),
               a.requirements, tuple(sorted((str(b.arch), b.kind) for b in a.binaries)))
        if key in winners:
            out.setdefault(winners[key], []).append(a.label)
        else:
            winners[key] = a.label
    return out


# ------------------------------------------------------------------------------------------------ a family in order

LAUNCH_KEYWORDS = ("grid", "block", "smem", "stream", "cluster", "pdl", "cooperative")  # a call's launch options


class SpecSourceLike(Protocol):
    """What ordering a family reads of each specialization (:class:`kernelpack.bundle.index.SpecSource`)."""

    label: str
    index: int
    layouts: tuple[Plan, ...]
    specificity: Specificity

    def artifact(self) -> KernelArtifact: ...


class Specialization:
    """One specialization of a family in dispatch order: what dispatch needs (its source ``src``), its artifact built
    on first use."""

    __slots__ = ("src", "plan", "index", "specificity", "layouts", "first_plan")

    def __init__(self, src: Any, first_plan: int) -> None:
        self.src = src
        self.layouts: tuple[Plan, ...] = src.layouts  # every parameter layout of its binaries (layouts[0] is plan)
        self.plan: Plan = src.layouts[0]  # the caller-visible arguments of every layout
        self.index: int = src.index  # position in the family (bundle order)
        self.specificity: Specificity = src.specificity
        self.first_plan = first_plan  # where its layouts start in the family's list of plans (the C launcher's)

    @property
    def label(self) -> str:
        return str(self.src.label)

    @property
    def artifact(self) -> KernelArtifact:
        """The whole artifact (built on first use: BundleError naming the kernel when its entry or blob is bad)."""
        art: KernelArtifact = self.src.artifact()
        return art


def ordered_specs(name: str, srcs: Sequence[SpecSourceLike]) -> tuple[Specialization, ...]:
    """The specializations of family ``name`` (bundle order) in dispatch order, each knowing where its layouts start
    in the family's list of C plans; a family whose specializations do not take the same arguments, or whose range
    constraints are ambiguous, is refused (:func:`family_args`)."""
    distinct = {id(s.layouts[0]): s for s in srcs}  # specializations with one plan agree with each other
    check = srcs if any(sl.ranges for s in srcs for sl in s.layouts[0].args) else list(distinct.values())
    family_args(name, [(s.label, s.layouts[0]) for s in check])  # one family, or refused
    specs, first = [], 0
    for i in dispatch_order([s.specificity for s in srcs]):
        specs.append(Specialization(srcs[i], first))
        first += len(srcs[i].layouts)
    return tuple(specs)
