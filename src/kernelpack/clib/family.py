"""Kernel families: the signature of the one dispatching entry per kernel name, and each specialization's
constraints (dtype, pointer alignment, int divisibility, static tensor shape) as C expressions, ordered from the
most specific specialization to the least.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..abi import DType, Opaque, Param, Pointer, Scalar, Struct, TensorSpec
from ..artifact import KernelArtifact
from ..errors import KernelpackError
from ..names import c_name
from ..tma import TRITON_DTYPES
from .cdecl import INT_RANGE, TypeNames, dtype_enum, param_decl
from .launchgen import CallerArg, DescArg

ArgsOf = Callable[[KernelArtifact], tuple[CallerArg, ...]]

KP_DYN = "KP_DYN"


@dataclass(frozen=True)
class FamilyArg:
    """One caller-visible argument of a family entry."""

    name: str
    kind: str  # "ptr" (dtype may vary), "tensor"/"desc" (a kp_tensor*), "value" (same type in every specialization)
    type: Scalar | Pointer | Struct | Opaque | None  # the first specialization's type (None: desc)
    varying: bool = False  # ptr whose pointee differs between specializations: passed as void* + kp_dtype
    const: bool = False

    @property
    def cname(self) -> str:
        """The argument's name in generated C/C++ (kernelpack.names.c_name)."""
        return c_name(self.name)

    def decl(self, names: TypeNames) -> str:
        if self.kind in ("tensor", "desc"):
            return f"const kp_tensor* {self.cname}"
        if self.kind == "ptr" and self.varying:
            return f"{'const ' if self.const else ''}void* {self.cname}, kp_dtype {self.cname}_dtype"
        assert self.type is not None
        return param_decl(names, self.type, self.cname)

    def call_args(self) -> list[str]:
        """The C names this argument takes in an entry's parameter list (a varying pointer adds its dtype)."""
        return [self.cname, f"{self.cname}_dtype"] if self.kind == "ptr" and self.varying else [self.cname]


@dataclass(frozen=True)
class Constraint:
    expr: str  # C expression over the family entry's arguments
    text: str  # for messages
    weight: float  # how much it narrows (0 = a plain dtype test)


@dataclass(frozen=True)
class Spec:
    """One specialization as the generator sees it."""

    index: int  # position in the library's spec table
    artifact: KernelArtifact
    constraints: tuple[Constraint, ...]

    @property
    def specificity(self) -> tuple[int, float]:
        narrowing = [c for c in self.constraints if c.weight > 0]
        return (len(narrowing), sum(c.weight for c in narrowing))


@dataclass(frozen=True)
class Family:
    name: str
    args: tuple[FamilyArg, ...]
    specs: tuple[Spec, ...]  # most specific first

    def groups(self) -> list[list[Spec]]:
        """Specializations of equal specificity, most specific group first (arch quality breaks ties at run time)."""
        out: list[list[Spec]] = []
        for s in self.specs:
            if out and out[-1][0].specificity == s.specificity:
                out[-1].append(s)
            else:
                out.append([s])
        return out


def _family_args(name: str, arts: tuple[KernelArtifact, ...], args_of: ArgsOf) -> tuple[FamilyArg, ...]:
    first = arts[0]
    sig0 = [p.name for p in args_of(first)]
    for a in arts[1:]:
        if [p.name for p in args_of(a)] != sig0:
            raise KernelpackError(f"kernel family {name}: specializations {first.label} ({', '.join(sig0)}) and "
                                  f"{a.label} ({', '.join(p.name for p in args_of(a))}) take different arguments; "
                                  f"give them different names")
    out = []
    for i, p0 in enumerate(args_of(first)):
        items = [args_of(a)[i] for a in arts]
        if all(isinstance(x, DescArg) for x in items):
            out.append(FamilyArg(p0.name, "desc", None))
            continue
        if any(isinstance(x, DescArg) for x in items):
            raise KernelpackError(f"kernel family {name}: argument {i} '{p0.name}' is a tensor descriptor in some "
                                  f"specializations only")
        types = [x.type for x in items]  # type: ignore[union-attr]
        t0 = types[0]
        if all(isinstance(t, Pointer) for t in types):
            pointees = {t.pointee for t in types}  # type: ignore[union-attr]
            out.append(FamilyArg(p0.name, "ptr", t0, len(pointees) > 1, all(t.const for t in types)))  # type: ignore[union-attr]
        elif all(isinstance(t, Struct) and t.tensor is not None for t in types):
            out.append(FamilyArg(p0.name, "tensor", t0))
        elif all(t == t0 for t in types):
            out.append(FamilyArg(p0.name, "value", t0))
        else:
            kinds = ", ".join(f"{a.label}: {t.c_type}" for a, t in zip(arts, types, strict=True))
            raise KernelpackError(f"kernel family {name}: argument {i} '{p0.name}' has different types across "
                                  f"specializations ({kinds}); only pointer element types and tensor descriptors "
                                  f"may vary within a family")
    return tuple(out)


def _log2(n: int) -> float:
    return math.log2(n) if n > 1 else 0.0


def _tensor_constraint(arg: str, spec: TensorSpec, index: int, pidx: int) -> tuple[Constraint, list[str]]:
    """kp_tensor_fits(...) for one tensor param, plus the static arrays it refers to."""
    tag = f"kp_s{index}_p{pidx}"
    shape = ", ".join(KP_DYN if d is None else str(d) for d in spec.shape) or "0"
    stride = ", ".join(KP_DYN if d is None else str(d) for d in spec.stride) or "0"
    decls = [f"static const int64_t {tag}_shape[] = {{{shape}}};",
             f"static const int64_t {tag}_stride[] = {{{stride}}};"]
    smin, smax = INT_RANGE[spec.shape_dtype]
    tmin, tmax = INT_RANGE[spec.stride_dtype]

    def lit(v: int) -> str:
        return "INT64_MIN" if v == -(2**63) else f"INT64_C({v})"

    expr = (f"kp_tensor_fits({c_name(arg)}, {dtype_enum(spec.dtype)}, {spec.rank}, {tag}_shape, {tag}_stride, "
            f"{spec.align}u, {lit(smin)}, {lit(smax)}, {lit(tmin)}, {lit(tmax)})")

    def dims(v: tuple[int | None, ...]) -> str:
        return "[" + ", ".join("?" if d is None else str(d) for d in v) + "]"

    text = (f"{arg}: {spec.dtype.value} rank {spec.rank} shape {dims(spec.shape)} stride {dims(spec.stride)}"
            + (f" {spec.align}-byte aligned" if spec.align > 1 else ""))
    static = sum(d is not None for d in spec.shape + spec.stride)
    return Constraint(expr, text, static + _log2(spec.align)), decls


def spec_constraints(art: KernelArtifact, args: tuple[FamilyArg, ...], index: int, caller: tuple[CallerArg, ...],
                     several: bool) -> tuple[tuple[Constraint, ...], list[str]]:
    out: list[Constraint] = []
    decls: list[str] = []
    for pidx, (fa, p) in enumerate(zip(args, caller, strict=True)):
        if isinstance(p, DescArg):
            dt = TRITON_DTYPES.get(p.spec.dtype)
            if several:  # dtype and rank pick between descriptor specializations
                v = c_name(p.name)
                cond = f"{v} != NULL && {v}->rank == {p.spec.rank}"
                cond += f" && {v}->dtype == {dtype_enum(dt)}" if dt else ""
                out.append(Constraint(cond, f"{p.name}: {p.spec.dtype} rank {p.spec.rank} (TMA)", 0))
            continue
        t = p.type
        if fa.kind == "tensor":
            assert isinstance(t, Struct) and t.tensor is not None
            c, d = _tensor_constraint(p.name, t.tensor, index, pidx)
            out.append(c)
            decls += d
            continue
        if fa.kind == "ptr" and fa.varying and isinstance(t, Pointer) and t.pointee is not None:
            out.append(Constraint(f"{c_name(p.name)}_dtype == {dtype_enum(t.pointee)}", f"{p.name}: {t.pointee.value}",
                                  0))
        out += _divisibility(art, p)
    return tuple(out), decls


def _divisibility(art: KernelArtifact, p: Param) -> list[Constraint]:
    d, t, v = p.divisibility, p.type, c_name(p.name)
    if d == 1:
        return []
    if isinstance(t, Pointer):
        return [Constraint(f"(uintptr_t){v} % {d}u == 0", f"{p.name} {d}-byte aligned", _log2(d))]
    if isinstance(t, Scalar) and t.dtype.is_integer:
        return [Constraint(f"{v} % {d} == 0", f"{p.name} % {d} == 0", _log2(d))]
    if isinstance(t, Struct) and t.tensor is not None:
        return [Constraint(f"(uintptr_t){v}->data % {d}u == 0", f"{p.name}.data {d}-byte aligned", _log2(d))]
    raise KernelpackError(f"kernel {art.label}: parameter {p.name} ({t.c_type}) has divisibility {d}, which only "
                          f"applies to pointers, integers and tensors")


def build_families(arts_by_name: dict[str, tuple[KernelArtifact, ...]], index_of: dict[int, int],
                   args_of: ArgsOf) -> tuple[list[Family], list[str]]:
    """Families in name order, and the static arrays their constraints refer to. ``index_of[id(art)]`` is the spec
    table index of an artifact."""
    families, decls = [], []
    for name, arts in arts_by_name.items():
        args = _family_args(name, arts, args_of)
        specs = []
        for a in arts:
            cons, d = spec_constraints(a, args, index_of[id(a)], args_of(a), len(arts) > 1)
            decls += d
            specs.append(Spec(index_of[id(a)], a, cons))
        specs.sort(key=lambda s: (-s.specificity[0], -s.specificity[1], s.index))
        families.append(Family(name, args, tuple(specs)))
    return families, decls


def typed_constraint_checks(caller: tuple[CallerArg, ...]) -> list[tuple[str, str, str]]:
    """(C condition that must hold, message format, format arguments or "") for a typed wrapper's arguments: what
    it can check without a kp_tensor (descriptor arguments are checked when they are encoded)."""
    out = []
    for i, p in enumerate(caller):
        if isinstance(p, DescArg):
            continue
        t, d, v = p.type, p.divisibility, c_name(p.name)
        if isinstance(t, Opaque):  # passed by pointer: the driver would read through a NULL one
            out.append((f"{v} != NULL", f"parameter {i} '{p.name}' ({t.size}-byte {t.name or 'opaque'} value, "
                        f"passed by pointer) is NULL", ""))
        elif isinstance(t, Struct) and t.tensor is not None and max(t.tensor.align, d) > 1:
            a = max(t.tensor.align, d)
            out.append((f"(uintptr_t){v}.data % {a}u == 0",
                        f"parameter {i} '{p.name}': data must be {a}-byte aligned, got %p", f"(void*){v}.data"))
        elif d > 1 and isinstance(t, Pointer):
            out.append((f"(uintptr_t){v} % {d}u == 0",
                        f"parameter {i} '{p.name}': must be {d}-byte aligned, got %p", f"(const void*){v}"))
        elif d > 1 and isinstance(t, Scalar) and t.dtype.is_integer:
            out.append((f"{v} % {d} == 0", f"parameter {i} '{p.name}': must be a multiple of {d}, got %lld",
                        f"(long long){v}"))
    return out


def null_checks(args: tuple[FamilyArg, ...]) -> list[tuple[str, str]]:
    """(C name, description) of a family entry's arguments that are pointers the entry reads through: kp_tensor
    arguments and opaque values passed by pointer. A NULL one is refused before anything else."""
    return [(fa.cname, f"argument '{fa.name}' ({'kp_tensor*' if fa.kind in ('tensor', 'desc') else 'opaque value'})")
            for fa in args if fa.kind in ("tensor", "desc") or isinstance(fa.type, Opaque)]


def describe_arg(fa: FamilyArg) -> str:
    """C statement appending a description of a family argument to kp_sb ``sb``."""
    n, t, v = fa.name, fa.type, fa.cname  # n: the user's name (messages); v: its C name
    if fa.kind in ("tensor", "desc"):
        return f'kp_describe_tensor(&kp_sb_, "{n}", {v});'
    if fa.kind == "ptr":
        dt = f"(int){v}_dtype" if fa.varying else ("-1" if t.pointee is None else dtype_enum(t.pointee))  # type: ignore[union-attr]
        return f'kp_describe_ptr(&kp_sb_, "{n}", (const void*){v}, {dt});'
    if isinstance(t, Scalar):
        if t.dtype.is_integer:
            return f'kp_describe_int(&kp_sb_, "{n}", (long long){v});'
        if t.dtype in (DType.f32, DType.f64):
            return f'kp_sb_add(&kp_sb_, "{n} = %g", (double){v});'
        if t.dtype == DType.bool:
            return f'kp_sb_add(&kp_sb_, "{n} = %d", (int){v});'
        return f'kp_sb_add(&kp_sb_, "{n} = 0x%04x ({t.dtype.value})", (unsigned){v}.bits);'
    if isinstance(t, Opaque):
        return f'kp_sb_add(&kp_sb_, "{n}: {t.size}-byte value at %p", (const void*){v});'
    return f'(void){v};\n    kp_sb_add(&kp_sb_, "{n}: struct");'
