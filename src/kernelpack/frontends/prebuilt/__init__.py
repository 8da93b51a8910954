"""Prebuilt binaries: ``entry.py`` the verb (:mod:`kernelpack.prebuilt`) and the ``[[cubin]]`` project entry,
``fatbin.py`` the fatbin reader, ``decompress.py``, ``zstd_frames.py``, ``zstd_blocks.py`` and ``entropy.py`` its
entries' decoders.

The registry (:mod:`kernelpack.frontends.registry`) reads ``FRONTEND`` and the entry class from here."""

from __future__ import annotations

from .entry import FRONTEND, Cubin

__all__ = ["FRONTEND", "Cubin"]
