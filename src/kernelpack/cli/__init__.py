"""The ``kernelpack`` command (``main.py``), ``kernelpack inspect``'s tables (``describe.py``) and the demo."""

from __future__ import annotations

from .commands import main

__all__ = ["main"]
