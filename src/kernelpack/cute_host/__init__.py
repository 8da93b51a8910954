"""CuTe host programs without cudart or CuTe's runtime: a driver-API shim for the ``_cuda*``/``_cu*`` symbols an
``export_to_c`` object imports, the object-format check, typed C entries generated from the derived ABI, and the
builder that links them into ``libNAME.so``/``libNAME.a``. Names are imported on first use (``kernelpack._lazy``):
the runtime reads host-program descriptions (``.manifest``) without loading the builder."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .build import HostLibrary, build_host_library, link_object, shim_source
    from .entry import generate
    from .objfile import SUPPORTED_VERSIONS, ObjectFormatError, ObjectInfo, read_object
    from .program import HostObject, HostParam, HostProgram

_WHERE = {
    "HostLibrary": "build", "build_host_library": "build", "link_object": "build", "shim_source": "build",
    "generate": "entry",
    "SUPPORTED_VERSIONS": "objfile", "ObjectFormatError": "objfile", "ObjectInfo": "objfile", "read_object": "objfile",
    "HostObject": "program", "HostParam": "program", "HostProgram": "program",
}
__all__ = ["HostLibrary", "HostObject", "HostParam", "HostProgram", "ObjectFormatError", "ObjectInfo",
           "SUPPORTED_VERSIONS", "build_host_library", "generate", "link_object", "read_object", "shim_source"]
__getattr__ = lazy_exports(__name__, globals(), _WHERE)
