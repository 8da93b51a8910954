"""CuTe DSL in a project: ``[[cute]]`` entries, one build step per variant, built by :func:`kernelpack.cute.compile`
(mode ``kernel``: a bundle), :func:`kernelpack.cute.export` (mode ``host``: a host program) or, mode ``auto``, the
first where the launcher's kernels have a kernel-level C form, else the second. ``prebuilt = "cute/k.kpack"``
links what was compiled before instead (a ``.kpack`` bundle or a serialized host program): ``kernelpack capture``
compiles the launchers it records while their Python objects live, since a launcher made inside a function or an
object built with arguments cannot be rebuilt from a project file."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ...core.errors import KernelpackError, ProjectError
from .. import fields as fl
from ..base import Entry, Frontend, Output, Step
from ..refs import python_ref_files, ref_name, rel, resolve, resolve_values


@dataclass(frozen=True)
class Cute(Entry):
    """CuTe DSL: ``kernelpack.cute.compile`` (mode "kernel") or ``.export`` (mode "host"); one step per variant."""

    frontend: ClassVar[str] = "cute"
    rules: ClassVar[Mapping[str, fl.Check]] = {
        "function": fl.optional(fl.REF), "example_args": fl.optional(fl.REF), "name": fl.NAME,
        "variants": fl.optional(fl.TABLE),
        "args": lambda v: None, "init": fl.TABLE, "mode": fl.one_of("kernel", "host", "auto"), "options": fl.STRING,
        "zero_extent": fl.one_of("skip", "error"),  # cute_host.program.ZERO_EXTENT_POLICIES
        "prebuilt": fl.optional(fl.PATH)}
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
    prebuilt: str | None = None  # a .kpack bundle or a host program kernelpack built: linked as it is


class CuteFrontend(Frontend[Cute]):
    name = "cute"
    title = "CuTe DSL"
    entry = Cute
    api = "kernelpack.cute"
    packages = ("nvidia-cutlass-dsl",)

    def label(self, entry: Cute, root: Path) -> str:
        return entry.name or (ref_name(entry.function) if entry.function is not None else
                              Path(str(entry.prebuilt or "cute")).stem)

    def kind(self, entry: Cute) -> str:
        return "cute-host" if entry.mode == "host" else self.name

    def variants(self, entry: Cute, root: Path) -> list[str]:
        return list(entry.variants) if entry.variants else [""]

    def files(self, entry: Cute, root: Path) -> list[Path]:
        if entry.prebuilt is not None:
            return [rel(root, entry.prebuilt)]
        return python_ref_files([entry.function, entry.example_args], root)

    def build(self, entry: Cute, step: Step) -> Output:
        from . import compiler as kcute

        if entry.prebuilt is not None:
            return _prebuilt(rel(step.root, entry.prebuilt))
        if entry.function is None or entry.example_args is None:
            raise ProjectError(f"cute entry {self.label(entry, step.root)}: give function and example_args (or "
                               f"prebuilt)")
        root, what = step.root, f"cute function {entry.function!r}"
        fn = resolve(entry.function, root, what)
        if inspect.isclass(fn):
            fn = fn(**resolve_values(dict(entry.init), root, what))
        factory = resolve(entry.example_args, root, f"cute example_args {entry.example_args!r}")
        fargs = resolve_values(entry.variants[step.variant] if entry.variants else entry.args, root, what)
        args = factory(**fargs) if isinstance(fargs, Mapping) else factory(*fargs)
        if not isinstance(args, tuple):
            args = tuple(args)
        name = entry.name or ref_name(entry.function)
        archs = list(step.archs)
        if entry.mode == "kernel":
            bundle = kcute.compile(fn, *args, arch=archs, name=name, variant=step.variant, options=entry.options)
            return Output("bundle", bundle.to_bytes())
        if entry.mode == "auto":
            return auto(fn, args, archs, name, step.variant, entry.options, entry.zero_extent)
        if entry.mode == "host":
            program = kcute.export(fn, *args, arch=archs, name=name, variant=step.variant, options=entry.options,
                                   zero_extent=entry.zero_extent)
            return Output("host", program.to_bytes())
        raise ProjectError(f"cute entry {name}: mode must be 'kernel', 'host' or 'auto' (got {entry.mode!r})")


NO_KERNEL_LEVEL = "no kernel-level C form"


def auto(fn: Any, args: tuple[Any, ...], archs: list[str], name: str, variant: str = "", options: str = "",
         zero_extent: str = "skip", kwargs: Mapping[str, Any] | None = None) -> Output:
    """Kernel-level (a bundle) where the launcher's kernels have a C form; else the launcher exported whole (a host
    program): kernels that take values its host code builds (TMA atoms), or whose kernel ABI kernelpack cannot derive
    from the launcher's arguments (the cubin disagrees: ``AbiMismatch``). CuTe's TVM-FFI calling convention
    (``--enable-tvm-ffi``) is left out: kernelpack's C entries and host program are how the launcher is called."""
    from . import compiler as kcute

    options = " ".join(o for o in options.split() if o != "--enable-tvm-ffi")  # kernelpack's entries call it
    try:
        bundle = kcute.compile(fn, *args, arch=archs, name=name, variant=variant, options=options,
                               kwargs=dict(kwargs) if kwargs else None)
        return Output("bundle", bundle.to_bytes())
    except KernelpackError as e:
        if NO_KERNEL_LEVEL not in e.message and type(e).__name__ != "AbiMismatch":
            raise
    program = kcute.export(fn, *args, arch=archs, name=name, variant=variant, options=options,
                           zero_extent=zero_extent, kwargs=dict(kwargs) if kwargs else None)
    return Output("host", program.to_bytes())


def _prebuilt(path: Path) -> Output:
    """A file kernelpack built: a ``.kpack`` bundle or a serialized host program, read and checked."""
    from ...bundle.host_program import HostProgram
    from ...bundle.kpack import MAGIC, Bundle
    from ...core.files import read_bounded

    data = read_bounded(path, "prebuilt CuTe output", error=ProjectError)
    if data.startswith(MAGIC):
        return Output("bundle", Bundle.from_bytes(data, source=str(path)).to_bytes())
    if data[:1] == b"{":
        return Output("host", HostProgram.from_bytes(data, source=str(path)).to_bytes())
    raise ProjectError(f"cute entry: {path} is neither a .kpack bundle nor a kernelpack host program")


FRONTEND = CuteFrontend()
