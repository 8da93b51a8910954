"""Frontends behind one interface (:class:`Frontend`, see :mod:`.base`) and their one registry (:data:`FRONTENDS`).

Each frontend is one module here: its project entry class and what ``kernelpack build`` asks of it. The verbs of the
frontends that predate this package stay in their public modules (``kernelpack.cuda``, ``.triton``, ``.cutile``,
``.cute``), which these modules call; a new frontend is one module holding both, as :mod:`.prebuilt` does
(``kernelpack.prebuilt`` re-exports its verb).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Entry, Frontend, Output, Step
from .registry import FRONTENDS, entry_class, frontend_of
from .registry import __all__ as _entries

if TYPE_CHECKING:  # the entry classes, imported on first use (module __getattr__ below)
    from .cuda.entry import Cuda as Cuda
    from .cute.entry import Cute as Cute
    from .cutile.entry import Cutile as Cutile
    from .prebuilt.entry import Cubin as Cubin
    from .triton.entry import Triton as Triton

__all__ = [*_entries, "FRONTENDS", "Entry", "Frontend", "Output", "Step", "frontend_of"]


def __getattr__(name: str) -> Any:  # PEP 562: the entry classes, their frontend's module imported on first use
    if name in _entries:
        return entry_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
