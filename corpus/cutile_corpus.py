"""liger-kernel's cuTile kernels: capture through liger's cuTile wrappers, compile with ``kernelpack.cutile``.

Family rule (see :mod:`corpus.specs`): kernelpack's cuTile ABI drops ``ct.Constant`` parameters and passes every
shape and stride, so specializations that differ in a constant, an index width, a rank or a *constant* stride or
shape (``stride_constant``, which kernelpack does not check at launch) are different families; those that differ
only in element types and divisibility assumptions are variants of one family (kernelpack checks those).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .capture import CutileLaunch, cpu_world, cutile_launches, to_meta
from .cases import Case, run_case, tag
from .results import CAPTURE, DSL, KERNELPACK, Section
from .specs import Spec


def capture(cases: Sequence[Case], section: Section) -> list[tuple[str, CutileLaunch]]:
    out: list[tuple[str, CutileLaunch]] = []
    for case in cases:
        for point in case.points():
            where = f"{case.id}[{tag(point)}]"
            recs: list[CutileLaunch] = []
            try:
                with cpu_world(), cutile_launches() as recs:
                    run_case(case, point)
            except Exception as e:  # noqa: BLE001 - recorded
                section.fail("", "capture", CAPTURE, f"{type(e).__name__}: {e}", where)
            for r in recs:
                r.args = tuple(to_meta(a) for a in r.args)
            out += [(where, r) for r in recs]
    return out


def qualname(rec: CutileLaunch) -> str:
    return f"{rec.pyfunc.__module__}:{rec.pyfunc.__name__}"


def _split(c: Any) -> tuple[Any, Any]:
    """(family part, variant part) of one parameter constraint."""
    from cuda.tile.compilation import ArrayConstraint, ConstantConstraint, ScalarConstraint, TupleConstraint

    if isinstance(c, ConstantConstraint):
        return {"const": repr(c.value)}, None
    if isinstance(c, ScalarConstraint):
        return {"scalar": c.dtype.name}, None
    if isinstance(c, TupleConstraint):
        parts = [_split(x) for x in c.items]
        return {"tuple": [p[0] for p in parts]}, [p[1] for p in parts]
    if isinstance(c, ArrayConstraint):
        fam = {"ndim": c.ndim, "index": c.index_dtype.name, "stride_constant": list(c.stride_constant),
               "shape_constant": list(c.shape_constant), "alias": list(c.alias_groups),
               "internal_alias": c.may_alias_internally, "stride_lower": list(c.stride_lower_bound_incl)}
        var = {"dtype": c.dtype.name, "base": c.base_addr_divisible_by, "shape_div": list(c.shape_divisible_by),
               "stride_div": list(c.stride_divisible_by)}
        return fam, var
    return {"other": repr(c)}, None


def to_spec(where: str, rec: CutileLaunch) -> Spec:
    parts = [_split(c) for c in rec.signature.parameters]
    return Spec(qualname(rec), rec.kernel, {"params": [p[0] for p in parts]}, {"params": [p[1] for p in parts]},
                rec, [where])


def variant_name(s: Spec) -> str:
    dts: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict) and "dtype" in v:
            d = str({"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64"}.get(v["dtype"],
                                                                                                  v["dtype"]))
            if d not in dts:
                dts.append(d)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(s.variant_key["params"])
    return "_".join(dts)


def prefer_pip_tileiras() -> None:
    """cuTile looks for its pip ``tileiras`` under ``nvidia.cu13.__path__[0]`` only; another wheel's
    ``nvidia/cu13`` earlier on sys.path (nvidia-curand's, next to a ``--no-deps`` package install) hides it. Put the
    directory that has ``bin/tileiras`` first (this process only)."""
    try:
        import nvidia.cu13 as cu13
    except ImportError:
        return
    paths = list(cu13.__path__)
    good = [p for p in paths if (Path(p) / "bin" / "tileiras").exists()]
    if good and paths[0] != good[0]:
        cu13.__path__ = [good[0], *(p for p in paths if p != good[0])]


def compile_spec(spec: Spec, archs: Sequence[str]) -> Any:
    import kernelpack.frontends.cutile.compile as kc

    prefer_pip_tileiras()
    rec: CutileLaunch = spec.payload
    sigs: Any = {spec.variant: rec.signature} if spec.variant else [rec.signature]
    return kc.compile(rec.kernel, sigs, arch=list(archs), name=spec.family)


def classify(err: str) -> str:
    return DSL if "cuTile failed" in err else KERNELPACK


def launch_args(rec: CutileLaunch) -> list[Any]:
    """The flat argument list kernelpack's cuTile ABI takes for this launch (constants dropped)."""
    import inspect

    names = list(inspect.signature(rec.pyfunc).parameters)
    out: list[Any] = []
    for name, value in zip(names, rec.args):
        out += _flat(rec.pyfunc.__annotations__.get(name), value)
    return out


def _flat(annotation: Any, value: Any) -> list[Any]:
    if annotation is not None and "Constant" in repr(annotation):
        return []
    if hasattr(value, "shape") and hasattr(value, "stride"):
        return [value, *value.shape, *value.stride()]
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flat(None, v)]
    return [value]


def describe_launch(spec: Spec, compiled: Any = None) -> dict[str, Any]:
    """The recorded launch as the GPU run rebuilds it: grid, and per flat argument a tensor's dtype, shape and
    strides (in elements) or a scalar's value."""
    rec: CutileLaunch = spec.payload
    args: list[dict[str, Any]] = []
    for v in launch_args(rec):
        if hasattr(v, "shape") and hasattr(v, "stride"):
            args.append({"dtype": str(v.dtype).removeprefix("torch."), "shape": list(v.shape),
                         "stride": list(v.stride())})
        else:
            args.append({"value": v if isinstance(v, (bool, int, float)) or v is None else repr(v)})
    return {"grid": list(rec.grid), "args": args}
