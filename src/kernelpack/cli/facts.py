"""What ``kernelpack inspect`` says beyond each binary's resources: per specialization its compile-time config (a
Triton kernel's constexprs, ``num_warps``, ``num_stages``), the fields of a struct passed by value (a CuTe tensor),
its grid rule; per family the dispatch order (and what each specialization's arguments must satisfy); per bundle or
library the GPUs it runs on -- each device the binary rule (:mod:`kernelpack.launch.binaries`) gives SASS, PTX the
driver JIT-compiles, or nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from ..bundle.artifact import KernelArtifact
from ..bundle.kpack import Bundle
from ..core.abi import Abi, Struct
from ..core.arch import KNOWN_SM
from ..core.errors import KernelpackError
from ..core.launchspec import grid_text
from ..launch.binaries import best

CONFIG_KEYS = ("num_warps", "num_stages", "num_ctas", "maxnreg")  # a Triton config's launch knobs
OLDEST_DEVICE = 50  # devices from sm_50 (what a CUDA 12 driver still runs) are listed


def config(a: KernelArtifact) -> dict[str, Any] | None:
    """The compile-time config a frontend recorded (Triton: ``{"num_warps": 4, "num_stages": 3, "constexprs":
    {"BLOCK": 1024}}``), read from the artifact's provenance options; None when it recorded none."""
    consts: dict[str, Any] = {}
    knobs: dict[str, Any] = {}
    for opt in a.provenance.options:
        if opt.startswith("constexpr "):
            k, _, v = opt[len("constexpr "):].partition("=")
            consts[k] = _value(v)
        else:
            k, sep, v = opt.partition("=")
            if sep and k in CONFIG_KEYS:
                knobs[k] = _value(v)
    if not consts and not knobs:
        return None
    return {**knobs, "constexprs": consts}


def _value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def fields(t: Any) -> list[dict[str, Any]] | None:
    """The fields of a struct passed by value (name, C type, offset, size; nested structs within), else None."""
    if not isinstance(t, Struct):
        return None
    out = []
    for f, off in zip(t.fields, t.field_offsets, strict=True):
        row: dict[str, Any] = {"name": f.name, "c_type": f.type.c_type, "offset": off, "size": f.type.size}
        inner = fields(f.type)
        if inner is not None:
            row["fields"] = inner
        out.append(row)
    return out


def grid_rule(a: KernelArtifact) -> list[str] | None:
    """The grid a launch computes when the caller gives none (``["ceil_div(n, 1024)", "1", "1"]``), else None."""
    g = a.launch.grid
    return None if g is None else [grid_text(e) for e in g]


def dispatch(bundle: Bundle) -> list[dict[str, Any]]:
    """Per family, its specializations in the order a launch tries them (the launch model's,
    :mod:`kernelpack.launch.family`: the most specific first; on a device the better binary then breaks ties) and
    what each one's arguments must satisfy (``when``; empty: anything the signature takes)."""
    from ..launch.facts import plans
    from ..launch.family import constraints, dispatch_order, family_args, specificity

    out: list[dict[str, Any]] = []
    for name, arts in bundle.families().items():
        specs = [(a.label, plans(a)[0]) for a in arts]
        try:
            args = family_args(name, specs)
        except KernelpackError as e:  # not one family: what both back ends refuse
            out.append({"name": name, "error": e.message})
            continue
        cons = [constraints(args, plan) for _, plan in specs]
        order = dispatch_order([specificity(c) for c in cons])
        rows = []
        for i in order:
            when = [_constraint(c, args) for c in cons[i]]
            when += [f"device {k} == {v}" for k, v in arts[i].requirements]
            rows.append({"label": arts[i].label, "when": [w for w in when if w]})
        out.append({"name": name, "order": rows})
    return out


def _constraint(c: Any, args: Sequence[Any]) -> str:
    name = args[c.arg].name
    if c.kind == "dtype":
        return f"{name}: {c.dtype.value}*"
    if c.kind == "align":
        return f"{name} {c.value}-byte aligned"
    if c.kind == "divisible":
        return f"{name} a multiple of {c.value}"
    if c.kind == "tensor":
        return str(c.tensor.describe())
    if c.kind == "desc":
        return f"{name}: {c.desc.dtype} rank {c.desc.rank}"
    if c.kind == "range":
        return str(c.range_text())
    return ""


def devices(bundle: Bundle) -> list[dict[str, Any]]:
    """Each GPU (every SM NVIDIA shipped, from sm_50) and what the bundle's kernel families get there: how many run
    SASS, how many PTX the driver JIT-compiles, and which get nothing (``none``: their names)."""
    fams = {name: [[(b.arch, b.kind == "ptx") for b in a.binaries] for a in arts]
            for name, arts in bundle.families().items()}
    out = []
    for sm in (k for k in KNOWN_SM if k >= OLDEST_DEVICE):
        major, minor = divmod(sm, 10)
        sass = ptx = 0
        none = []
        for name, specs in fams.items():
            got = [best(bins, major, minor) for bins in specs]
            picks = [bins[i] for bins, i in zip(specs, got, strict=True) if i is not None]
            if not picks:
                none.append(name)
            elif all(not is_ptx for _, is_ptx in picks):
                sass += 1
            else:
                ptx += 1
        out.append({"device": f"sm_{sm}", "sass": sass, "ptx": ptx, "none": none})
    return out


def device_lines(rows: list[dict[str, Any]]) -> list[str]:
    """:func:`devices` as lines, devices of the same answer together: ``sm_80-sm_89: every kernel (SASS)``,
    ``sm_100-sm_121: every kernel through PTX (JIT-compiled by the driver on first load)``, ``sm_50-sm_75:
    nothing``."""
    if not rows:
        return []
    total = rows[0]["sass"] + rows[0]["ptx"] + len(rows[0]["none"])
    groups: list[tuple[list[str], str]] = []
    for r in rows:
        text = _device_text(r, total)
        if groups and groups[-1][1] == text:
            groups[-1][0].append(r["device"])
        else:
            groups.append(([r["device"]], text))
    return [f"{ds[0] if len(ds) == 1 else f'{ds[0]}-{ds[-1]}'}: {text}" for ds, text in groups]


def _device_text(r: dict[str, Any], total: int) -> str:
    sass, ptx, none = r["sass"], r["ptx"], r["none"]
    if len(none) == total:
        return "nothing runs"
    parts = []
    if sass:
        parts.append("every kernel as SASS" if sass == total else f"{sass} of {total} kernels as SASS")
    if ptx:
        parts.append(f"{'every kernel' if ptx == total else f'{ptx} of {total} kernels'} through PTX (JIT-compiled "
                     f"by the driver on first load)")
    if none:
        parts.append(f"no binary for {', '.join(none[:6])}{f' and {len(none) - 6} more' if len(none) > 6 else ''}")
    return "; ".join(parts)


def abi_params(abi: Abi) -> list[dict[str, Any]]:
    """Each parameter as inspect lists it (a struct's fields with it)."""
    out = []
    for p in abi.params:
        row: dict[str, Any] = {"name": p.name, "c_type": p.type.c_type, "size": p.type.size, "align": p.type.align,
                               "divisibility": p.divisibility, "role": p.role}
        f = fields(p.type)
        if f is not None:
            row["fields"] = f
        out.append(row)
    return out
