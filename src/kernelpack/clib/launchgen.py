"""What a generated entry derives from its arguments before launching: the caller-visible arguments (a
tensor-descriptor argument is one ``kp_tensor`` instead of the params it fills, a tensor list ``kp_tensor`` array
and a count), the grid from ``LaunchSpec.grid`` formulas, Triton scratch buffers, device-derived values, the device
copy of tensor lists' descriptors, and the C statements that do it, one body per parameter layout of the
specialization's binaries (runtime side: ``csrc/kp_args.c`` -- ``kp_run_lists`` --, ``kp_run_scratch`` and
``kp_max_active_clusters`` in ``csrc/kp_launch.c``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..bundle.artifact import KernelArtifact
from ..core.abi import Abi, Opaque, Param, TensorList
from ..core.errors import KernelpackError
from ..core.launchspec import GridExpr, LaunchSpec, grid_params
from ..core.names import c_name
from ..core.tma import TensorDescSpec, expected_params
from ..launch.codes import DTYPE_CODE, INT64_RANGE
from ..launch.device import role_property
from ..launch.facts import layout_index, layouts
from ..launch.plan import OP_DESC, OP_LIST, OP_LIST_COUNT
from ..launch.plan import Plan as LaunchPlan
from .widths import U8, U32, check_layout, fit

LAUNCH = "kp_cfg"  # the generated entries' launch-configuration parameter (kp_-prefixed, as every generated name)

_OPS = {"add": "kp_gadd", "sub": "kp_gsub", "mul": "kp_gmul", "div": "kp_gdiv", "ceil_div": "kp_gceil_div",
        "min": "kp_gmin", "max": "kp_gmax"}


@dataclass(frozen=True)
class DescArg:
    """A tensor-descriptor argument: the caller passes ``const kp_tensor* name``; ``table`` indexes kp_descs."""

    name: str
    spec: TensorDescSpec
    table: int


@dataclass(frozen=True)
class ListArg:
    """A tensor-list argument: the caller passes ``const kp_tensor* name, int32_t name_count``; ``table`` indexes
    kp_lists."""

    name: str
    tlist: TensorList
    table: int

    @property
    def count(self) -> str:
        """The C name of its count."""
        return f"{c_name(self.name)}_count"


CallerArg = Param | DescArg | ListArg


class Layout:
    """One parameter layout of a specialization (kernelpack.launch.facts): its kernel params and how an entry fills
    them -- tensor descriptors (rows ``first_desc``... of kp_descs), Triton scratch, device-derived values."""

    def __init__(self, art: KernelArtifact, abi: Abi, launch: LaunchSpec, first_desc: int, first_list: int) -> None:
        self.art, self.abi, self.launch = art, abi, launch
        self.model = LaunchPlan.of(abi, launch, art.range_rules)
        check_layout(art.label, launch, self.model.slots, art.requirements)  # each fits its C field (widths.py)
        self.descs = [DescArg(s.arg, s, first_desc + i) for i, s in enumerate(launch.tensor_descs)]
        self.filled: dict[str, str] = {}  # kernel param -> C lvalue the descriptor fill (or list staging) writes
        for k, d in enumerate(self.descs):
            self.filled.update(zip(d.spec.params, _slots(d.spec, f"kp_d{k}"), strict=True))
        self.lists = [ListArg(s.name, s.tlist, first_list + i) for i, s in enumerate(self.model.lists)
                      if s.tlist is not None]
        counts = {s.arg: s for s in self.model.slots if s.op == OP_LIST_COUNT}
        self.counts: list[tuple[str, str]] = []  # (C type, caller's count) of each list's count param
        for i, s in enumerate(self.model.lists):
            self.filled[s.param.name] = f"kp_lp[{i}]"
            n = counts[s.arg]
            self.filled[n.param.name] = f"kp_lc{i}"
            self.counts.append((n.param.type.c_type, self.lists[i].count))
        if self.lists and (launch.global_scratch or launch.profile_scratch):
            raise KernelpackError(f"kernel {art.label}: tensor lists and Triton scratch in one kernel are not "
                                  f"supported")
        self.device = {s.param.name: f"kp_v{i}" for i, s in enumerate(self.model.device_slots)}
        self.scratch = (launch.global_scratch, launch.global_scratch_align, launch.profile_scratch,
                        launch.profile_scratch_align)
        if launch.grid is not None:
            for e in launch.grid:
                for name, _ in grid_params(e):
                    if name in self.filled:
                        raise KernelpackError(f"kernel {art.label}: grid formula reads {name}, a parameter filled "
                                              f"from a tensor descriptor; not supported")

    def body(self, index: int | str, indent: str, values: dict[str, str]) -> str:
        """Statements from a resolved kp_ctx (``kp_c``, ``kp_s``) to the launch (``index``: the spec table index, or
        a C expression of it)."""
        out = []
        for k, d in enumerate(self.descs):
            out.append(f"{indent}kp_desc_vals kp_d{k};\n{indent}if (KP_UNLIKELY((kp_s = kp_desc_fill(&kp_c, {index}, "
                       f"&kp_descs[{d.table}], {c_name(d.name)}, &kp_d{k})) != KP_SUCCESS)) return kp_s;\n")
        if self.lists:
            rows = ", ".join(f"{{{c_name(x.name)}, {x.count}, &kp_lists[{x.table}]}}" for x in self.lists)
            out.append(f"{indent}const kp_list_arg kp_la[{len(self.lists)}] = {{{rows}}};\n"
                       f"{indent}uint64_t kp_lp[{len(self.lists)}];\n")
            out += [f"{indent}{t} kp_lc{i} = ({t}){n};\n" for i, (t, n) in enumerate(self.counts)]
        out += self._device_values(index, indent)
        values = {**values, **self.device}
        launch = LAUNCH
        if self.launch.grid is not None:
            exprs = ", ".join(_grid_c(e, values) for e in self.launch.grid)
            out.append(f"{indent}const kp_launch* kp_lp = {LAUNCH};\n{indent}kp_launch kp_l;\n"
                       f"{indent}if (kp_dims_zero({LAUNCH}->grid)) {{ /* the grid from the arguments */\n"
                       f"{indent}    const int64_t kp_g[3] = {{{exprs}}};\n"
                       f"{indent}    if (!kp_grid(&kp_c, {index}, {LAUNCH}, kp_g, &kp_l, &kp_s)) return kp_s;\n"
                       f"{indent}    kp_lp = &kp_l;\n{indent}}}\n")
            launch = "kp_lp"
        gs, ga, ps, pa = self.scratch
        if gs or ps:
            out.append(f"{indent}void* kp_gs = NULL;\n{indent}void* kp_ps = NULL;\n")
        elif any(p.role in ("global_scratch", "profile_scratch") for p in self.abi.params):
            out.append(f"{indent}void* kp_null = NULL;\n")
        args = "NULL"
        if self.abi.params:
            out.append(f"{indent}void* kp_args[{len(self.abi.params)}] = {{{self._arg_ptrs(values)}}};\n")
            args = "kp_args"
        if gs or ps:
            out.append(f"{indent}return kp_run_scratch(&kp_c, {index}, {launch}, {args}, {gs}u, {ga}u, &kp_gs, {ps}u, "
                       f"{pa}u, &kp_ps);\n")
        elif self.lists:
            out.append(f"{indent}return kp_run_lists(&kp_c, {index}, {launch}, {args}, kp_la, {len(self.lists)}, "
                       f"kp_lp);\n")
        else:
            out.append(f"{indent}return kp_run(&kp_c, {index}, {launch}, {args});\n")
        return "".join(out)

    def _device_values(self, index: int | str, indent: str) -> list[str]:
        """Locals holding the device-derived params (kernelpack.launch.device), before the grid reads them."""
        out = []
        for i, s in enumerate(self.model.device_slots):
            prop, size = role_property(s.param.role)  # type: ignore[misc]
            ctype = s.param.type.c_type
            if prop.attribute is None:  # max_active_clusters: asked of the driver once per device
                out.append(f"{indent}int32_t kp_m{i} = 0;\n{indent}if (KP_UNLIKELY((kp_s = kp_max_active_clusters("
                           f"&kp_c, {index}, {LAUNCH}, {size}u, &kp_m{i})) != KP_SUCCESS)) return kp_s;\n"
                           f"{indent}{ctype} kp_v{i} = ({ctype})kp_m{i};\n")
            else:
                out.append(f"{indent}{ctype} kp_v{i} = ({ctype})kp_device_prop(kp_c.d, KP_DP_{prop.name.upper()});\n")
        return out

    def _arg_ptrs(self, values: dict[str, str]) -> str:
        gs, _, ps, _ = self.scratch
        items = []
        for p in self.abi.params:
            if p.name in self.device:
                items.append(f"(void*)&{self.device[p.name]}")
            elif p.role == "global_scratch":
                items.append("(void*)&kp_gs" if gs or ps else "(void*)&kp_null")
            elif p.role == "profile_scratch":
                items.append("(void*)&kp_ps" if gs or ps else "(void*)&kp_null")
            elif p.name in self.filled:
                items.append(f"(void*)&{self.filled[p.name]}")
            elif isinstance(p.type, Opaque):
                items.append(f"(void*)(uintptr_t){values.get(p.name, c_name(p.name))}")
            else:
                items.append(f"(void*)&{values.get(p.name, c_name(p.name))}")
        return ", ".join(items)


class Plan:
    """How one specialization's entry turns caller arguments into kernel params: one :class:`Layout` per parameter
    layout of its binaries (the launch model's), chosen with the binary the device state selected."""

    def __init__(self, art: KernelArtifact, first_desc: int, first_list: int = 0) -> None:
        self.art = art
        self.layouts: list[Layout] = []
        for abi, launch in layouts(art):
            self.layouts.append(Layout(art, abi, launch, first_desc, first_list))
            first_desc += len(launch.tensor_descs)
            first_list += len(self.layouts[-1].lists)
        self.model = self.layouts[0].model  # the caller's arguments, the same in every layout
        by_arg = {d.name: d for d in self.layouts[0].descs}
        by_list = {x.name: x for x in self.layouts[0].lists}
        args: list[CallerArg] = [by_arg[s.desc.arg] if s.op == OP_DESC and s.desc is not None else
                                 by_list[s.name] if s.op == OP_LIST else s.param for s in self.model.args]
        self.args = tuple(args)

    @property
    def descs(self) -> list[DescArg]:
        """Every descriptor of every layout, in kp_descs order."""
        return [d for lay in self.layouts for d in lay.descs]

    @property
    def lists(self) -> list[ListArg]:
        """Every tensor list of every layout, in kp_lists order."""
        return [x for lay in self.layouts for x in lay.lists]

    def list_row(self, name: str) -> int:
        """The kp_lists row of list argument ``name`` in the first layout (what dispatch checks the tensors
        against: every layout takes the same caller arguments)."""
        return next(x.table for x in self.layouts[0].lists if x.name == name)

    @property
    def scratch(self) -> bool:
        """Some layout allocates Triton scratch."""
        return any(lay.scratch[0] or lay.scratch[2] for lay in self.layouts)

    @property
    def params(self) -> tuple[Param, ...]:
        """Caller-visible params that are passed as they are (no descriptor, no list)."""
        return tuple(a for a in self.args if isinstance(a, Param))

    def body(self, index: int | str, indent: str, values: dict[str, str]) -> str:
        """Statements from a resolved kp_ctx (``kp_c``, ``kp_s``) to the launch; ``values`` maps a user's argument
        name to the C expression that holds it (default: its C name). With several layouts, the one of the binary
        the device state chose (``kp_launches[sel].layout``)."""
        if len(self.layouts) == 1:
            return self.layouts[0].body(index, indent, values)
        out = [f"{indent}const int32_t kp_b = kp_c.d->sel[{index}];\n"
               f"{indent}if (KP_UNLIKELY(kp_b < 0)) return kp_no_binary(&kp_c, {index});\n"
               f"{indent}switch (kp_launches[kp_b].layout) {{ /* the chosen binary's parameters */\n"]
        for i, lay in enumerate(self.layouts):
            label = "default" if i == len(self.layouts) - 1 else f"case {i}"
            archs = ", ".join(str(b.arch) for b in self.art.binaries if layout_index(self.art, b) == i)
            out.append(f"{indent}{label}: {{ /* {archs} */\n{lay.body(index, indent + '    ', values)}{indent}}}\n")
        out.append(f"{indent}}}\n")
        return "".join(out)


def _slots(spec: TensorDescSpec, v: str) -> list[str]:
    """The field of kp_desc_vals each param of a descriptor points to (see expected_params)."""
    r = spec.rank
    tail = [f"{v}.shape32[{i}]" for i in range(r)] + [f"{v}.stride[{i}]" for i in range(r)]
    if spec.lowering == "tma":
        return [f"{v}.map", *tail]
    flags = [f"{v}.flags[{i}]" for i in range(len(spec.flags))]
    return [f"{v}.ptr", *[f"{v}.shape64[{i}]" for i in range(r)], *[f"{v}.stride[{i}]" for i in range(r)], *flags,
            *tail]


def _grid_c(e: GridExpr, values: dict[str, str]) -> str:
    if isinstance(e, int):
        return f"INT64_C({e})"
    if e[0] == "arg":
        base = values.get(e[1], c_name(e[1]))
        return f"(int64_t){base}" if e[2] is None else f"(int64_t){base}.{c_name(e[2])}"
    return f"{_OPS[e[0]]}({_grid_c(e[1], values)}, {_grid_c(e[2], values)})"


def desc_table(plans: list[Plan], string: object) -> list[str]:
    """Rows of kp_descs for every descriptor of every layout of every plan (``string`` interns into kp_strtab)."""
    rows = []
    for plan in plans:
        for d in plan.descs:
            s = d.spec
            dt = s.element_dtype
            where = f"kernel {plan.art.label}: tensor descriptor {s.arg}"
            box = ", ".join(str(fit(b, U32, where, "box")) for b in s.block_shape)
            rows.append(f"{{{string(d.name)}u, {{{box}}}, {fit(s.rank, U8, where, 'rank')}, "  # type: ignore[operator]
                        f"{int(s.lowering != 'tma')}, {fit(s.elem_size, U8, where, 'elem_size')}, "
                        f"{fit(s.elem_type, U8, where, 'elem_type')}, {fit(s.swizzle, U8, where, 'swizzle')}, "
                        f"{int(s.fp4_padded)}, {DTYPE_CODE[dt] if dt else 0}}}")
            assert len(expected_params(s.lowering, s.rank, len(s.flags))) == len(s.params)
    return rows


def list_table(plans: list[Plan], string: Callable[[str], int]) -> list[str]:
    """Rows of kp_lists for every tensor list of every layout of every plan (``string`` interns into kp_strtab)."""
    rows = []

    def i64s(values: tuple[int | None, ...], default: str) -> str:
        items = [default if v is None else f"INT64_C({v})" for v in values]
        return "{" + ", ".join(items + [default] * (8 - len(items))) + "}"

    for plan in plans:
        for x in plan.lists:
            t, e = x.tlist, x.tlist.element
            lo, hi = INT64_RANGE[e.shape_dtype]
            where = f"kernel {plan.art.label}: tensor list {x.name}"
            rows.append(f"{{{string(x.name)}u, {fit(e.align, U32, where, 'alignment')}u, {DTYPE_CODE[e.dtype]}, "
                        f"{e.rank}, {DTYPE_CODE[e.shape_dtype]}, {_lit(lo)}, {_lit(hi)}, "
                        f"{i64s(e.shape, 'KP_DYN')}, {i64s(e.stride, 'KP_DYN')}, {i64s(t.shape_div, 'INT64_C(1)')}, "
                        f"{i64s(t.stride_div, 'INT64_C(1)')}, {i64s(t.stride_min, 'KP_DYN')}}}")
    return rows


def _lit(v: int) -> str:
    return "INT64_MIN" if v == -(2**63) else f"INT64_C({v})"
