"""Triton: ``compile.py`` the verb (:mod:`kernelpack.triton`), ``signature.py`` signatures from example arguments
(Triton's own binder), ``entry.py`` the ``[[triton]]`` project entry.

The registry (:mod:`kernelpack.frontends.registry`) reads ``FRONTEND`` and the entry class from here."""

from __future__ import annotations

from .entry import FRONTEND, Triton

__all__ = ["FRONTEND", "Triton"]
