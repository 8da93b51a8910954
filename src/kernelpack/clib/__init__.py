"""The C/C++ library generator: kernels from any frontend into one driver-only ``libNAME.so``/``.a`` with typed
C99 and C++17 headers, a CMake package and a pkg-config file."""

from __future__ import annotations

from .build import BuildResult, Library, build_library
from .embedded import read_embedded_bundle, read_embedded_bundles
from .generate import Sources, generate

__all__ = ["BuildResult", "Library", "Sources", "build_library", "generate", "read_embedded_bundle",
           "read_embedded_bundles"]
