"""Triton in a project: ``[[triton]]`` entries, one build step per specialization, built by
:func:`kernelpack.triton.compile`. ``example_args = "kernels.py:example_args"`` (a function returning the arguments
of one call, or the arguments themselves) derives the signature as Triton's JIT would for that call; ``signature``
and ``constexprs`` then override what was derived. ``example_args`` may also give ``{variant: arguments}``: one
specialization per call (what ``kernelpack capture`` writes). ``autotune = true`` builds every config of an
``@triton.autotune`` kernel, ``autotune = ["c0", "c3"]`` the configs named."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from ...core.errors import ProjectError
from .. import fields as fl
from ..base import Entry, Frontend, Output, Step
from ..refs import python_ref_files, ref_name, resolve

AUTOTUNE = fl.rule(lambda v: isinstance(v, bool) or (fl.is_sequence(v) and bool(v) and all(
    isinstance(x, str) for x in v)), "true, false or a list of config names such as [\"c0\", \"c2\"]")
GRID = fl.optional(fl.rule(lambda v: fl.is_sequence(v) and len(v) == 3, "three grid formulas"))
SIGNATURE = fl.rule(lambda v: fl.str_key_map(v, lambda x: isinstance(x, str)) or (
    fl.is_sequence(v) and all(isinstance(x, str) for x in v)), "a table {param = \"type\"} or a list of types")
# a reference "file.py:function" (in a Python project also the function or the arguments themselves)
EXAMPLE_ARGS = fl.optional(fl.rule(lambda v: not isinstance(v, (bool, int, float)),
                                   "a reference such as \"kernels.py:example_args\" (a function returning the "
                                   "arguments of one call)"))


@dataclass(frozen=True)
class Triton(Entry):
    """Triton: ``kernelpack.triton.compile(kernel, signature, ...)``; one build step per specialization."""

    frontend: ClassVar[str] = "triton"
    rules: ClassVar[Mapping[str, fl.Check]] = {
        "kernel": fl.REF, "signature": SIGNATURE, "example_args": EXAMPLE_ARGS, "name": fl.NAME,
        "constexprs": fl.TABLE, "num_warps": fl.POSITIVE, "num_stages": fl.POSITIVE, "num_ctas": fl.POSITIVE,
        "specializations": fl.TABLES, "options": fl.TABLE, "device_args": fl.STRING_TABLE, "grid": GRID,
        "autotune": AUTOTUNE}
    kernel: Any = None  # "file.py:attr" | "module:attr" | the @triton.jit function
    signature: Mapping[str, str] | Sequence[str] = field(default_factory=dict)
    _: KW_ONLY
    example_args: Any = None  # "file.py:function" | the function | the arguments (a tuple, or a dict by name)
    name: str | None = None
    constexprs: Mapping[str, Any] = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 3
    num_ctas: int = 1
    specializations: Sequence[Mapping[str, Any]] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    device_args: Mapping[str, str] = field(default_factory=dict)  # param -> role filled from the launch device
    grid: Sequence[Any] | None = None  # three grid formulas (kernelpack.core.launchspec.evaluate_grid)
    # an @triton.autotune kernel: every config (or those named) a specialization (kernelpack tune picks), left out
    # for an arch whose limits it exceeds (with specializations given: they are the configs)
    autotune: bool | Sequence[str] = False


class TritonFrontend(Frontend[Triton]):
    name = "triton"
    title = "Triton"
    entry = Triton
    api = "kernelpack.triton"
    packages = ("triton",)

    def label(self, entry: Triton, root: Path) -> str:
        return entry.name or ref_name(entry.kernel)

    def variants(self, entry: Triton, root: Path) -> list[str]:
        configs = _autotuned(entry, root) if entry.autotune else []
        calls = _example_variants(entry, root)
        if calls is not None:
            if not configs:
                return list(calls)
            return [f"{v}_{c.variant}" if v else str(c.variant) for v in calls for c in configs]
        if configs and not entry.specializations:
            return [str(s.variant) for s in configs]
        specs = list(entry.specializations) or [{}]
        if len(specs) == 1:
            return [str(specs[0].get("variant") or "")]
        from . import compile as kt

        name = entry.name or ref_name(entry.kernel)
        specs_in = [kt._spec(s, name) for s in specs]
        consts: dict[str, Any] = dict(entry.constexprs)
        if entry.example_args is not None and any(s.variant is None for s in specs_in):  # names follow the JIT's
            fn = resolve(entry.kernel, root, f"triton kernel {entry.kernel!r}")
            specs_in, _ = kt.derive_specs(fn, _example_args(entry, root), entry.signature or None, consts, specs_in)
            consts = {}
        return kt._variant_names(name, specs_in, consts, entry.num_warps, entry.num_stages)

    def files(self, entry: Triton, root: Path) -> list[Path]:
        return python_ref_files([entry.kernel, entry.example_args], root)

    def build(self, entry: Triton, step: Step) -> Output:
        from . import compile as kt

        fn = resolve(entry.kernel, step.root, f"triton kernel {entry.kernel!r}")
        configs = _autotuned(entry, step.root) if entry.autotune else []
        calls = _example_variants(entry, step.root)
        example: Any = None
        if calls is not None:  # {variant: call}: this step's call (and config)
            which, config = divmod(step.index, len(configs)) if configs else (step.index, 0)
            example = list(calls.values())[which]
            spec: Any = replace(configs[config], variant=step.variant) if configs else kt.Specialization(
                variant=step.variant)
        else:
            specs: list[Any] = list(entry.specializations) or (configs or [{}])
            spec = specs[step.index] if len(specs) > 1 else specs[0]
            spec = replace(spec, variant=step.variant) if isinstance(spec, kt.Specialization) else (
                {**spec, "variant": step.variant} if len(specs) > 1 else dict(spec))
            if entry.example_args is not None:
                example = _example_args(entry, step.root)
        signature = (entry.signature or None) if example is not None else entry.signature
        # one config of an autotuned family: left out for an arch it does not fit (the build checks the family)
        bundle, dropped = kt._compile(fn, signature, arch=list(step.archs), example_args=example,
                                      constexprs=dict(entry.constexprs), num_warps=entry.num_warps,
                                      num_stages=entry.num_stages, num_ctas=entry.num_ctas, specializations=[spec],
                                      name=entry.name, options=dict(entry.options) or None,
                                      device_args=dict(entry.device_args) or None, grid=entry.grid,
                                      prune=bool(entry.autotune), cache=step.cache)
        return Output("bundle", bundle.to_bytes(), tuple(dropped))


def _autotuned(entry: Triton, root: Path) -> list[Any]:
    """``autotune = true``: the config specializations of the ``@triton.autotune`` kernel, one build step each
    (``autotune = ["c0", "c2"]``: those named)."""
    from . import compile as kt

    label = entry.name or ref_name(entry.kernel)
    fn = resolve(entry.kernel, root, f"triton kernel {entry.kernel!r}")
    specs = kt.autotune_specializations(fn)
    if not specs:
        raise ProjectError(f"triton entry {label}: autotune = {entry.autotune!r}, but {entry.kernel!r} is not an "
                           f"@triton.autotune kernel with configs")
    if entry.autotune is True:
        return list(specs)
    names = [str(s.variant) for s in specs]
    unknown = [c for c in entry.autotune if c not in names]  # type: ignore[union-attr]
    if unknown:
        raise ProjectError(f"triton entry {label}: autotune names config(s) {unknown}; the kernel has {names}")
    return [s for s in specs if s.variant in entry.autotune]  # type: ignore[operator]


def _example_variants(entry: Triton, root: Path) -> dict[str, Any] | None:
    """``example_args`` giving ``{variant: arguments}`` (not a dict by parameter name): the calls; else None."""
    if entry.example_args is None:
        return None
    args = _example_args(entry, root)
    if not isinstance(args, Mapping) or not args:
        return None
    from . import compile as kt

    fn = resolve(entry.kernel, root, f"triton kernel {entry.kernel!r}")
    names = set(kt._unwrap(fn).arg_names)
    if set(args) <= names or not all(isinstance(v, (tuple, list, Mapping)) for v in args.values()):
        return None
    label = entry.name or ref_name(entry.kernel)
    if entry.specializations:
        raise ProjectError(f"triton entry {label}: example_args gives one call per variant "
                           f"({', '.join(map(repr, args))}); give specializations or variants, not both")
    bad = [k for k in args if not isinstance(k, str)]
    if bad:
        raise ProjectError(f"triton entry {label}: example_args variants must be named by strings (got {bad[0]!r})")
    return dict(args)


def _example_args(entry: Triton, root: Path) -> Any:
    """The example arguments of the entry: a referenced function is called with no arguments."""
    args = resolve(entry.example_args, root, f"triton example_args {entry.example_args!r}")
    if callable(args) and not isinstance(args, (tuple, list, Mapping)):
        args = args()
    if isinstance(args, (str, bytes)) or not isinstance(args, (tuple, list, Mapping)):
        raise ProjectError(f"triton entry {entry.name or ref_name(entry.kernel)}: example_args must give a tuple or "
                           f"list of arguments, or a dict by parameter name (got {type(args).__name__})")
    return args


FRONTEND = TritonFrontend()
