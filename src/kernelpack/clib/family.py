"""Kernel families rendered as C: the signature of the one dispatching entry per kernel name, each
specialization's constraints as C expressions, in the launch model's dispatch order (:mod:`kernelpack.launch.family`
decides consistency, constraints and order; this module only spells them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..bundle.artifact import KernelArtifact
from ..core.abi import DType, Opaque, Pointer, Scalar, Struct, TensorSpec
from ..core.names import c_name
from ..launch import family as model
from ..launch.plan import Plan as LaunchPlan
from .cdecl import INT_RANGE, TypeNames, dtype_enum, param_decl
from .launchgen import CallerArg, DescArg, ListArg
from .rangeindex import Candidate, RangeIndex, build, indexable, key_expr

PlanOf = Callable[[KernelArtifact], LaunchPlan]
ListRow = Callable[[KernelArtifact, str], int]  # the kp_lists row of a specialization's list argument

KP_DYN = "KP_DYN"


@dataclass(frozen=True)
class FamilyArg:
    """One caller-visible argument of a family entry."""

    name: str
    kind: str  # "ptr" (dtype may vary), "tensor"/"desc" (a kp_tensor*), "list" (kp_tensor* + count), "value" (same
    #            type in every specialization)
    type: Scalar | Pointer | Struct | Opaque | None  # the first specialization's type (None: desc, list)
    varying: bool = False  # ptr whose pointee differs between specializations: passed as void* + kp_dtype
    const: bool = False

    @property
    def cname(self) -> str:
        """The argument's name in generated C/C++ (kernelpack.core.names.c_name)."""
        return c_name(self.name)

    def decl(self, names: TypeNames) -> str:
        if self.kind in ("tensor", "desc"):
            return f"const kp_tensor* {self.cname}"
        if self.kind == "list":
            return f"const kp_tensor* {self.cname}, int32_t {self.cname}_count"
        if self.kind == "ptr" and self.varying:
            return f"{'const ' if self.const else ''}void* {self.cname}, kp_dtype {self.cname}_dtype"
        assert self.type is not None
        return param_decl(names, self.type, self.cname)

    def call_args(self) -> list[str]:
        """The C names this argument takes in an entry's parameter list (a varying pointer adds its dtype, a list its
        count)."""
        if self.kind == "list":
            return [self.cname, f"{self.cname}_count"]
        return [self.cname, f"{self.cname}_dtype"] if self.kind == "ptr" and self.varying else [self.cname]


@dataclass(frozen=True)
class Constraint:
    expr: str  # C expression over the family entry's arguments
    text: str  # for messages
    target: tuple[int, int] | None = None  # a range constraint's (argument index, mode)
    lo: int = 0  # a range constraint's bounds
    hi: int = 0


@dataclass(frozen=True)
class Spec:
    """One specialization as the generator sees it."""

    index: int  # position in the library's spec table
    artifact: KernelArtifact
    constraints: tuple[Constraint, ...]
    specificity: model.Specificity  # the launch model's dispatch key


@dataclass(frozen=True)
class Family:
    name: str
    args: tuple[FamilyArg, ...]
    specs: tuple[Spec, ...]  # dispatch order: most specific first

    def groups(self) -> list[list[Spec]]:
        """Specializations of equal specificity, most specific group first (arch quality breaks ties at run time)."""
        out: list[list[Spec]] = []
        for s in self.specs:
            if out and out[-1][0].specificity == s.specificity:
                out[-1].append(s)
            else:
                out.append([s])
        return out

    def range_index(self) -> RangeIndex | None:
        """The index the entry dispatches through (:mod:`.rangeindex`), or None: the linear walk."""
        cands = self.index_candidates()
        keys = [c.target for s in self.specs for c in s.constraints
                if c.target is not None and indexable(self.args[c.target[0]].kind, self.args[c.target[0]].type,
                                                      c.target[1])]
        return build(cands, keys) if keys else None

    def index_candidates(self) -> list[Candidate]:
        """The specializations in dispatch order as :mod:`.rangeindex` sees them."""
        out = []
        for g, group in enumerate(self.groups()):
            for s in group:
                ranges = {c.target: (c.lo, c.hi) for c in s.constraints if c.target is not None}
                out.append(Candidate(s.index, g, ranges, tuple((c.expr, c.target) for c in s.constraints),
                                     s.artifact.label))
        return out

    def key_c(self, idx: RangeIndex) -> tuple[str, str]:
        """The C expression of the index's key and how messages and comments name it."""
        fa = self.args[idx.key[0]]
        text = fa.name if idx.key[1] < 0 else f"{fa.name}.shape[{idx.key[1]}]"
        return key_expr(fa.cname, fa.kind, idx.key[1]), text


def _family_arg(fa: model.FamilyArg) -> FamilyArg:
    t = None if fa.kind in ("desc", "list") else fa.slot.param.type
    return FamilyArg(fa.name, fa.kind, t, fa.varying, fa.const)  # type: ignore[arg-type]


def _tensor_constraint(arg: str, spec: TensorSpec, align: int, index: int, pidx: int) -> tuple[Constraint, list[str]]:
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
            f"{align}u, {lit(smin)}, {lit(smax)}, {lit(tmin)}, {lit(tmax)})")

    def dims(v: tuple[int | None, ...]) -> str:
        return "[" + ", ".join("?" if d is None else str(d) for d in v) + "]"

    text = (f"{arg}: {spec.dtype.value} rank {spec.rank} shape {dims(spec.shape)} stride {dims(spec.stride)}"
            + (f" {align}-byte aligned" if align > 1 else ""))
    return Constraint(expr, text), decls


def _render(c: model.Constraint, fa: FamilyArg, index: int, list_row: int = -1) -> tuple[Constraint, list[str]]:
    """The C expression of one model constraint on argument ``fa`` of specialization ``index`` (``list_row``: the
    kp_lists row of a list argument)."""
    v, name = fa.cname, fa.name
    if c.kind == "list":
        assert c.tensor is not None and c.tensor.tlist is not None
        return Constraint(f"kp_list_fits({v}, {v}_count, &kp_lists[{list_row}])",
                          f"{name}: list of {c.tensor.tlist.describe()}"), []
    if c.kind == "desc":
        d = c.desc
        assert d is not None
        dt = d.element_dtype
        cond = f"{v} != NULL && {v}->rank == {d.rank}" + (f" && {v}->dtype == {dtype_enum(dt)}" if dt else "")
        return Constraint(cond, f"{name}: {d.dtype} rank {d.rank} (TMA)"), []
    if c.kind == "tensor":
        assert c.tensor is not None and c.tensor.tensor is not None
        return _tensor_constraint(name, c.tensor.tensor.spec, c.tensor.align, index, c.arg)
    if c.kind == "dtype":
        return Constraint(f"{v}_dtype == {dtype_enum(c.dtype)}", f"{name}: {c.dtype.value if c.dtype else 'any'}"), []
    if c.kind == "align":
        return Constraint(f"(uintptr_t){v} % {c.value}u == 0", f"{name} {c.value}-byte aligned"), []
    if c.kind == "range":
        return _range(c, fa), []
    return Constraint(f"{v} % {c.value} == 0", f"{name} % {c.value} == 0"), []


def _range(c: model.Constraint, fa: FamilyArg) -> Constraint:
    """``lo <= x && x <= hi`` for an integer argument or a kp_tensor's extent (runs after the argument's other
    constraints: a tensor's rank is checked first); a side at the limit of the type is left out (-Wtype-limits)."""
    v = fa.cname
    if c.value < 0:
        assert isinstance(fa.type, Scalar)
        tmin, tmax = INT_RANGE[fa.type.dtype]
        unsigned = tmin == 0
        x = v
    else:
        tmin, tmax, unsigned = -(2**63), 2**63 - 1, False
        x = f"{v}->shape[{c.value}]"

    def lit(n: int) -> str:
        if unsigned:
            return f"UINT64_C({n})"
        return "INT64_MIN" if n == -(2**63) else f"INT64_C({n})"

    sides = []
    if c.lo == c.hi:
        sides.append(f"{x} == {lit(c.lo)}")
    else:
        if c.lo > tmin:
            sides.append(f"{x} >= {lit(c.lo)}")
        if c.hi < tmax:
            sides.append(f"{x} <= {lit(c.hi)}")
    return Constraint(" && ".join(sides) or "1", c.range_text(), (c.arg, c.value), c.lo, c.hi)


def build_families(arts_by_name: dict[str, tuple[KernelArtifact, ...]], index_of: dict[int, int],
                   plan_of: PlanOf, list_row: ListRow | None = None) -> tuple[list[Family], list[str]]:
    """Families in name order, and the static arrays their constraints refer to. ``index_of[id(art)]`` is the spec
    table index of an artifact; ``plan_of(art)`` its launch-model plan; ``list_row(art, name)`` the kp_lists row of
    its list argument ``name``."""
    families, decls = [], []
    for name, arts in arts_by_name.items():
        margs = model.family_args(name, [(a.label, plan_of(a)) for a in arts])
        args = tuple(_family_arg(fa) for fa in margs)
        specs = []
        for a in arts:
            index = index_of[id(a)]
            mcons = model.constraints(margs, plan_of(a))
            rendered = []
            for c in mcons:
                row = list_row(a, args[c.arg].name) if c.kind == "list" and list_row is not None else -1
                r, d = _render(c, args[c.arg], index, row)
                rendered.append(r)
                decls += d
            specs.append(Spec(index, a, tuple(rendered), model.specificity(mcons)))
        order = model.dispatch_order([s.specificity for s in specs])
        families.append(Family(name, args, tuple(specs[i] for i in order)))
    return families, decls


def typed_constraint_checks(caller: tuple[CallerArg, ...], ranges: Mapping[str, tuple[tuple[int, int, int], ...]]
                            | None = None) -> list[tuple[str, str, str]]:
    """(C condition that must hold, message format, format arguments or "") for a typed wrapper's arguments: what
    it can check without a kp_tensor (descriptor arguments are checked when they are encoded). ``ranges``: the
    specialization's range constraints by argument name (``Slot.ranges``); those on integer values are checked."""
    out = []
    for i, p in enumerate(caller):
        if isinstance(p, (DescArg, ListArg)):  # checked when encoded / staged (kp_list_check)
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
        if isinstance(t, Scalar) and t.dtype.is_integer:
            for mode, lo, hi in (ranges or {}).get(p.name, ()):
                if mode < 0:
                    fa = FamilyArg(p.name, "value", t)
                    c = _range(model.Constraint(i, "range", -1, lo=lo, hi=hi, name=p.name), fa)
                    fmt = "%llu" if INT_RANGE[t.dtype][0] == 0 else "%lld"
                    cast = "(unsigned long long)" if fmt == "%llu" else "(long long)"
                    out.append((c.expr, f"parameter {i} '{p.name}': must satisfy {c.text}, got {fmt}", f"{cast}{v}"))
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
    if fa.kind == "list":
        return f'kp_describe_list(&kp_sb_, "{n}", {v}, {v}_count);'
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
