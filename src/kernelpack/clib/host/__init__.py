"""CuTe host programs without cudart or CuTe's runtime: a driver-API shim for the ``_cuda*``/``_cu*`` symbols an
``export_to_c`` object imports, the object-format check, typed C entries generated from the derived ABI, and the
builder that links them into ``libNAME.so``/``libNAME.a``. Names are imported on first use (``kernelpack.core._lazy``):
the runtime reads host-program descriptions (``kernelpack.bundle.host_manifest``) without loading the builder."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core._lazy import lazy_exports

if TYPE_CHECKING:
    from ...bundle.host_program import HostObject, HostParam, HostProgram
    from ...core.objfile import SUPPORTED_VERSIONS, ObjectFormatError, ObjectInfo, read_object
    from .build import HostLibrary, build_host_library, link_object, shim_source
    from .entry import generate

_WHERE = {
    "HostLibrary": "build", "build_host_library": "build", "link_object": "build", "shim_source": "build",
    "generate": "entry",
    "SUPPORTED_VERSIONS": "...core.objfile", "ObjectFormatError": "...core.objfile", "ObjectInfo": "...core.objfile",
    "read_object": "...core.objfile",
    "HostObject": "...bundle.host_program", "HostParam": "...bundle.host_program",
    "HostProgram": "...bundle.host_program",
}
__all__ = ["HostLibrary", "HostObject", "HostParam", "HostProgram", "ObjectFormatError", "ObjectInfo",
           "SUPPORTED_VERSIONS", "build_host_library", "generate", "link_object", "read_object", "shim_source"]
__getattr__ = lazy_exports(__name__, globals(), _WHERE)
