"""The ``.kpack`` bundle: many artifacts plus a JSON manifest in one deterministic, hash-checked file.

Layout (little-endian)::

    header   64 bytes: magic b"\\x7fKPACK\\r\\n", u32 format version, u32 flags,
             u64 manifest offset, u64 manifest size, 32 bytes SHA-256 of the manifest as stored
    blobs    each binary once (deduplicated by content), each starting at a 64-byte boundary;
             stored as a zlib stream when that is smaller (blob entry "encoding": "zlib", "raw_size"; header flag
             0x2): cubins shrink 3.7-5.6x, PTX more
    chunks   (format 2) zlib streams of lines (a family larger than one stream has its own): the families'
             manifest entries, one artifact per line (canonical JSON, each beginning with its "name" key), in name
             order, in streams of about 16 KiB expanded, and in streams of their own of about 4 KiB the families'
             dispatch records (:mod:`kernelpack.launch.record`), one line each (a first launch expands one). The
             manifest names each stream's offset, size, SHA-256 (as stored) and raw size: a loader reads the
             manifest alone at load, and the streams a family's first use needs
    manifest JSON, canonical (sorted keys, no whitespace), zlib-compressed (flag 0x1): format, generator,
             blobs [{offset, size, sha256, encoding?, raw_size?}] (size and SHA-256 of the bytes as stored: every
             byte of the file is checked, the unused bits of a zlib stream's last byte too), and (format 2)
             chunks [{offset, size, sha256, raw_size}] and families as columns {name, count, entries (its chunk),
             line (its first line there), dispatch (its record's chunk, -1: none), record (that line)}. An artifact
             entry: {name, variant, entry, abi, launch, provenance, binaries [{arch, kind,
             blob, launch?, abi?}], requires?, ranges?} (a binary's own launch spec and kernel parameters where its
             arch has them: KernelArtifact.per_arch; device requirements: KernelArtifact.requires; range
             constraints: KernelArtifact.ranges, canonical texts; each absent when unused). Format 1 (still read)
             held the entries in the manifest itself: ``{"artifacts":[`` then one artifact per line.

:func:`read_manifest` gives either format as one object with an "artifacts" list (every family's entries read
and checked). The manifest ends the file, so truncation is always detected. Loading parses JSON and bytes only
(no pickle, no code). Identical artifacts give identical bytes: no timestamps, artifacts sorted by (name, variant).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from ..core._reprs import clip, clip_left, listing
from ..core._reprs import size as size_text
from ..core.abi import Abi
from ..core.arch import Arch
from ..core.binary import Binary
from ..core.errors import BundleError, KernelpackError
from ..core.files import json_loads as loads  # the manifest's entries: one strict decoder (bundle_index too)
from ..core.files import no_json_constant, read_bounded
from ..core.launchspec import ArchLaunch, LaunchSpec
from ..core.records import record
from .artifact import KernelArtifact, Provenance
from .magic import MAGIC
from .merge import merge, origin, set_origin

FORMAT_VERSION = 2  # what this writer writes
READ_VERSIONS = (1, 2)  # what its readers read
_HEADER = struct.Struct("<8sIIQQ32s")
HEADER_SIZE = _HEADER.size  # 64
BLOB_ALIGN = 64
FLAG_ZLIB_MANIFEST = 0x1
FLAG_ZLIB_BLOBS = 0x2  # blob entries may say "encoding": "zlib"
KNOWN_FLAGS = FLAG_ZLIB_MANIFEST | FLAG_ZLIB_BLOBS
MAX_BLOB = 1 << 31  # bytes a compressed blob may expand to (the C library's tables hold 32-bit sizes)
MAX_MANIFEST = 256 << 20  # bytes of JSON a compressed manifest may expand to


def _canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


ARTIFACTS_HEAD = b'{"artifacts":[\n'  # how a manifest laid out one artifact per line begins (see manifest_json)


def entry_line(a: Mapping[str, Any]) -> bytes:
    """One artifact's manifest entry as one line: canonical JSON beginning with its ``name`` key
    (``{"name":"k",...}``), so a loader can group entries by family without parsing them (JSON strings hold no raw
    newline)."""
    body = _canonical_json({k: v for k, v in a.items() if k != "name"})
    return b'{"name":' + _canonical_json(a["name"]) + (b"," + body[1:] if len(body) > 2 else b"}")


def manifest_json(version: int, generator: str, blobs: list[dict[str, Any]], arts: list[dict[str, Any]]) -> bytes:
    """A format-1 manifest's JSON: one object, canonical (sorted keys, no spaces, ASCII) except that each artifact
    is on a line of its own (:func:`entry_line`), so a loader can group the artifacts by family without parsing
    them (:func:`split_manifest`). Any JSON reader reads it as the same object."""
    rest = _canonical_json({"format": version, "generator": generator, "blobs": blobs})
    if not arts:
        return _canonical_json({"format": version, "generator": generator, "blobs": blobs, "artifacts": []})
    return ARTIFACTS_HEAD + b",\n".join(entry_line(a) for a in arts) + b"\n]," + rest[1:]


def pack(blob_meta: Sequence[Mapping[str, Any]], stored: Sequence[bytes], arts: Sequence[Mapping[str, Any]],
         generator: str, dispatch: Mapping[str, bytes] | None = None, *, version: int = FORMAT_VERSION) -> bytes:
    """A bundle's bytes from its blobs as stored (``blob_meta`` gives each one's offset and entry), its artifacts'
    manifest entries (sorted by name, variant) and, per family name, its dispatch record's JSON text (format 2)."""
    out = bytearray(HEADER_SIZE)
    for meta, data in zip(blob_meta, stored):
        out += b"\0" * (int(meta["offset"]) - len(out))
        out += data
    if version == 1:
        body = manifest_json(1, generator, [dict(m) for m in blob_meta], [dict(a) for a in arts])
    else:
        chunks: list[dict[str, Any]] = []
        entries, records = _Chunks(out, chunks, CHUNK), _Chunks(out, chunks, RECORD_CHUNK)
        cols: dict[str, list[Any]] = {k: [] for k in ("name", "count", "entries", "line", "dispatch", "record")}
        for name, lines in _grouped(arts):
            chunk, line = entries.add(lines)
            record = (dispatch or {}).get(name)
            rchunk, rline = records.add([record]) if record is not None else (-1, -1)
            for k, v in zip(cols, (name, len(lines), chunk, line, rchunk, rline)):
                cols[k].append(v)
        entries.flush()
        records.flush()
        body = _canonical_json({"format": version, "generator": generator, "blobs": list(blob_meta),
                                "chunks": chunks, "families": cols})
    manifest = zlib.compress(body, 9)
    flags = FLAG_ZLIB_MANIFEST | (FLAG_ZLIB_BLOBS if any("encoding" in m for m in blob_meta) else 0)
    manifest_offset = len(out)
    out += manifest
    out[:HEADER_SIZE] = _HEADER.pack(MAGIC, version, flags, manifest_offset, len(manifest),
                                     hashlib.sha256(manifest).digest())
    return bytes(out)


def _grouped(arts: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[bytes]]]:
    """Each family's name and entry lines, in order (the artifacts are sorted: a family is one run)."""
    out: list[tuple[str, list[bytes]]] = []
    for a in arts:
        if not out or out[-1][0] != a["name"]:
            out.append((a["name"], []))
        out[-1][1].append(entry_line(a))
    return out


CHUNK = 16 << 10  # raw bytes of a stream that several families' entry lines share (a larger family's is alone)
RECORD_CHUNK = 4 << 10  # and of their dispatch records: a family's first launch expands and hashes its stream


class _Chunks:
    """Texts of one kind (entry lines, dispatch records) grouped into zlib streams of about ``limit`` bytes appended
    to ``out``, each named by its span in ``spans``: small families share a stream (a table of tens of thousands of
    one-specialization families stays small), a family's first use expands one stream."""

    def __init__(self, out: bytearray, spans: list[Any], limit: int) -> None:
        self.out, self.spans, self.limit = out, spans, limit
        self.lines: list[bytes] = []
        self.size = 0
        self.at = -1  # the index in spans of the stream being filled (reserved when it is started)

    def add(self, lines: list[bytes]) -> tuple[int, int]:
        """``lines`` in the stream being filled (a new one when they would overflow it): its index in ``spans``
        and the first line's number."""
        size = sum(map(len, lines)) + len(lines)
        if self.lines and self.size + size > self.limit:
            self.flush()
        if not self.lines:
            self.at = len(self.spans)
            self.spans.append(None)
        at = (self.at, len(self.lines))
        self.lines += lines
        self.size += size
        return at

    def flush(self) -> None:
        if not self.lines:
            return
        text = b"\n".join(self.lines)
        stored = zlib.compress(text, 9)
        self.spans[self.at] = {"offset": len(self.out), "raw_size": len(text),
                               "sha256": hashlib.sha256(stored).hexdigest(), "size": len(stored)}
        self.out += stored
        self.lines, self.size = [], 0


@record(frozen=True)
class Bundle:
    """An ordered, immutable collection of kernel artifacts, at most one per (name, variant).

    ``source``: where the bundle was read from (a path, a build step), for messages only: it is no part of the
    bundle's identity or bytes."""

    artifacts: tuple[KernelArtifact, ...]
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        arts = tuple(sorted(self.artifacts, key=lambda a: (a.name, a.variant)))
        keys = [(a.name, a.variant) for a in arts]  # sorted: a duplicate follows its twin
        dupes = sorted({f"{n}[{v}]" if v else n for (n, v), prev in zip(keys[1:], keys) if (n, v) == prev})
        if dupes:
            raise BundleError(f"two artifacts with the same name and variant: {', '.join(dupes)} (Bundle.of merges "
                              f"the archs of one kernel compiled in separate calls)")
        object.__setattr__(self, "artifacts", arts)

    @classmethod
    def of(cls, *items: KernelArtifact | Bundle | Iterable[KernelArtifact]) -> Bundle:
        """Artifacts, bundles and lists of artifacts as one bundle. Artifacts with the same name and variant are
        merged into one multi-arch artifact when they are the same kernel (entry, ABI and launch spec) built for
        different archs; otherwise refused, naming both and what differs (:mod:`kernelpack.bundle.merge`)."""
        groups: dict[tuple[str, str], list[tuple[KernelArtifact, str]]] = {}
        for i, item in enumerate(items, 1):
            if isinstance(item, KernelArtifact):
                arts, where = [item], f"argument {i}"
            elif isinstance(item, Bundle):
                arts, where = list(item.artifacts), item.source or f"argument {i}"
            elif isinstance(item, (str, bytes, os.PathLike)) or not isinstance(item, Iterable):
                raise BundleError(f"Bundle.of: argument {i} is {type(item).__name__} {clip(repr(item), 60)}; "
                                  f"expected a KernelArtifact, a Bundle or a list of artifacts (Bundle.read reads a "
                                  f"file)")
            else:
                arts, where = list(item), f"argument {i}"
            for a in arts:
                if not isinstance(a, KernelArtifact):
                    raise BundleError(f"Bundle.of: argument {i} holds {type(a).__name__} {clip(repr(a), 60)}, "
                                      f"not a KernelArtifact")
                groups.setdefault((a.name, a.variant), []).append((a, origin(a) or where))
        return cls(tuple(merge(parts) for parts in groups.values()))

    def __repr__(self) -> str:
        archs = sorted({b.target for a in self.artifacts for b in a.binaries}, key=lambda t: (t.virtual, t))
        size = sum({b.sha256: len(b.data) for a in self.artifacts for b in a.binaries}.values())  # each blob once
        where = f" from {clip_left(self.source, 80)}" if self.source else ""
        return (f"<Bundle of {len(self.artifacts)} kernel{'s' * (len(self.artifacts) != 1)} "
                f"({listing((a.label for a in self.artifacts), 100)}) for {listing(map(str, archs), 60)}, "
                f"{size_text(size)}{where}>")

    def __iter__(self) -> Iterator[KernelArtifact]:
        return iter(self.artifacts)

    def __len__(self) -> int:
        return len(self.artifacts)

    def families(self) -> dict[str, tuple[KernelArtifact, ...]]:
        """Artifacts grouped by kernel name, in name order."""
        fams: dict[str, list[KernelArtifact]] = {}
        for a in self.artifacts:
            fams.setdefault(a.name, []).append(a)
        return {k: tuple(v) for k, v in fams.items()}

    # ------------------------------------------------------------ writing

    def with_ranges(self, ranges: Mapping[str, Any]) -> Bundle:
        """This bundle with range constraints (kernelpack.launch.ranges) on the artifacts named by label
        (``name[variant]``, or ``name`` for a family with one specialization): ``{"softmax[small]": ["n_cols <=
        4096"]}``. A label naming no artifact is refused."""
        labels = {a.label for a in self.artifacts}
        unknown = sorted(set(ranges) - labels)
        if unknown:
            raise KernelpackError(f"range constraints for {', '.join(unknown)}: no such kernel in the bundle "
                                  f"(kernels: {', '.join(sorted(labels))})")
        return Bundle(tuple(a.with_ranges(ranges[a.label]) if a.label in ranges else a for a in self.artifacts))

    def to_bytes(self, *, compress: bool = True, version: int = FORMAT_VERSION) -> bytes:
        """The bundle's bytes; ``compress`` stores each binary as a zlib stream where that is smaller; ``version``
        1 writes the former layout (entries in the manifest, no dispatch records: for an older kernelpack)."""
        if version not in READ_VERSIONS:
            raise BundleError(f"bundle format version {version}: this kernelpack writes "
                              f"{' or '.join(map(str, READ_VERSIONS))}")
        from ..core.version import __version__

        blobs: list[bytes] = []  # as stored
        index: dict[str, int] = {}
        blob_meta: list[dict[str, Any]] = []
        arts: list[dict[str, Any]] = []
        offset = HEADER_SIZE
        for a in self.artifacts:
            bins = []
            own = a.arch_launches
            for b in a.binaries:
                if b.sha256 not in index:
                    offset = -(-offset // BLOB_ALIGN) * BLOB_ALIGN
                    index[b.sha256] = len(blobs)
                    stored = b.zlib if compress else b.data
                    meta: dict[str, Any] = {"offset": offset}
                    if len(stored) < len(b.data):
                        meta.update(encoding="zlib", raw_size=len(b.data))
                    else:
                        stored = b.data
                    meta.update(size=len(stored), sha256=hashlib.sha256(stored).hexdigest())
                    blobs.append(stored)
                    blob_meta.append(meta)
                    offset += len(stored)
                bins.append({"arch": str(b.arch), "kind": b.kind, "blob": index[b.sha256],
                             **(own[b.arch].to_json() if b.arch in own else {})})
            art: dict[str, Any] = {
                "name": a.name,
                "variant": a.variant,
                "entry": a.entry,
                "abi": a.abi.to_json(),
                "launch": a.launch.to_json(),
                "provenance": a.provenance.to_json(),
                "binaries": bins,
            }
            if a.requirements:
                art["requires"] = dict(a.requirements)
            if a.range_rules:
                art["ranges"] = [r.text() for r in a.range_rules]
            arts.append(art)
        records = None
        if version >= 2:
            from .index import record_of

            records = {}
            for name, fam in self.families().items():
                record = record_of(fam, lambda b: index[b.sha256])
                if record is not None:
                    records[name] = record
        return pack(blob_meta, blobs, arts, f"kernelpack {__version__}", records, version=version)

    def write(self, path: str | os.PathLike[str], *, compress: bool = True) -> Path:
        """Write atomically (temp file + rename) and return the path."""
        return write_atomic(path, self.to_bytes(compress=compress))

    # ------------------------------------------------------------ reading

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Bundle:
        """Read a ``.kpack`` file: a regular file within ``KERNELPACK_MAX_FILE_BYTES`` (``kernelpack.core.files``) whose
        header, checked before the rest is read, states the file's size."""
        source = str(path)
        data = read_bounded(path, "bundle", error=BundleError,
                            check_head=lambda head, size: check_header(head, size, source), head_size=HEADER_SIZE)
        return cls.from_bytes(data, source=source)

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "<bytes>") -> Bundle:
        manifest = read_manifest(data, source=source)
        blobs = _blobs(manifest, data, source, zlib_blobs=bool(_HEADER.unpack_from(data)[2] & FLAG_ZLIB_BLOBS))
        shared: dict[tuple[int, str, str], Binary] = {}  # one Binary per blob: its cubin is parsed once
        known = "" if source == "<bytes>" else source  # where it came from, for messages when bundles are merged
        try:
            arts = tuple(_artifact(a, blobs, shared) for a in manifest["artifacts"])
            return cls(tuple(set_origin(a, known) for a in arts) if known else arts, source=known)
        except BundleError:
            raise
        except KernelpackError as e:
            raise BundleError(f"{source}: {e.message}") from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError, RecursionError) as e:
            raise BundleError(f"{source}: malformed manifest entry: {e!r:.300}") from None


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """``data`` to ``path`` through a temp file and a rename: readers see the old file or the new one, never half."""
    import tempfile  # here: reading a bundle (kernelpack.load) imports no tempfile, shutil, random...

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def check_header(head: bytes, size: int, source: str) -> tuple[int, int, int, bytes]:
    """Check a bundle's header (its first HEADER_SIZE bytes) against the size of the whole bundle; return flags,
    manifest offset, manifest size and the manifest's SHA-256."""
    if size < HEADER_SIZE:
        raise BundleError(f"{source}: {size} bytes is too short for a kernelpack bundle (header is {HEADER_SIZE})")
    magic, version, flags, moff, msize, mhash = _HEADER.unpack_from(head)
    if magic != MAGIC:
        raise BundleError(f"{source}: not a kernelpack bundle (bad magic {magic!r})")
    if version not in READ_VERSIONS:
        newer = "newer than" if version > FORMAT_VERSION else "older than"
        raise BundleError(f"{source}: bundle format version {version} is {newer} the supported version "
                          f"{FORMAT_VERSION}; rebuild the bundle with this kernelpack or upgrade kernelpack")
    if flags & ~KNOWN_FLAGS:
        raise BundleError(f"{source}: header flags 0x{flags:x} are not defined in bundle format version {version}")
    if moff < HEADER_SIZE or moff + msize != size:
        raise BundleError(f"{source}: truncated or padded: the header says {moff + msize} bytes, the file has "
                          f"{size}")
    return flags, moff, msize, mhash


def manifest_bytes(data: bytes, *, source: str = "<bytes>") -> bytes:
    """Check the header, size and manifest hash of a bundle and return the manifest's JSON text (expanded)."""
    flags, moff, msize, mhash = check_header(data[:HEADER_SIZE], len(data), source)
    body = data[moff:moff + msize]
    if hashlib.sha256(body).digest() != mhash:
        raise BundleError(f"{source}: manifest SHA-256 mismatch (the file was altered)")
    if flags & FLAG_ZLIB_MANIFEST:
        body = _expand(body, MAX_MANIFEST, None, f"{source}: manifest", "the file was altered")
    return body


def read_manifest(data: bytes, *, source: str = "<bytes>") -> dict[str, Any]:
    """Check the header, size and manifest hash of a bundle and return the parsed manifest, with every artifact's
    entry in its "artifacts" list (format 2: each chunk read and checked, each family's entries parsed)."""
    manifest = parse_manifest(manifest_bytes(data, source=source), source)
    if manifest["format"] != 1:
        table = FamilyTable(manifest, data, source)
        arts = []
        for name in table.names:
            arts += [artifact_entry(line, name, source) for line in table.lines(name)]
            table.record(name)  # checked (every byte of the file is); read by a loader (kernelpack.launch.record)
        manifest["artifacts"] = arts
    return manifest


def parse_manifest(body: bytes, source: str) -> dict[str, Any]:
    """A manifest's JSON text parsed and its top level checked (format, blob list, artifact list (format 1) or
    family list (format 2))."""
    try:
        manifest = json.loads(body, parse_constant=no_json_constant)
    except (ValueError, RecursionError) as e:  # bad JSON, bad UTF-8, NaN/Infinity, too many digits, too deep
        raise BundleError(f"{source}: manifest is not valid JSON: {e!s:.300}") from None
    if not isinstance(manifest, dict):
        raise BundleError(f"{source}: manifest is not a JSON object")
    fmt = manifest.get("format")
    if type(fmt) is not int or fmt not in READ_VERSIONS:
        raise BundleError(f"{source}: manifest format field is {fmt!r:.40}, expected one of "
                          f"{', '.join(map(str, READ_VERSIONS))}")
    for key in ("blobs", "artifacts") if fmt == 1 else ("blobs", "chunks"):
        if not isinstance(manifest.get(key), list):
            raise BundleError(f"{source}: manifest has no '{key}' list")
    if fmt != 1 and not isinstance(manifest.get("families"), dict):
        raise BundleError(f"{source}: manifest has no 'families' object")
    return manifest


_NAMES = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*\n)*\Z")


class FamilyTable:
    """A format-2 manifest's families, checked at once (columns of one length, names C identifiers given once,
    counts positive, chunk and line numbers integers naming a chunk), each chunk read (bounds, SHA-256, expansion)
    when a family in it is first asked for. Thread-safe (a chunk read twice at once is read twice)."""

    COLUMNS = ("name", "count", "entries", "line", "dispatch", "record")

    def __init__(self, manifest: dict[str, Any], data: bytes, source: str) -> None:
        self.data, self.source = data, source
        self.chunks: list[Any] = manifest["chunks"]
        fams = manifest["families"]
        cols = [fams.get(k) for k in self.COLUMNS]
        n = len(cols[0]) if isinstance(cols[0], list) else -1
        if n < 0 or any(not isinstance(c, list) or len(c) != n for c in cols):
            raise BundleError(f"{source}: manifest families are not columns {', '.join(self.COLUMNS)} of one length")
        names, counts, *ints = cols
        joined = "".join(f"{x}\n" for x in names) if set(map(type, names)) <= {str} else ""
        if not _NAMES.match(joined) or joined.count("\n") != n:  # (a name holding a newline would pass as two)
            bad = next((x for x in names if not isinstance(x, str) or not re.fullmatch(r"[A-Za-z_]\w*", x, re.A)), None)
            raise BundleError(f"{source}: a family has no kernel name that is a C identifier (name {bad!r:.80})")
        self.pos = {x: i for i, x in enumerate(names)}
        if len(self.pos) != n:
            raise BundleError(f"{source}: the manifest lists a family twice")
        nchunks = len(self.chunks)
        for c in (counts, *ints):
            if not set(map(type, c)) <= {int}:
                raise BundleError(f"{source}: manifest family columns hold other than integers")
        if n and (min(counts) < 1 or min(ints[0]) < 0 or max(ints[0]) >= nchunks or min(ints[1]) < 0
                  or min(ints[2]) < -1 or max(ints[2]) >= nchunks):
            raise BundleError(f"{source}: a family's count, chunk or line is out of range")
        self.names: list[str] = names
        self.counts: list[int] = counts
        self._at = ints  # entries chunk, first line, dispatch chunk, record line
        self._read: dict[int, list[bytes]] = {}

    def __len__(self) -> int:
        return len(self.names)

    def _chunk(self, i: int, name: str, what: str) -> list[bytes]:
        got = self._read.get(i)
        if got is None:
            got = self._read[i] = read_span(self.chunks[i], self.data, f"{self.source}: kernel {name}: {what}").split(
                b"\n")
        return got

    def lines(self, name: str) -> list[bytes]:
        """Family ``name``'s entry lines (KeyError for a name the table lacks)."""
        i = self.pos[name]
        chunk, line = self._at[0][i], self._at[1][i]
        lines = self._chunk(chunk, name, "manifest entries")[line:line + self.counts[i]]
        if len(lines) != self.counts[i]:
            raise BundleError(f"{self.source}: kernel {name}: the manifest says {self.counts[i]} entries from line "
                              f"{line} of chunk {chunk}, which holds fewer (the file was altered)")
        return lines

    def record(self, name: str) -> bytes | None:
        """Family ``name``'s dispatch record text, None when it has none."""
        i = self.pos[name]
        chunk, line = self._at[2][i], self._at[3][i]
        if chunk < 0:
            return None
        lines = self._chunk(chunk, name, "dispatch record")
        if not 0 <= line < len(lines):
            raise BundleError(f"{self.source}: kernel {name}: its dispatch record is line {line} of chunk {chunk}, "
                              f"which holds {len(lines)} (the file was altered)")
        return lines[line]


def read_span(span: Any, data: bytes, what: str) -> bytes:
    """The text of a span of ``data`` (``{offset, size, sha256, raw_size}``: a zlib stream), its bounds, SHA-256
    and expansion checked (BundleError naming ``what``)."""
    off, size, digest, raw = _span(span, what)
    stored = _stored(data, off, size, digest, what, f"{what}: SHA-256 mismatch (the file was altered)")
    return _expand(stored, raw, raw, what, "the file was altered")


def _stored(data: bytes, off: int, size: int, digest: str, what: str, mismatch: str) -> bytes:
    """Bytes [off, off + size) of ``data`` (a blob or a chunk, as stored), inside the file after the header and
    matching their SHA-256 ``digest`` (BundleError naming ``what``, or saying ``mismatch``)."""
    if off < HEADER_SIZE or size <= 0 or off + size > len(data):
        raise BundleError(f"{what} (offset {off}, size {size}) lies outside the file")
    stored = data[off:off + size]
    if hashlib.sha256(stored).hexdigest() != digest:
        raise BundleError(mismatch)
    return stored


def _span(span: Any, what: str) -> tuple[int, int, str, int]:
    try:
        off, size, digest, raw = span["offset"], span["size"], span["sha256"], span["raw_size"]
    except (KeyError, TypeError):
        raise BundleError(f"{what}: malformed span {span!r:.200}") from None
    if (any(type(v) is not int for v in (off, size, raw)) or not isinstance(digest, str) or size <= 0
            or not 0 < raw <= MAX_MANIFEST):
        raise BundleError(f"{what}: malformed span {span!r:.200}")
    return off, size, digest, raw


_LINE_NAME = re.compile(rb'\{"name":"([A-Za-z_][A-Za-z0-9_]*)",')


def split_manifest(body: bytes, source: str) -> tuple[dict[str, Any], list[tuple[str, bytes]]] | None:
    """A manifest laid out as :func:`manifest_json` writes it, split without parsing its artifacts: the top level
    (format, generator, blobs: parsed and checked, with an empty artifact list) and each artifact's (name, JSON
    text), in order; None when ``body`` is not laid out so (an older writer's, or altered): parse it whole then.
    Each artifact's text is parsed when its family is first used (:func:`artifact_entry`)."""
    if not body.startswith(ARTIFACTS_HEAD):
        return None
    lines = body[len(ARTIFACTS_HEAD):].split(b"\n")
    if len(lines) < 2 or not lines[-1].startswith(b"],"):
        return None
    match = _LINE_NAME.match
    out: list[tuple[str, bytes]] = []
    last = len(lines) - 2
    for i, line in enumerate(lines[:-1]):
        m = match(line)
        if m is None or (i < last) != line.endswith(b","):
            return None
        out.append((m.group(1).decode(), line[:-1] if i < last else line))
    head = parse_manifest(b'{"artifacts":[]' + lines[-1][1:], source)
    return head, out


def artifact_entry(text: bytes, name: str, source: str) -> dict[str, Any]:
    """One artifact's manifest entry parsed from its JSON text (see :func:`split_manifest`); it must name ``name``."""
    try:
        a = loads(text)
    except (ValueError, RecursionError) as e:
        raise BundleError(f"{source}: kernel {name}: manifest entry is not valid JSON: {e!s:.300}") from None
    if not isinstance(a, dict) or a.get("name") != name:
        raise BundleError(f"{source}: kernel {name}: malformed manifest entry (its name is "
                          f"{a.get('name') if isinstance(a, dict) else None!r:.80})")
    return a


def _expand(stored: bytes, limit: int, exact: int | None, what: str, altered: str) -> bytes:
    """A zlib stream expanded to at most ``limit`` bytes (``exact`` bytes when given): a small file cannot claim
    gigabytes, and a stream cut short, followed by bytes or expanding to another size is refused (naming ``what``
    and, as the likely cause, ``altered``)."""
    d = zlib.decompressobj()
    try:
        out = d.decompress(stored, limit)
    except zlib.error as e:
        raise BundleError(f"{what} is not valid zlib data: {e} ({altered})") from None
    if d.unconsumed_tail and exact is None:
        raise BundleError(f"{what} expands to more than {limit} bytes")
    if exact is not None and (len(out) != exact or d.unconsumed_tail):
        raise BundleError(f"{what} does not expand to its raw_size {exact} ({altered})")
    if not d.eof or d.unused_data:
        raise BundleError(f"{what}: zlib stream is truncated or followed by extra bytes ({altered})")
    return out


def _blobs(manifest: dict[str, Any], data: bytes, source: str, *, zlib_blobs: bool) -> list[tuple[bytes, bytes | None]]:
    """Each blob's binary, and the zlib stream it was stored as (None when stored as is)."""
    return [expand_blob(i, stored, raw_size, source)
            for i, (stored, raw_size) in enumerate(stored_blobs(manifest, data, source, zlib_blobs=zlib_blobs))]


def expand_blob(i: int, stored: bytes, raw_size: int | None, source: str) -> tuple[bytes, bytes | None]:
    """Blob ``i`` as (binary, the zlib stream it was stored as or None), from what :func:`stored_blobs` gave."""
    if raw_size is None:
        return stored, None
    return _expand(stored, raw_size, raw_size, f"{source}: blob {i}", "the binary was altered"), stored


def stored_blobs(manifest: dict[str, Any], data: bytes, source: str, *,
                 zlib_blobs: bool) -> list[tuple[bytes, int | None]]:
    """Each blob as stored, hash-checked (and the padding between them), with its raw size when it is a zlib
    stream (None when stored as is): everything but the expansion, which :func:`expand_blob` does."""
    out = [check_blob(i, b, data, source, zlib_blobs=zlib_blobs) for i, b in enumerate(manifest["blobs"])]
    check_padding(manifest, data, source)
    return out


def check_padding(manifest: dict[str, Any], data: bytes, source: str) -> None:
    """The alignment padding between header, blobs, chunks and manifest is zero (blob entries checked already)."""
    spans = [(int(b["offset"]), int(b["size"])) for b in manifest["blobs"]]
    spans += [_span(c, f"{source}: chunk {i}")[:2] for i, c in enumerate(manifest.get("chunks") or ())]
    _check_padding(data, sorted(spans), source)


def check_blob(i: int, b: Any, data: bytes, source: str, *, zlib_blobs: bool) -> tuple[bytes, int | None]:
    """Blob ``i`` of ``data`` (its manifest entry ``b``) as stored, its entry, bounds and SHA-256 checked, with its
    raw size when it is a zlib stream (None when stored as is)."""
    try:
        off, size, digest = int(b["offset"]), int(b["size"]), str(b["sha256"])
        encoding = b.get("encoding")
        raw_size = int(b["raw_size"]) if encoding is not None else None
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError):
        raise BundleError(f"{source}: blob {i} entry is malformed: {b!r:.300}") from None
    blob = _stored(data, off, size, digest, f"{source}: blob {i}",
                   f"{source}: blob {i} SHA-256 mismatch (the binary was altered)")
    if encoding is not None:
        if encoding != "zlib" or not zlib_blobs:
            raise BundleError(f"{source}: blob {i} has encoding {encoding!r}; this bundle allows "
                              f"{'zlib' if zlib_blobs else 'none (header flag 0x2 is clear)'}")
        if raw_size is None or not 0 < raw_size <= MAX_BLOB:
            raise BundleError(f"{source}: blob {i} raw_size {raw_size} is outside (0, {MAX_BLOB}]")
        return blob, raw_size
    return blob, None


def _check_padding(data: bytes, spans: list[tuple[int, int]], source: str) -> None:
    """The alignment padding between header, blobs and manifest is zero: no byte of the file goes unchecked."""
    pos, moff = HEADER_SIZE, _HEADER.unpack_from(data)[3]
    for off, size in [*spans, (moff, 0)]:
        if off > pos and data.count(0, pos, off) != off - pos:
            raise BundleError(f"{source}: non-zero padding in bytes [{pos}, {off}) (the file was altered)")
        pos = max(pos, off + size)


def shared_binary(idx: int, arch: str, kind: str, blobs: Sequence[tuple[bytes, bytes | None]],
                  shared: dict[tuple[int, str, str], Binary], name: object) -> Binary:
    """The Binary of blob ``idx`` filed as ``arch`` ``kind``: one object per (blob, arch, kind) across the bundle's
    artifacts (``shared``), so each cubin is parsed once."""
    if not 0 <= idx < len(blobs):
        raise BundleError(f"kernel {name}: binary refers to blob {idx}, the bundle has {len(blobs)}")
    key = (idx, arch, kind)
    got = shared.get(key)
    if got is None:
        raw, stream = blobs[idx]
        got = shared[key] = Binary(Arch.parse(arch), raw, kind)
        if stream is not None:
            got.with_zlib(stream)
    return got


def _artifact(a: dict[str, Any], blobs: Sequence[tuple[bytes, bytes | None]],
              shared: dict[tuple[int, str, str], Binary]) -> KernelArtifact:
    bins = []
    per_arch: dict[str, ArchLaunch] = {}
    for b in a["binaries"]:
        if b.get("launch") is not None or b.get("abi") is not None:
            own = ArchLaunch.from_json(b)
            if per_arch.setdefault(str(b["arch"]), own) != own:
                raise BundleError(f"kernel {a.get('name')}: two binaries for {b['arch']} state different launch facts")
        bins.append(shared_binary(int(b["blob"]), str(b["arch"]), str(b["kind"]), blobs, shared, a.get("name")))
    return KernelArtifact(
        name=a["name"],
        entry=a["entry"],
        abi=Abi.from_json(a["abi"]),
        binaries=tuple(bins),
        launch=LaunchSpec.from_json(a["launch"]),
        provenance=Provenance.from_json(a["provenance"]),
        variant=a.get("variant", ""),
        per_arch=per_arch,
        requires=dict(a.get("requires") or {}),
        ranges=list(a.get("ranges") or ()),
    )
