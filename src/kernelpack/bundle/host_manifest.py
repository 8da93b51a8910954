"""What a built library says about its CuTe host programs, for the Python runtime (``kernelpack.load``).

The generated entry source embeds, in section ``.kpack_host``, one record per library: ``MAGIC``, a little-endian
u64 length, then that many bytes of JSON (the entries' C symbols and derived parameters), padded to 8 bytes. A
program that statically links several kernelpack libraries holds several records there, one after another. The
``.kpack`` bundle format is unchanged; a library without this section simply has no host programs for Python.

Format 2 (written since issue 27's first-call work) lists each distinct parameter type once, in ``types``, and a
parameter's ``type`` is its index there: a library's programs share few types (libfa4: 380 parameters, 11 types),
so its record is 7x smaller and decodes 7x faster than format 1's, which wrote every type in full at each
parameter. Both formats are read.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator, Sequence
from dataclasses import FrozenInstanceError
from typing import TYPE_CHECKING, Any

from ..core import records
from ..core._reprs import clip
from ..core.abi import ParamType, Pointer, type_from_json, type_to_json
from ..core.errors import AbiError, BundleError
from ..core.names import entry_name
from ..core.version import __version__

if TYPE_CHECKING:  # what the builder describes; reading a library's descriptions needs no HostProgram
    from .host_program import HostProgram

SECTION = ".kpack_host"
MAGIC = b"KPHOST\x00\x01"
FORMAT = 2
FORMATS = (1, 2)  # what this kernelpack reads: 1 = each parameter's type inline
ZERO_EXTENT_POLICIES = ("skip", "error")  # what an entry does with a zero extent (HostProgram.zero_extent)


@records.record(frozen=True, repr=False)  # its own __repr__
class HostParam:
    """One parameter of the generated C entry (a flattened DSL argument)."""

    name: str
    type: ParamType
    stream: bool = False
    checks: tuple[tuple[str, int], ...] = ()  # (field, divisor): "data" = byte alignment, else the value itself

    def __repr__(self) -> str:
        kind = "void* (stream)" if self.stream else self.type.c_type
        checks = "".join(f", {f} % {n} == 0" for f, n in self.checks)
        return f"<HostParam {clip(kind, 64)} {clip(self.name, 64)}{clip(checks, 100)}>"


class HostEntryInfo:
    """One host program as a built library exports it: ``symbol`` is its C entry. Immutable; equal when every field
    is (as a frozen dataclass). Read from a library (:func:`parse`), its parameters' types are parsed from the
    description when :attr:`params` is first used: loading a library of many programs (libfa4: 48) reads names only,
    and a malformed type is reported then, as a BundleError naming the library and the section."""

    __slots__ = ("name", "variant", "symbol", "archs", "zero_extent", "library", "_params", "_heads", "_raw")
    _FIELDS = ("name", "variant", "symbol", "params", "archs", "zero_extent", "library")

    name: str
    variant: str
    symbol: str
    archs: tuple[str, ...]
    zero_extent: str
    library: str  # the C library name: its NAME_last_error / NAME_last_cuda_error report the entry's failures
    _params: tuple[HostParam, ...] | None  # None until parsed
    _heads: tuple[tuple[str, bool], ...]
    _raw: tuple[list[dict[str, Any]], _Types, str] | None  # the description, the section's types, the library

    def __init__(self, name: str, variant: str, symbol: str, params: Sequence[HostParam], archs: tuple[str, ...],
                 zero_extent: str, library: str) -> None:
        params = tuple(params)
        self._set(name, variant, symbol, archs, zero_extent, library, params,
                  tuple((q.name, q.stream) for q in params), None)

    def _set(self, *values: Any) -> None:
        for slot, v in zip(("name", "variant", "symbol", "archs", "zero_extent", "library", "_params", "_heads",
                            "_raw"), values):
            object.__setattr__(self, slot, v)

    @classmethod
    def _described(cls, p: dict[str, Any], library: str, types: _Types, source: str) -> HostEntryInfo:
        """One program of a library's description: its parameters' names now, their types on first use."""
        if p["zero_extent"] not in ZERO_EXTENT_POLICIES:
            raise ValueError(f"zero_extent {p['zero_extent']!r}")
        raw = p["params"]
        heads = tuple((str(q["name"]), bool(q.get("stream", False))) for q in raw)
        self = cls.__new__(cls)
        self._set(str(p["name"]), str(p.get("variant", "")), str(p["symbol"]), tuple(p.get("archs", ())),
                  p["zero_extent"], library, None, heads, (raw, types, source))
        return self

    @property
    def params(self) -> tuple[HostParam, ...]:
        got = self._params
        if got is None:
            assert self._raw is not None  # set with _params None (_described)
            raw, types, source = self._raw
            try:
                got = tuple(_param(q, types) for q in raw)
            except (KeyError, TypeError, ValueError, AbiError) as e:
                raise BundleError(f"{source}: malformed host-program record in section {SECTION}: {e!r}") from None
            object.__setattr__(self, "_params", got)
        return got

    @property
    def heads(self) -> tuple[tuple[str, bool], ...]:
        """``(name, stream)`` of each parameter (whether it is the stream), read without parsing the types."""
        return self._heads

    @property
    def label(self) -> str:
        return f"{self.name}[{self.variant}]" if self.variant else self.name

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"HostEntryInfo({', '.join(f'{f}={getattr(self, f)!r}' for f in self._FIELDS)})"

    def __reduce__(self) -> tuple[Any, ...]:  # pickle and copy: through __init__ (the fields are frozen)
        return HostEntryInfo, self._values()

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


def describe(lib: str, programs: Sequence[HostProgram]) -> dict[str, Any]:
    table: list[Any] = []  # "types": each distinct type's JSON once
    seen: dict[str, int] = {}  # its JSON text -> its index in the table

    def index(t: ParamType) -> int:
        described = type_to_json(t)
        at = seen.setdefault(json.dumps(described, sort_keys=True), len(table))
        if at == len(table):
            table.append(described)
        return at

    described = [
        {"name": p.name, "variant": p.variant, "symbol": entry_name(lib, p.symbol), "zero_extent": p.zero_extent,
         "archs": [str(o.arch) for o in p.objects],
         "params": [{"name": q.name, "type": index(q.type), "stream": q.stream,
                     "checks": [list(c) for c in q.checks]} for q in p.params]} for p in programs]
    return {"format": FORMAT, "kernelpack": __version__, "library": lib,
            "types": table, "programs": described}


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
        if fmt not in FORMATS or type(fmt) is not int:
            raise BundleError(f"{source}: host-program record of format {fmt!r} is not supported (this kernelpack "
                              f"reads formats {', '.join(map(str, FORMATS))}); rebuild the library")
        yield doc
        pos += 16 + size + (-(16 + size) % 8)


class _Types:
    """A section's parameter types, each parsed once, on first use: format 2's table (``types``, a parameter's type
    is an index in it) or format 1's inline types (keyed by their JSON's repr: equal JSON, one parse)."""

    __slots__ = ("table", "parsed")

    def __init__(self, table: list[Any] | None) -> None:
        self.table = table
        self.parsed: dict[Any, ParamType] = {}

    def get(self, raw: Any) -> ParamType:
        if self.table is None:  # format 1: the type itself
            key: Any = repr(raw)
            t = self.parsed.get(key)
            if t is None:
                t = self.parsed[key] = type_from_json(raw)
            return t
        if type(raw) is not int or not 0 <= raw < len(self.table):
            raise ValueError(f"type index {raw!r} outside the record's {len(self.table)} types")
        t = self.parsed.get(raw)
        if t is None:
            t = self.parsed[raw] = type_from_json(self.table[raw])
        return t


def _param(d: dict[str, Any], types: _Types) -> HostParam:
    t = types.get(d["type"])
    stream = bool(d.get("stream", False))
    if stream and not isinstance(t, Pointer):
        raise AbiError(f"stream parameter {d['name']} is not a pointer")
    return HostParam(str(d["name"]), t, stream, tuple((str(f), int(n)) for f, n in d.get("checks", ())))


def parse(section: bytes, source: str) -> list[HostEntryInfo]:
    """Every host program described in a ``.kpack_host`` section (each one's parameter types parsed on first use:
    :attr:`HostEntryInfo.params`)."""
    out = []
    for doc in _records(section, source):
        try:
            library = str(doc["library"])
            table = doc["types"] if doc["format"] >= 2 else None
            if table is not None and not isinstance(table, list):
                raise TypeError(f"types is {type(table).__name__}, not a list")
            types = _Types(table)  # shared by the record's programs: each distinct type is parsed once
            out += [HostEntryInfo._described(p, library, types, source) for p in doc["programs"]]
        except (KeyError, TypeError, ValueError, AbiError) as e:
            raise BundleError(f"{source}: malformed host-program record in section {SECTION}: {e!r}") from None
    return out
