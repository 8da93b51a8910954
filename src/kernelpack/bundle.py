"""The ``.kpack`` bundle: many artifacts plus a JSON manifest in one deterministic, hash-checked file.

Layout (little-endian)::

    header   64 bytes: magic b"\\x7fKPACK\\r\\n", u32 format version, u32 flags,
             u64 manifest offset, u64 manifest size, 32 bytes SHA-256 of the manifest as stored
    blobs    each binary once (deduplicated by content), each starting at a 64-byte boundary;
             stored as a zlib stream when that is smaller (blob entry "encoding": "zlib", "raw_size"; header flag
             0x2): cubins shrink 3.7-5.6x, PTX more
    manifest JSON, canonical (sorted keys, no whitespace) but for its artifacts' layout: ``{"artifacts":[`` then
             one artifact per line, each beginning with its "name" key, then ``],"blobs":...}`` (one JSON object
             for any reader; the loader groups families by those lines and parses each family's entries on first
             use, :func:`split_manifest`; manifests without that layout are parsed whole): format, generator,
             blobs [{offset, size, sha256, encoding?, raw_size?}] (size and SHA-256 of the bytes as stored: every
             byte of the file is checked, the unused bits of a zlib stream's last byte too),
             artifacts [{name, variant, entry, abi, launch, provenance, binaries [{arch, kind, blob, launch?, abi?}],
             requires?, ranges?}] (a binary's own launch spec and kernel parameters where its arch has them:
             KernelArtifact.per_arch; device requirements: KernelArtifact.requires; range constraints:
             KernelArtifact.ranges, canonical texts; each absent when unused);
             zlib-compressed when flag 0x1 is set (what the writer does: manifests repeat their keys, and a
             library of 1000 small kernels carries ~0.5 MB of them uncompressed, ~30 KB compressed)

The manifest ends the file, so truncation is always detected. Loading parses JSON and bytes only (no pickle,
no code). Identical artifacts give identical bytes: no timestamps, artifacts sorted by (name, variant).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._reprs import clip, clip_left, listing
from ._reprs import size as size_text
from .abi import Abi
from .arch import Arch
from .artifact import ArchLaunch, Binary, KernelArtifact, LaunchSpec, Provenance
from .errors import BundleError, KernelpackError
from .files import read_bounded
from .merge import merge, origin, set_origin

MAGIC = b"\x7fKPACK\r\n"
FORMAT_VERSION = 1
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


def manifest_json(version: int, generator: str, blobs: list[dict[str, Any]], arts: list[dict[str, Any]]) -> bytes:
    """The manifest's JSON: one object, canonical (sorted keys, no spaces, ASCII) except that each artifact is on a
    line of its own and begins with its ``name`` key (``{"name":"k",...}``), so a loader can group the artifacts by
    family without parsing them (:func:`split_manifest`; JSON strings hold no raw newline). Any JSON reader reads
    it as the same object."""
    rest = _canonical_json({"format": version, "generator": generator, "blobs": blobs})
    if not arts:
        return _canonical_json({"format": version, "generator": generator, "blobs": blobs, "artifacts": []})
    lines = []
    for a in arts:
        body = _canonical_json({k: v for k, v in a.items() if k != "name"})
        lines.append(b'{"name":' + _canonical_json(a["name"]) + (b"," + body[1:] if len(body) > 2 else b"}"))
    return ARTIFACTS_HEAD + b",\n".join(lines) + b"\n]," + rest[1:]


@dataclass(frozen=True)
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
        different archs; otherwise refused, naming both and what differs (:mod:`kernelpack.merge`)."""
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

    def to_bytes(self, *, compress: bool = True) -> bytes:
        """The bundle's bytes; ``compress`` stores each binary as a zlib stream where that is smaller."""
        from . import __version__

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
        manifest = zlib.compress(manifest_json(FORMAT_VERSION, f"kernelpack {__version__}", blob_meta, arts), 9)
        flags = FLAG_ZLIB_MANIFEST | (FLAG_ZLIB_BLOBS if any("encoding" in m for m in blob_meta) else 0)
        out = bytearray(_HEADER.pack(MAGIC, FORMAT_VERSION, 0, 0, 0, b"\0" * 32))
        for meta, data in zip(blob_meta, blobs):
            out += b"\0" * (meta["offset"] - len(out))
            out += data
        manifest_offset = len(out)
        out += manifest
        out[:HEADER_SIZE] = _HEADER.pack(MAGIC, FORMAT_VERSION, flags, manifest_offset, len(manifest),
                                         hashlib.sha256(manifest).digest())
        return bytes(out)

    def write(self, path: str | os.PathLike[str], *, compress: bool = True) -> Path:
        """Write atomically (temp file + rename) and return the path."""
        return write_atomic(path, self.to_bytes(compress=compress))

    # ------------------------------------------------------------ reading

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Bundle:
        """Read a ``.kpack`` file: a regular file within ``KERNELPACK_MAX_FILE_BYTES`` (``kernelpack.files``) whose
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
    if version != FORMAT_VERSION:
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
    """Check the header, size and manifest hash of a bundle and return the parsed manifest."""
    return parse_manifest(manifest_bytes(data, source=source), source)


def parse_manifest(body: bytes, source: str) -> dict[str, Any]:
    """A manifest's JSON text parsed and its top level checked (format, blob and artifact lists)."""
    try:
        manifest = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:  # bad JSON, bad UTF-8, NaN/Infinity, too many digits, too deep
        raise BundleError(f"{source}: manifest is not valid JSON: {e!s:.300}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
        raise BundleError(f"{source}: manifest format field is {manifest.get('format')!r}, expected {FORMAT_VERSION}"
                          if isinstance(manifest, dict) else f"{source}: manifest is not a JSON object")
    for key in ("blobs", "artifacts"):
        if not isinstance(manifest.get(key), list):
            raise BundleError(f"{source}: manifest has no '{key}' list")
    return manifest


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


def loads(text: bytes) -> Any:
    """JSON text (UTF-8) parsed as the manifest is: NaN and Infinity refused (one decoder, made once)."""
    global _DECODER
    if _DECODER is None:
        _DECODER = json.JSONDecoder(parse_constant=_no_constant)
    return _DECODER.decode(text.decode())


_DECODER: json.JSONDecoder | None = None


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


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


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
    """The alignment padding between header, blobs and manifest is zero (blob entries checked already)."""
    _check_padding(data, sorted((int(b["offset"]), int(b["size"])) for b in manifest["blobs"]), source)


def check_blob(i: int, b: Any, data: bytes, source: str, *, zlib_blobs: bool) -> tuple[bytes, int | None]:
    """Blob ``i`` of ``data`` (its manifest entry ``b``) as stored, its entry, bounds and SHA-256 checked, with its
    raw size when it is a zlib stream (None when stored as is)."""
    try:
        off, size, digest = int(b["offset"]), int(b["size"]), str(b["sha256"])
        encoding = b.get("encoding")
        raw_size = int(b["raw_size"]) if encoding is not None else None
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError):
        raise BundleError(f"{source}: blob {i} entry is malformed: {b!r:.300}") from None
    if off < HEADER_SIZE or size <= 0 or off + size > len(data):
        raise BundleError(f"{source}: blob {i} (offset {off}, size {size}) lies outside the file")
    blob = data[off:off + size]
    if hashlib.sha256(blob).hexdigest() != digest:
        raise BundleError(f"{source}: blob {i} SHA-256 mismatch (the binary was altered)")
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
