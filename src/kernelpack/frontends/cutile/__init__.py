"""cuTile: ``compile.py`` the verb (:mod:`kernelpack.cutile`), ``signature.py`` signatures from example arguments,
``entry.py`` the ``[[cutile]]`` project entry.

The registry (:mod:`kernelpack.frontends.registry`) reads ``FRONTEND`` and the entry class from here."""

from __future__ import annotations

from .entry import FRONTEND, Cutile

__all__ = ["FRONTEND", "Cutile"]
