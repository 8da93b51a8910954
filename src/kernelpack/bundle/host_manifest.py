"""What a built library says about its CuTe host programs, for the Python runtime (``kernelpack.load``).

The generated entry source embeds, in section ``.kpack_host``, one record per library: ``MAGIC``, a little-endian
u64 length, then that many bytes of JSON (the entries' C symbols and derived parameters), padded to 8 bytes. A
program that statically links several kernelpack libraries holds several records there, one after another. The
``.kpack`` bundle format is unchanged; a library without this section simply has no host programs for Python.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.abi import Pointer, type_from_json, type_to_json
from ..core.errors import AbiError, BundleError
from ..core.names import entry_name
from ..core.version import __version__
from .host_program import ZERO_EXTENT_POLICIES, HostParam, HostProgram

SECTION = ".kpack_host"
MAGIC = b"KPHOST\x00\x01"
FORMAT = 1


@dataclass(frozen=True)
class HostEntryInfo:
    """One host program as a built library exports it: ``symbol`` is its C entry."""

    name: str
    variant: str
    symbol: str
    params: tuple[HostParam, ...]
    archs: tuple[str, ...]
    zero_extent: str
    library: str  # the C library name: its NAME_last_error / NAME_last_cuda_error report the entry's failures

    @property
    def label(self) -> str:
        return f"{self.name}[{self.variant}]" if self.variant else self.name


def describe(lib: str, programs: Sequence[HostProgram]) -> dict[str, Any]:
    return {"format": FORMAT, "kernelpack": __version__, "library": lib, "programs": [
        {"name": p.name, "variant": p.variant, "symbol": entry_name(lib, p.symbol), "zero_extent": p.zero_extent,
         "archs": [str(o.arch) for o in p.objects],
         "params": [{"name": q.name, "type": type_to_json(q.type), "stream": q.stream,
                     "checks": [list(c) for c in q.checks]} for q in p.params]} for p in programs]}


def record(lib: str, programs: Sequence[HostProgram]) -> bytes:
    body = json.dumps(describe(lib, programs), sort_keys=True, separators=(",", ":")).encode()
    raw = MAGIC + struct.pack("<Q", len(body)) + body
    return raw + b"\0" * (-len(raw) % 8)


def c_definition(lib: str, programs: Sequence[HostProgram]) -> str:
    """The C array that places the record in section ``.kpack_host`` (kept by ``used``, local to the object)."""
    raw = record(lib, programs)
    rows = ",\n    ".join(", ".join(str(b) for b in raw[i:i + 24]) for i in range(0, len(raw), 24))
    return (f"/* What kernelpack.load reads to call these entries from Python (cute_host/manifest.py). */\n"
            f"__attribute__((section(\"{SECTION}\"), used, aligned(8)))\n"
            f"static const unsigned char {lib}_kp_host_manifest[{len(raw)}] = {{\n    {rows}\n}};\n")


def _records(section: bytes, source: str) -> Iterator[dict[str, Any]]:
    pos = 0
    while pos + 16 <= len(section):
        if section[pos:pos + 8] != MAGIC:
            pos += 8
            continue
        (size,) = struct.unpack_from("<Q", section, pos + 8)
        body = section[pos + 16:pos + 16 + size]
        if len(body) != size:
            raise BundleError(f"{source}: truncated host-program record in section {SECTION}")
        try:
            doc = json.loads(body)
        except ValueError as e:
            raise BundleError(f"{source}: malformed host-program record in section {SECTION}: {e}") from None
        fmt = doc.get("format") if isinstance(doc, dict) else None
        if fmt != FORMAT:
            raise BundleError(f"{source}: host-program record of format {fmt!r} is not supported (this kernelpack "
                              f"reads format {FORMAT}); rebuild the library")
        yield doc
        pos += 16 + size + (-(16 + size) % 8)


def _param(d: dict[str, Any], types: dict[str, Any]) -> HostParam:
    key = repr(d["type"])  # a library's entries share few types: each is parsed once (equal JSON, equal repr)
    t = types.get(key)
    if t is None:
        t = types[key] = type_from_json(d["type"])
    stream = bool(d.get("stream", False))
    if stream and not isinstance(t, Pointer):
        raise AbiError(f"stream parameter {d['name']} is not a pointer")
    return HostParam(str(d["name"]), t, stream, tuple((str(f), int(n)) for f, n in d.get("checks", ())))


def parse(section: bytes, source: str) -> list[HostEntryInfo]:
    """Every host program described in a ``.kpack_host`` section."""
    out = []
    types: dict[str, Any] = {}
    for doc in _records(section, source):
        try:
            for p in doc["programs"]:
                if p["zero_extent"] not in ZERO_EXTENT_POLICIES:
                    raise ValueError(f"zero_extent {p['zero_extent']!r}")
                out.append(HostEntryInfo(str(p["name"]), str(p.get("variant", "")), str(p["symbol"]),
                                         tuple(_param(q, types) for q in p["params"]), tuple(p.get("archs", ())),
                                         p["zero_extent"], str(doc["library"])))
        except (KeyError, TypeError, ValueError, AbiError) as e:
            raise BundleError(f"{source}: malformed host-program record in section {SECTION}: {e!r}") from None
    return out
