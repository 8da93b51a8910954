"""Device code for one arch: a SASS cubin, or PTX for the driver to JIT (:class:`Binary`), as an artifact carries it."""

from __future__ import annotations

import hashlib
import zlib
from functools import cached_property

from . import _reprs
from .arch import Arch
from .cubin import Cubin, read_cubin
from .errors import KernelpackError
from .records import record

BINARY_KINDS = ("cubin", "ptx")
ZLIB_LEVEL = 6  # for binaries in bundles: within 1% of level 9's size for cubins, 4x faster


@record(frozen=True)
class Binary:
    """Device code for one arch: a SASS cubin, or PTX for the driver to JIT."""

    arch: Arch
    data: bytes
    kind: str = "cubin"

    def __post_init__(self) -> None:
        arch = Arch.parse(self.arch)
        if self.kind not in BINARY_KINDS:
            raise KernelpackError(f"binary kind must be one of {BINARY_KINDS} (got {self.kind!r})")
        if arch.virtual and self.kind != "ptx":
            raise KernelpackError(f"a {self.kind} is SASS for a real arch; {arch} names PTX (kind 'ptx')")
        object.__setattr__(self, "arch", arch.real)  # PTX is filed under its arch's SM name, kind 'ptx'
        if not isinstance(self.data, bytes) or not self.data:
            raise KernelpackError(f"{self.kind} for {self.arch} is empty or not bytes")

    @property
    def target(self) -> Arch:
        """What the binary was built for: ``sm_90a`` for SASS, ``compute_90a`` for PTX."""
        return Arch(self.arch.major, self.arch.minor, self.arch.suffix, self.kind == "ptx")

    @cached_property
    def ptx_isa(self) -> str | None:
        """The PTX ISA version PTX declares (``.version 8.7``), which the driver must know to JIT it; None for SASS."""
        if self.kind != "ptx":
            return None
        from .ptx import ptx_isa_version

        return ptx_isa_version(self.data.decode(errors="replace"))

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @cached_property
    def zlib(self) -> bytes:
        """The binary as a zlib stream, the form bundles store it in: compressed once per Binary, and a Binary read
        from a bundle starts with the stream it was stored as (``with_zlib``), so merging bundles compresses nothing."""
        return zlib.compress(self.data, ZLIB_LEVEL)

    def with_zlib(self, stream: bytes) -> Binary:
        """This binary, knowing ``stream`` as its zlib form (the reader's: it expanded ``stream`` to ``data``)."""
        vars(self)["zlib"] = stream  # what cached_property stores
        return self

    @cached_property
    def cubin(self) -> Cubin:
        """The parsed cubin (CubinError for malformed data); only for kind 'cubin'."""
        if self.kind != "cubin":
            raise KernelpackError(f"{self.arch} binary is {self.kind}, not a cubin")
        return read_cubin(self.data)

    def __repr__(self) -> str:
        kind = f"PTX ISA {self.ptx_isa or '?'}" if self.kind == "ptx" else self.kind
        return f"<Binary {self.target} {kind} {_reprs.size(len(self.data))} sha256:{self.sha256[:12]}>"
