"""CUDA C++: ``compile.py`` the verb (:mod:`kernelpack.cuda`), ``toolkit.py`` NVRTC and nvcc, ``demangle.py`` and
``cxxtypes.py`` parameter types from mangled names, ``nvrtc_include/`` the headers NVRTC lacks, ``entry.py`` the
``[[cuda]]`` project entry.

The registry (:mod:`kernelpack.frontends.registry`) reads ``FRONTEND`` and the entry class from here."""

from __future__ import annotations

from .entry import FRONTEND, Cuda

__all__ = ["FRONTEND", "Cuda"]
