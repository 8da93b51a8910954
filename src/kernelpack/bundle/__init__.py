"""Artifacts and the bundles that carry them: ``artifact.py`` (:class:`KernelArtifact`, immutable, verified against its
binaries), ``kpack.py`` (:class:`Bundle` and the ``.kpack`` format), ``index.py`` (a bundle read lazily, family by
family), ``merge.py`` (one kernel compiled in separate calls), ``embedded.py`` (the bundle inside a built library),
``host_program.py``, ``host_serial.py`` and ``host_manifest.py`` (CuTe host programs as data).

``kernelpack.bundle.Bundle`` and the other names of ``kpack.py`` are reachable here, as before the folder existed. They
are imported on first use: reading a library's CuTe host programs (``host_manifest.py``, ``embedded.py``) imports
neither the ``.kpack`` format nor the artifacts (tests/test_runtime_imports.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .kpack import Bundle as Bundle

__all__ = ["Bundle"]

_SUBMODULES = ("artifact", "embedded", "host_manifest", "host_program", "host_serial", "index", "kpack", "magic",
               "merge", "pruned")


def __getattr__(name: str) -> Any:  # PEP 562: the .kpack format module's names, as kernelpack.bundle had
    import importlib

    if name in _SUBMODULES:  # the submodules an `import kernelpack.bundle` used to bind (it imported kpack)
        return importlib.import_module(f"{__name__}.{name}")
    kpack = importlib.import_module(f"{__name__}.kpack")
    try:
        return getattr(kpack, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
