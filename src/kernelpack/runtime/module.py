"""``kernelpack.load``: a bundle or a built library as a module with one attribute per kernel family."""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Any

from ..bundle import MAGIC, Bundle
from ..errors import BundleError
from . import docs
from .family import KernelFamily
from .fast import make_launcher, prepare_fast_path
from .loader import Loader


class KernelModule(types.ModuleType):
    """The kernels of one bundle: ``mod.name(*args, grid=..., ...)`` launches family ``name``.

    Nothing touches the driver until the first launch on a device (or :meth:`preload`); each binary is loaded once
    per process, each device's choice of binaries once per device.
    """

    def __init__(self, bundle: Bundle, source: str) -> None:
        name = Path(source).name.split(".")[0] if source != "<bundle>" else "bundle"
        super().__init__(f"kernelpack.loaded.{name}")
        self.__file__ = source
        self._loader = Loader(source)
        self._bundle = bundle
        self._families: dict[str, KernelFamily] = {}
        for fname, arts in bundle.families().items():
            fam = KernelFamily(fname, arts, self._loader)
            launcher = make_launcher(fam)
            launcher.__name__ = launcher.__qualname__ = fname
            launcher.__module__ = self.__name__
            launcher.__doc__ = docs.doc_text(fam, source)
            launcher.__signature__ = docs.signature(fam)
            launcher._kp_repr = docs.repr_text(fam)
            launcher.family = fam
            self._families[fname] = fam
            setattr(self, fname, launcher)
        self.__all__ = sorted(self._families)
        self.__doc__ = self._doc(source)

    def _doc(self, source: str) -> str:
        lines = [f"{len(self._families)} kernel famil{'ies' if len(self._families) != 1 else 'y'} "
                 f"({len(self._bundle)} specializations) loaded from {source}:"]
        lines += [f"  {docs.signature_text(f)}" for f in self._families.values()]
        return "\n".join(lines)

    @property
    def bundle(self) -> Bundle:
        return self._bundle

    @property
    def families(self) -> dict[str, KernelFamily]:
        return dict(self._families)

    def preload(self, device: int | None = None) -> None:
        """Load every kernel for ``device`` (default: every visible device) now instead of at first launch."""
        prepare_fast_path()
        d = self._loader.driver
        ordinals = range(d.device_count()) if device is None else [device]
        for o in ordinals:
            for fam in self._families.values():
                fam.preload(o)

    def __repr__(self) -> str:
        return f"<kernelpack module from {self.__file__!r}: {', '.join(self._families) or 'no kernels'}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        known = ", ".join(sorted(self._families)) or "none"
        raise AttributeError(f"{self.__file__} has no kernel {name!r}; kernels: {known}")


def read_any(path: str | os.PathLike[str]) -> Bundle:
    """A ``.kpack`` bundle, or the bundle embedded in a library built by kernelpack (``libNAME.so``/``.a``)."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            head = f.read(len(MAGIC))
    except OSError as e:
        raise BundleError(f"cannot read {path}: {e.strerror}") from None
    if head == MAGIC:
        return Bundle.read(p)
    try:
        from ..clib.embedded import read_embedded_bundle
    except ImportError as e:
        raise BundleError(f"{path} is not a .kpack bundle, and reading kernels from built libraries needs "
                          f"kernelpack.clib ({e})") from None
    return read_embedded_bundle(p)


def load(source: str | os.PathLike[str] | Bundle) -> KernelModule:
    """Load a ``.kpack`` bundle, a built ``libNAME.so`` / ``libNAME.a``, or a :class:`Bundle` in memory.

    Returns a module with one callable per kernel family::

        kernels = kernelpack.load("kernels.kpack")
        kernels.axpy(0.5, x, y, x.numel(), grid=blocks, block=256)
    """
    if isinstance(source, Bundle):
        return KernelModule(source, "<bundle>")
    return KernelModule(read_any(source), str(source))
