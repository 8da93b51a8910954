"""cuTile in a project: ``[[cutile]]`` entries, one build step per signature, built by
:func:`kernelpack.cutile.compile`. Instead of ``signatures``, ``example_args = "kernels.py:example_args"`` (a function
returning the arguments of one call, or ``{variant: arguments}``) derives each signature as cuTile's JIT would.
``prebuilt = "cutile/k.kpack"`` links a bundle compiled before instead: ``kernelpack capture`` compiles a kernel no
project file can name (made inside a function, or a module kernel given other hints by ``replace_hints``) while its
Python object lives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, ClassVar

from ...core.errors import ProjectError
from .. import fields as fl
from ..base import Entry, Frontend, Output, Step, prebuilt_output
from ..refs import python_ref_files, ref_name, rel, resolve

SIGNATURES = fl.optional(fl.rule(lambda v: not isinstance(v, (bool, int, float)),
                                 "a reference such as \"kernels.py:SIGNATURES\" (or the signatures themselves)"))
EXAMPLE_ARGS = fl.optional(fl.rule(lambda v: not isinstance(v, (bool, int, float)),
                                   "a reference such as \"kernels.py:example_args\" (a function returning the "
                                   "arguments of one call, or {variant: arguments})"))


@dataclass(frozen=True)
class Cutile(Entry):
    """cuTile: ``kernelpack.cutile.compile(kernel, signatures, ...)``; one build step per signature."""

    frontend: ClassVar[str] = "cutile"
    rules: ClassVar[Mapping[str, fl.Check]] = {"kernel": fl.optional(fl.REF), "name": fl.NAME, "signatures": SIGNATURES,
                                               "example_args": EXAMPLE_ARGS, "prebuilt": fl.optional(fl.PATH)}
    kernel: Any = None
    signatures: Any = None  # reference or object: list/dict of signatures, or a function returning one
    _: KW_ONLY
    example_args: Any = None  # instead of signatures: the arguments of one call, or {variant: arguments}
    name: str | None = None
    prebuilt: str | None = None  # instead of all of the above: a .kpack bundle kernelpack built, linked as it is

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.prebuilt is not None:
            given = [k for k in ("kernel", "signatures", "example_args") if getattr(self, k) is not None]
            if given:
                raise ProjectError(f"Cutile entry: 'prebuilt' links a bundle built before; give it alone (not with "
                                   f"{', '.join(map(repr, given))})")
            if not self.name:
                raise ProjectError("Cutile entry: 'prebuilt' needs a 'name'")
        elif self.kernel is None:
            raise ProjectError("Cutile entry: give 'kernel' (or 'prebuilt')")


class CutileFrontend(Frontend[Cutile]):
    name = "cutile"
    title = "cuTile"
    entry = Cutile
    api = "kernelpack.cutile"
    packages = ("cuda-tile", "nvidia-cuda-tileiras")

    def label(self, entry: Cutile, root: Path) -> str:
        return entry.name or ref_name(entry.kernel)

    def variants(self, entry: Cutile, root: Path) -> list[str]:
        if entry.prebuilt is not None:
            return [""]
        sigs = _signatures(entry, root)
        if isinstance(sigs, Mapping):
            return list(sigs)
        return ["" if len(sigs) == 1 else f"s{i}" for i in range(len(sigs))]

    def files(self, entry: Cutile, root: Path) -> list[Path]:
        if entry.prebuilt is not None:
            return [rel(root, entry.prebuilt)]
        return python_ref_files([entry.kernel, entry.signatures, entry.example_args], root)

    def build(self, entry: Cutile, step: Step) -> Output:
        from . import compile as kc

        if entry.prebuilt is not None:
            return prebuilt_output(rel(step.root, entry.prebuilt), "cuTile")
        kernel = resolve(entry.kernel, step.root, f"cutile kernel {entry.kernel!r}")
        sigs = _signatures(entry, step.root)
        sig = sigs[step.variant] if isinstance(sigs, Mapping) else list(sigs)[step.index]
        if entry.example_args is not None:
            bundle = kc.compile(kernel, arch=list(step.archs), example_args={step.variant: sig}, name=entry.name,
                                cache=step.cache)
        else:
            bundle = kc.compile(kernel, {step.variant: sig}, arch=list(step.archs), name=entry.name,
                                cache=step.cache)
        return Output("bundle", bundle.to_bytes())


def _signatures(entry: Cutile, root: Path) -> Any:
    """The entry's signatures (a list or dict); with ``example_args``, the arguments in their place (one call's
    arguments become a list of one)."""
    label = f"cutile entry {ref_name(entry.kernel)}"
    if (entry.signatures is None) == (entry.example_args is None):
        raise ProjectError(f"{label}: give signatures or example_args (exactly one)")
    if entry.example_args is not None:
        args = resolve(entry.example_args, root, "cutile example_args")
        if callable(args) and not isinstance(args, (tuple, list, Mapping)):
            args = args()
        if isinstance(args, (tuple, list)):
            args = [args]
        what = "example_args must give the arguments of one call (a tuple or list) or a non-empty dict"
    else:
        args = resolve(entry.signatures, root, "cutile signatures")
        if callable(args):
            args = args()
        what = "signatures must be a non-empty list or dict"
    if isinstance(args, (str, bytes)) or not isinstance(args, (Mapping, Sequence)) or not args:
        raise ProjectError(f"{label}: {what} (got {type(args).__name__})")
    return args


FRONTEND = CutileFrontend()
