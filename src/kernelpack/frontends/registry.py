"""The one table of frontends. ``kernelpack build`` reads it (the ``[[name]]`` tables it accepts, in this order, and
what to do with each entry), so do the CLI and the docs' tests; ``kernelpack.project`` re-exports the entry classes
named in ``__all__`` for Python project modules. Adding a frontend is adding its module and its line here."""

from __future__ import annotations

from typing import Any

from ..errors import ProjectError
from .base import Entry, Frontend
from .cuda import FRONTEND as CUDA
from .cuda import Cuda
from .cute import FRONTEND as CUTE
from .cute import Cute
from .cutile import FRONTEND as CUTILE
from .cutile import Cutile
from .prebuilt import FRONTEND as PREBUILT
from .prebuilt import Cubin
from .triton import FRONTEND as TRITON
from .triton import Triton

FRONTENDS: dict[str, Frontend[Any]] = {f.name: f for f in (CUDA, TRITON, CUTILE, CUTE, PREBUILT)}

__all__ = ["Cubin", "Cuda", "Cute", "Cutile", "Triton"]  # the entry classes (star-imported by kernelpack.project)


def frontend_of(entry: Entry) -> Frontend[Any]:
    """The frontend that builds ``entry``."""
    f = FRONTENDS.get(entry.frontend)
    if f is None or not isinstance(entry, f.entry):
        raise ProjectError(f"{type(entry).__name__} is not the entry class of a registered frontend "
                           f"({', '.join(x.entry.__name__ for x in FRONTENDS.values())})")
    return f
