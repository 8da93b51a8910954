"""CuTe DSL in a project: ``[[cute]]`` entries, one build step per variant, built by :func:`kernelpack.cute.compile`
(mode ``kernel``: a bundle) or :func:`kernelpack.cute.export` (mode ``host``: a host program)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ...core.errors import ProjectError
from .. import fields as fl
from ..base import Entry, Frontend, Output, Step
from ..refs import python_ref_files, ref_name, resolve, resolve_values


@dataclass(frozen=True)
class Cute(Entry):
    """CuTe DSL: ``kernelpack.cute.compile`` (mode "kernel") or ``.export`` (mode "host"); one step per variant."""

    frontend: ClassVar[str] = "cute"
    rules: ClassVar[Mapping[str, fl.Check]] = {
        "function": fl.REF, "example_args": fl.REF, "name": fl.NAME, "variants": fl.optional(fl.TABLE),
        "args": lambda v: None, "init": fl.TABLE, "mode": fl.one_of("kernel", "host"), "options": fl.STRING,
        "zero_extent": fl.one_of("skip", "error")}  # cute_host.program.ZERO_EXTENT_POLICIES
    function: Any = None  # reference or object; a class is instantiated with ``init``
    example_args: Any = None  # factory: called with the variant's args (a list) or kwargs (a table)
    _: KW_ONLY
    name: str | None = None
    variants: Mapping[str, Any] | None = None  # {variant: factory args}; None: one unnamed variant with ``args``
    args: Any = ()
    init: Mapping[str, Any] = field(default_factory=dict)
    mode: str = "kernel"
    options: str = ""
    zero_extent: str = "skip"


class CuteFrontend(Frontend[Cute]):
    name = "cute"
    title = "CuTe DSL"
    entry = Cute
    api = "kernelpack.cute"
    packages = ("nvidia-cutlass-dsl",)

    def label(self, entry: Cute, root: Path) -> str:
        return entry.name or ref_name(entry.function)

    def kind(self, entry: Cute) -> str:
        return "cute-host" if entry.mode == "host" else self.name

    def variants(self, entry: Cute, root: Path) -> list[str]:
        return list(entry.variants) if entry.variants else [""]

    def files(self, entry: Cute, root: Path) -> list[Path]:
        return python_ref_files([entry.function, entry.example_args], root)

    def build(self, entry: Cute, step: Step) -> Output:
        """Each arch is built in its own :func:`~kernelpack.frontends.cute.scope.target_arch` block: the function
        (a class is instantiated there) and the example arguments are constructed there, so code that reads the
        DSL's arch while building its objects sees the target; the per-arch results are merged."""
        from ...bundle.kpack import Bundle
        from ...bundle.merge import merge_programs
        from . import compiler as kcute
        from .scope import target_arch

        name = entry.name or ref_name(entry.function)
        if entry.mode not in ("kernel", "host"):
            raise ProjectError(f"cute entry {name}: mode must be 'kernel' or 'host' (got {entry.mode!r})")
        if not step.archs:
            raise ProjectError(f"cute entry {name}: no archs (give the entry or the library archs = [...])")
        bundles, programs = [], []
        for arch in step.archs:
            with target_arch(arch):
                fn, args = self._construct(entry, step)
                if entry.mode == "kernel":
                    bundles.append(kcute.compile(fn, *args, arch=arch, name=name, variant=step.variant,
                                                 options=entry.options))
                else:
                    programs.append((kcute.export(fn, *args, arch=arch, name=name, variant=step.variant,
                                                  options=entry.options, zero_extent=entry.zero_extent),
                                     f"{name} for {arch}"))
        if entry.mode == "kernel":
            return Output("bundle", Bundle.of(*bundles).to_bytes())
        (program,) = merge_programs(programs)
        return Output("host", program.to_bytes())

    @staticmethod
    def _construct(entry: Cute, step: Step) -> tuple[Any, tuple[Any, ...]]:
        """The function (a class instantiated with ``init``) and the variant's example arguments."""
        root, what = step.root, f"cute function {entry.function!r}"
        fn = resolve(entry.function, root, what)
        if inspect.isclass(fn):
            fn = fn(**resolve_values(dict(entry.init), root, what))
        factory = resolve(entry.example_args, root, f"cute example_args {entry.example_args!r}")
        fargs = resolve_values(entry.variants[step.variant] if entry.variants else entry.args, root, what)
        args = factory(**fargs) if isinstance(fargs, Mapping) else factory(*fargs)
        return fn, args if isinstance(args, tuple) else tuple(args)

FRONTEND = CuteFrontend()
