"""Frontends behind one interface (:class:`Frontend`, see :mod:`.base`) and their one registry (:data:`FRONTENDS`).

Each frontend is one module here: its project entry class and what ``kernelpack build`` asks of it. The verbs of the
frontends that predate this package stay in their public modules (``kernelpack.cuda``, ``.triton``, ``.cutile``,
``.cute``), which these modules call; a new frontend is one module holding both, as :mod:`.prebuilt` does
(``kernelpack.prebuilt`` re-exports its verb).
"""

from __future__ import annotations

from .base import Entry, Frontend, Output, Step
from .registry import *  # noqa: F403 - the entry classes
from .registry import FRONTENDS, frontend_of
from .registry import __all__ as _entries

__all__ = [*_entries, "FRONTENDS", "Entry", "Frontend", "Output", "Step", "frontend_of"]
