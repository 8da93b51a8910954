"""cuTile in a project: ``[[cutile]]`` entries, one build step per signature, built by
:func:`kernelpack.cutile.compile`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..errors import ProjectError
from . import fields as fl
from .base import Entry, Frontend, Output, Step
from .refs import python_ref_files, ref_name, resolve

SIGNATURES = fl.rule(lambda v: v is not None and not isinstance(v, (bool, int, float)),
                     "a reference such as \"kernels.py:SIGNATURES\" (or the signatures themselves)")


@dataclass(frozen=True)
class Cutile(Entry):
    """cuTile: ``kernelpack.cutile.compile(kernel, signatures, ...)``; one build step per signature."""

    frontend: ClassVar[str] = "cutile"
    rules: ClassVar[Mapping[str, fl.Check]] = {"kernel": fl.REF, "name": fl.NAME, "signatures": SIGNATURES}
    kernel: Any = None
    signatures: Any = None  # reference or object: list/dict of signatures, or a function returning one
    _: KW_ONLY
    name: str | None = None


class CutileFrontend(Frontend[Cutile]):
    name = "cutile"
    title = "cuTile"
    entry = Cutile
    api = "kernelpack.cutile"
    packages = ("cuda-tile", "nvidia-cuda-tileiras")

    def label(self, entry: Cutile, root: Path) -> str:
        return entry.name or ref_name(entry.kernel)

    def variants(self, entry: Cutile, root: Path) -> list[str]:
        sigs = _signatures(entry, root)
        if isinstance(sigs, Mapping):
            return list(sigs)
        return ["" if len(sigs) == 1 else f"s{i}" for i in range(len(sigs))]

    def files(self, entry: Cutile, root: Path) -> list[Path]:
        return python_ref_files([entry.kernel, entry.signatures], root)

    def build(self, entry: Cutile, step: Step) -> Output:
        from .. import cutile as kc

        kernel = resolve(entry.kernel, step.root, f"cutile kernel {entry.kernel!r}")
        sigs = _signatures(entry, step.root)
        sig = sigs[step.variant] if isinstance(sigs, Mapping) else list(sigs)[step.index]
        bundle = kc.compile(kernel, {step.variant: sig}, arch=list(step.archs), name=entry.name, cache=step.cache)
        return Output("bundle", bundle.to_bytes())


def _signatures(entry: Cutile, root: Path) -> Any:
    sigs = resolve(entry.signatures, root, "cutile signatures")
    if callable(sigs):
        sigs = sigs()
    if isinstance(sigs, (str, bytes)) or not isinstance(sigs, (Mapping, Sequence)) or not sigs:
        raise ProjectError(f"cutile entry {ref_name(entry.kernel)}: signatures must be a non-empty list or dict "
                           f"(got {type(sigs).__name__})")
    return sigs


FRONTEND = CutileFrontend()
