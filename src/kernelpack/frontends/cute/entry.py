"""CuTe DSL in a project: ``[[cute]]`` entries, one build step per variant, built by :func:`kernelpack.cute.compile`
(mode ``kernel``: a bundle), :func:`kernelpack.cute.export` (mode ``host``: a host program) or, mode ``auto``, the
first where the launcher's kernels have a kernel-level C form for every arch, else the second.

What is compiled is a ``function`` with the arguments its ``example_args`` factory makes, or, with ``capture``, the
``cute.compile`` call a factory records from a package's own interface (:mod:`.intercept`): the factory returns a
:class:`~kernelpack.frontends.cute.intercept.CompileCall` (its options come before the entry's).
``prebuilt = "cute/k.kpack"`` links what was compiled before instead (a ``.kpack`` bundle or a serialized host
program): ``kernelpack capture`` compiles the launchers it records while their Python objects live, since a launcher
made inside a function or an object built with arguments cannot be rebuilt from a project file."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ...core.errors import KernelpackError, ProjectError
from .. import fields as fl
from ..base import Entry, Frontend, Output, Step, prebuilt_output
from ..refs import python_ref_files, ref_name, rel, resolve, resolve_values


@dataclass(frozen=True)
class Cute(Entry):
    """CuTe DSL: ``kernelpack.cute.compile`` (mode "kernel") or ``.export`` (mode "host"); one step per variant."""

    frontend: ClassVar[str] = "cute"
    rules: ClassVar[Mapping[str, fl.Check]] = {
        "function": fl.optional(fl.REF), "example_args": fl.optional(fl.REF), "capture": fl.optional(fl.REF),
        "device": fl.optional(fl.TABLE),
        "name": fl.NAME, "variants": fl.optional(fl.TABLE),
        "args": lambda v: None, "init": fl.TABLE, "mode": fl.one_of("kernel", "host", "auto"),
        "options": fl.STRING, "zero_extent": fl.one_of("skip", "error"),  # cute_host.program.ZERO_EXTENT_POLICIES
        "prebuilt": fl.optional(fl.PATH)}
    function: Any = None  # reference or object; a class is instantiated with ``init``
    example_args: Any = None  # factory: called with the variant's args (a list) or kwargs (a table)
    _: KW_ONLY
    capture: Any = None  # instead of function + example_args: a factory returning a CompileCall
    device: Mapping[str, Any] | None = None  # {arch: {"sm_count": 148, ...}}: the target device, per arch
    name: str | None = None
    variants: Mapping[str, Any] | None = None  # {variant: factory args}; None: one unnamed variant with ``args``
    args: Any = ()
    init: Mapping[str, Any] = field(default_factory=dict)
    mode: str = "kernel"
    options: str = ""
    zero_extent: str = "skip"
    prebuilt: str | None = None  # a .kpack bundle or a host program kernelpack built: linked as it is

    def __post_init__(self) -> None:
        super().__post_init__()
        given = [k for k in ("function", "example_args") if getattr(self, k) is not None]
        if self.prebuilt is not None:
            if given or self.capture is not None:
                raise ProjectError(f"Cute entry: 'prebuilt' links a file built before; give it alone (not with "
                                   f"{', '.join(repr(k) for k in [*given, *(['capture'] if self.capture else [])])})")
            return
        if self.capture is not None and given:
            raise ProjectError(f"Cute entry: 'capture' replaces {' and '.join(repr(k) for k in given)}; give one way")
        if self.capture is None and len(given) != 2:
            raise ProjectError("Cute entry: give 'function' and 'example_args', 'capture', or 'prebuilt'")


class CuteFrontend(Frontend[Cute]):
    name = "cute"
    title = "CuTe DSL"
    entry = Cute
    api = "kernelpack.cute"
    packages = ("nvidia-cutlass-dsl",)

    def label(self, entry: Cute, root: Path) -> str:
        if entry.prebuilt is not None:
            return entry.name or Path(str(entry.prebuilt)).stem
        return entry.name or ref_name(entry.function if entry.capture is None else entry.capture)

    def kind(self, entry: Cute) -> str:
        return "cute-host" if entry.mode == "host" else self.name

    def variants(self, entry: Cute, root: Path) -> list[str]:
        return list(entry.variants) if entry.variants else [""]

    def files(self, entry: Cute, root: Path) -> list[Path]:
        if entry.prebuilt is not None:
            return [rel(root, entry.prebuilt)]
        return python_ref_files([r for r in (entry.function, entry.example_args, entry.capture) if r is not None], root)

    def build(self, entry: Cute, step: Step) -> Output:
        """Each arch is built in its own :func:`~kernelpack.frontends.cute.scope.target_arch` block: the function
        (a class is instantiated there) and the example arguments are constructed there, so code that reads the
        DSL's arch while building its objects sees the target; the per-arch results are merged. Mode ``auto``:
        kernel-level for every arch, else the launcher whole for every arch."""
        name = self.label(entry, step.root)
        if entry.prebuilt is not None:
            return prebuilt_output(rel(step.root, entry.prebuilt), "CuTe")
        if entry.mode not in ("kernel", "host", "auto"):
            raise ProjectError(f"cute entry {name}: mode must be 'kernel', 'host' or 'auto' (got {entry.mode!r})")
        if not step.archs:
            raise ProjectError(f"cute entry {name}: no archs (give the entry or the library archs = [...])")
        if entry.mode != "auto":
            return self._build(entry, step, name, entry.mode)
        try:
            return self._build(entry, step, name, "kernel")
        except KernelpackError as e:
            if not no_kernel_level(e):
                raise
        return self._build(entry, step, name, "host")

    def _build(self, entry: Cute, step: Step, name: str, mode: str) -> Output:
        from ...bundle.kpack import Bundle
        from ...bundle.merge import merge_programs
        from . import compiler as kcute
        from .scope import target_arch

        bundles, programs = [], []
        for arch in step.archs:
            with target_arch(arch, device=self._device(entry, arch)):
                fn, args, kwargs, options = self._construct(entry, step)
                if entry.mode == "auto":  # kernelpack's C entries and host program are how the launcher is called
                    options = " ".join(o for o in options.split() if o != "--enable-tvm-ffi")
                if mode == "kernel":
                    bundles.append(kcute.compile(fn, *args, arch=arch, name=name, variant=step.variant,
                                                 options=options, kwargs=kwargs))
                else:
                    programs.append((kcute.export(fn, *args, arch=arch, name=name, variant=step.variant,
                                                  options=options, kwargs=kwargs, zero_extent=entry.zero_extent),
                                     f"{name} for {arch}"))
        if mode == "kernel":
            return Output("bundle", Bundle.of(*bundles).to_bytes())
        (program,) = merge_programs(programs)
        return Output("host", program.to_bytes())

    @staticmethod
    def _device(entry: Cute, arch: str) -> Mapping[str, Any] | None:
        """The entry's device properties for ``arch`` (``device = { sm_100a = { sm_count = 148 } }``)."""
        if not entry.device:
            return None
        value = entry.device.get(arch)
        if value is not None and not isinstance(value, Mapping):
            raise ProjectError(f"cute entry: device.{arch} must be a table such as {{ sm_count = 148 }} (got "
                               f"{type(value).__name__})")
        return value

    @staticmethod
    def _construct(entry: Cute, step: Step) -> tuple[Any, tuple[Any, ...], dict[str, Any], str]:
        """The function (a class instantiated with ``init``), the variant's example arguments, keyword arguments and
        options; with ``capture``, those of the call its factory records."""
        from .intercept import CompileCall

        root = step.root
        fargs = resolve_values(entry.variants[step.variant] if entry.variants else entry.args, root, "cute entry")
        if entry.capture is not None:
            factory = resolve(entry.capture, root, f"cute capture {entry.capture!r}")
            call = factory(**fargs) if isinstance(fargs, Mapping) else factory(*fargs)
            if not isinstance(call, CompileCall):
                raise ProjectError(f"cute capture {entry.capture!r} returned {type(call).__name__}; expected a "
                                   f"kernelpack.cute.CompileCall (what kernelpack.cute.capture_compiles records)")
            return call.fn, call.args, dict(call.kwargs), f"{call.options} {entry.options}".strip()
        what = f"cute function {entry.function!r}"
        fn = resolve(entry.function, root, what)
        if inspect.isclass(fn):
            fn = fn(**resolve_values(dict(entry.init), root, what))
        factory = resolve(entry.example_args, root, f"cute example_args {entry.example_args!r}")
        args = factory(**fargs) if isinstance(fargs, Mapping) else factory(*fargs)
        return fn, args if isinstance(args, tuple) else tuple(args), {}, entry.options


NO_KERNEL_LEVEL = "no kernel-level C form"


def no_kernel_level(e: KernelpackError) -> bool:
    """The launcher's kernels take values its host code builds (TMA atoms), or kernelpack cannot derive their ABI
    from the launcher's arguments (the cubin disagrees: ``AbiMismatch``): export the launcher whole instead."""
    return NO_KERNEL_LEVEL in e.message or type(e).__name__ == "AbiMismatch"


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
        if not no_kernel_level(e):
            raise
    program = kcute.export(fn, *args, arch=archs, name=name, variant=variant, options=options,
                           zero_extent=zero_extent, kwargs=dict(kwargs) if kwargs else None)
    return Output("host", program.to_bytes())


FRONTEND = CuteFrontend()
