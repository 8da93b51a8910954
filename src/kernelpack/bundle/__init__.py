"""Artifacts and the bundles that carry them: ``artifact.py`` (:class:`KernelArtifact`, immutable, verified against its
binaries), ``kpack.py`` (:class:`Bundle` and the ``.kpack`` format), ``index.py`` (a bundle read lazily, family by
family), ``merge.py`` (one kernel compiled in separate calls), ``embedded.py`` (the bundle inside a built library),
``host_program.py``, ``host_serial.py`` and ``host_manifest.py`` (CuTe host programs as data).

``kernelpack.bundle.Bundle`` and the other names of ``kpack.py`` are reachable here, as before the folder existed."""

from __future__ import annotations

from typing import Any

from .kpack import Bundle

__all__ = ["Bundle"]


def __getattr__(name: str) -> Any:  # PEP 562: the rest of the .kpack format module's names, as kernelpack.bundle had
    from . import kpack

    try:
        return getattr(kpack, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
