"""CuTe host programs without cudart or CuTe's runtime: a driver-API shim for the ``_cuda*``/``_cu*`` symbols an
``export_to_c`` object imports, the object-format check, typed C entries generated from the derived ABI, and the
builder that links them into ``libNAME.so``/``libNAME.a``."""

from __future__ import annotations

from .build import HostLibrary, build_host_library, link_object, shim_source
from .entry import generate
from .objfile import SUPPORTED_VERSIONS, ObjectFormatError, ObjectInfo, read_object
from .program import HostObject, HostParam, HostProgram

__all__ = ["SUPPORTED_VERSIONS", "HostLibrary", "HostObject", "HostParam", "HostProgram", "ObjectFormatError",
           "ObjectInfo", "build_host_library", "generate", "link_object", "read_object", "shim_source"]
