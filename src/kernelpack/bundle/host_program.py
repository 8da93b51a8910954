"""HostProgram: a ``@cute.jit`` function compiled ahead of time with its host logic, for one or more archs.

Holds bytes and facts only: per arch the relocatable object CuTe's ``export_to_c`` wrote (host launcher + cubin),
the typed parameters derived from the DSL arguments (checked against the host function CuTe lowered), and the
kernel artifacts it launches (for inspection; the object carries its own cubin). Link it with
``kernelpack.Library(lib, *programs)`` (alone or with kernels).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core._reprs import clip, size
from ..core.abi import Struct
from ..core.arch import Arch
from ..core.errors import KernelpackError
from .host_manifest import ZERO_EXTENT_POLICIES, HostParam  # noqa: F401 - HostParam: imported from here too

if TYPE_CHECKING:  # reading a library's host-program descriptions (host_manifest.py) needs neither
    from ..core.objfile import ObjectInfo
    from .artifact import KernelArtifact, Provenance

_IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"  # compiled on first use (re caches it): loading needs no HostProgram


@dataclass(frozen=True, repr=False)  # its own __repr__: the generated one would go unused
class HostObject:
    """The export object of one arch; ``prefix`` is the unique symbol prefix it was exported with."""

    arch: Arch
    data: bytes
    prefix: str

    @property
    def info(self) -> ObjectInfo:
        from ..core.objfile import read_object

        return read_object(self.data, self.prefix)

    def __repr__(self) -> str:
        return f"<HostObject {self.arch} {size(len(self.data))} prefix {clip(self.prefix, 80)}>"


@dataclass(frozen=True, repr=False)  # its own __repr__: the generated one would go unused
class HostProgram:
    """A CuTe host program: C entry ``<lib>_<name>[_<variant>]`` calls the object of the device's arch.

    ``zero_extent``: what the entry does when a dynamic extent of a tensor argument is 0 — ``skip`` returns
    success without running host code (which may divide by it: CuTe GEMM host code dies with SIGFPE on M = 0),
    ``error`` returns KP_ERROR_INVALID_ARGUMENT. Either way the CuTe code never sees the zero.
    """

    name: str
    params: tuple[HostParam, ...]
    objects: tuple[HostObject, ...]
    provenance: Provenance
    variant: str = ""
    kernels: tuple[KernelArtifact, ...] = ()
    zero_extent: str = "skip"

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "objects", tuple(self.objects))
        object.__setattr__(self, "kernels", tuple(self.kernels))
        if not re.match(_IDENT, self.name) or (self.variant and not re.match(r"^[A-Za-z0-9_]+$", self.variant)):
            raise KernelpackError(f"host program name {self.name!r}/variant {self.variant!r} must be C identifiers")
        if self.zero_extent not in ZERO_EXTENT_POLICIES:
            raise KernelpackError(f"zero_extent must be one of {ZERO_EXTENT_POLICIES} (got {self.zero_extent!r})")
        if not self.objects:
            raise KernelpackError(f"host program {self.label}: no objects")
        archs = [o.arch for o in self.objects]
        if len(set(archs)) != len(archs):
            raise KernelpackError(f"host program {self.label}: two objects for one arch")
        for o in self.objects:
            o.info  # noqa: B018 - refuse unknown formats and imports now, not at link time

    @property
    def label(self) -> str:
        return f"{self.name}[{self.variant}]" if self.variant else self.name

    def __repr__(self) -> str:
        params = ", ".join("stream" if p.stream else p.name for p in self.params)
        archs = ", ".join(str(o.arch) for o in self.objects)
        return (f"<HostProgram {clip(self.label, 64)} for {clip(archs, 60)}: ({clip(params, 80)}), "
                f"{len(self.kernels)} kernel{'s' * (len(self.kernels) != 1)}, objects "
                f"{size(sum(len(o.data) for o in self.objects))}, {clip(self.provenance.frontend, 24)}>")

    def to_bytes(self) -> bytes:
        """This program as canonical JSON bytes (objects and kernels inside): see
        :mod:`kernelpack.bundle.host_serial`."""
        from .host_serial import to_bytes

        return to_bytes(self)

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "<bytes>") -> HostProgram:
        """The program :meth:`to_bytes` wrote; anything malformed is a BundleError (nothing in it is executed)."""
        from .host_serial import from_bytes

        return from_bytes(data, source=source)

    @property
    def symbol(self) -> str:
        """The entry name without the library prefix: ``name`` or ``name_variant``."""
        return f"{self.name}_{self.variant}" if self.variant else self.name

    def extents(self) -> list[tuple[str, str]]:
        """(param, field) of every dynamic shape value: each must be > 0 before host code runs."""
        return [(p.name, f.name) for p in self.params if isinstance(p.type, Struct) and p.type.tensor is not None
                for f in p.type.fields if f.name.startswith("shape")]
