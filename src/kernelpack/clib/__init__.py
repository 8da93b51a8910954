"""The C/C++ library generator: kernels from any frontend into one driver-only ``libNAME.so``/``.a`` with typed
C99 and C++17 headers, a CMake package and a pkg-config file. Names are imported on first use
(``kernelpack.core._lazy``): ``kernelpack.load`` of a built library reads it through ``.embedded`` alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core._lazy import lazy_exports

if TYPE_CHECKING:
    from ..bundle.embedded import read_embedded_bundle, read_embedded_bundles
    from .build import BuildResult, Library, build_library
    from .generate import Sources, generate

_WHERE = {
    "BuildResult": "build", "Library": "build", "build_library": "build",
    "read_embedded_bundle": "embedded", "read_embedded_bundles": "embedded",
    "Sources": "generate", "generate": "generate",
}
__all__ = ["BuildResult", "Library", "Sources", "build_library", "generate", "read_embedded_bundle",
           "read_embedded_bundles"]
__getattr__ = lazy_exports(__name__, globals(), _WHERE)
