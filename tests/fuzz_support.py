"""Mutation fuzzing of kernelpack's three parsers (cubin reader, bundle loader, embedded-manifest reader), shared by
tests/test_fuzz_parsers.py (bounded, in the suite) and scripts/fuzz.py (long campaigns).

Inputs are real files (NVRTC cubins, a compiled bundle, a built ``.so`` and ``.a``) mutated by hypothesis: bit flips,
byte sets, truncations, splices, edits of length/offset fields, and JSON-structure edits of a bundle manifest with the
SHA-256 recomputed so the loader gets past the hash check. The only outcomes allowed are a parse or the parser's
documented exception; every example runs under a time box (SIGALRM) and an address-space cap (RLIMIT_AS).

Dispatch records (what the C launcher reads) are forged through the same hash-recomputing writer
(:func:`edit_family_stream`): at random (the ``dispatch-record`` target, boundary integers among its values) and by a
deterministic sweep (:func:`record_sweep`) of every integer field of records holding a C slot of each kind through the
values that wrap each width the launcher stores them in.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from kernelpack.bundle.embedded import read_embedded_bundle
from kernelpack.bundle.kpack import FLAG_ZLIB_MANIFEST, HEADER_SIZE, MAGIC, Bundle, read_manifest
from kernelpack.core.cubin import read_cubin
from kernelpack.core.errors import BundleError, CubinError, DecompressError, KernelpackError

ALLOWED: dict[str, tuple[type[BaseException], ...]] = {
    "cubin": (CubinError,),
    "bundle": (BundleError,),
    "embedded": (BundleError, KernelpackError),
    "load": (KernelpackError,),  # a bundle loaded lazily, its every binary then loaded: any error naming the cause
    "decoder": (DecompressError,),  # the zstd and LZ4 decoders against the reference libraries (fuzz_decoders.py)
}
TIME_BOX_S = 5.0
MEMORY_HEADROOM = 1 << 30  # the parser may allocate at most this much beyond what the process already maps


class Hang(Exception):
    """An example ran past its time box."""


@dataclass(frozen=True, repr=False)
class Seeds:
    cubins: tuple[bytes, ...]
    bundle: bytes
    shared: bytes  # libNAME.so with the bundle in section .kpack
    static: bytes  # libNAME.a

    def __repr__(self) -> str:
        return f"Seeds({len(self.cubins)} cubins, bundle {len(self.bundle)} B, .so {len(self.shared)} B, " \
               f".a {len(self.static)} B)"


def make_seeds(out: Path) -> Seeds:
    """Real files: the demo kernels compiled by NVRTC/nvcc for two archs, their bundle, and a library built from it."""
    from kernelpack.cli.demo import compile_examples
    from kernelpack.clib import Library
    from kernelpack.core import config

    with config.override(cache_dir=out / "cache"):
        bundle = compile_examples(("sm_80", "sm_90a"))
    lib = Library("fz", *bundle.artifacts).build(out / "lib")
    cubins = tuple(sorted({b.data for a in bundle for b in a.binaries if b.kind == "cubin"}))
    return Seeds(cubins, bundle.to_bytes(), lib.shared.read_bytes(), lib.static.read_bytes())


@contextmanager
def bounded(seconds: float = TIME_BOX_S, headroom: int = MEMORY_HEADROOM) -> Iterator[None]:
    """Raise :class:`Hang` after ``seconds`` and MemoryError past ``headroom`` more bytes of address space (main
    thread only: SIGALRM)."""

    def alarm(signum: int, frame: Any) -> None:
        raise Hang(f"example ran past its {seconds} s time box")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _mapped_bytes() + headroom
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _mapped_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


# ------------------------------------------------------------------ mutations


def _flip(data: bytes, pos: int, bit: int) -> bytes:
    if not data:
        return data
    b = bytearray(data)
    b[pos % len(b)] ^= 1 << bit
    return bytes(b)


def _set(data: bytes, pos: int, value: int) -> bytes:
    if not data:
        return data
    b = bytearray(data)
    b[pos % len(b)] = value
    return bytes(b)


def _field(data: bytes, pos: int, width: int, value: int) -> bytes:
    """Overwrite a little-endian field (a length, offset or count) with an edge value."""
    if len(data) < width:
        return data
    pos = pos % (len(data) - width + 1)
    return data[:pos] + (value % (1 << (8 * width))).to_bytes(width, "little") + data[pos + width:]


def _splice(data: bytes, other: bytes, a: int, b: int, c: int) -> bytes:
    if not data or not other:
        return data
    a, b = sorted((a % (len(data) + 1), b % (len(data) + 1)))
    c = c % len(other)
    return data[:a] + other[c:c + (b - a) + (c % 97)] + data[b:]


_EDGE = st.sampled_from([0, 1, 0x3F, 0x40, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 2**63 - 1, 2**64 - 1, -1])
_POS = st.integers(0, 2**31)
EDIT = st.one_of(
    st.tuples(st.just("flip"), _POS, st.integers(0, 7)),
    st.tuples(st.just("set"), _POS, st.integers(0, 255)),
    st.tuples(st.just("field"), _POS, st.sampled_from([2, 4, 8]), st.one_of(_EDGE, st.integers(0, 2**32))),
    st.tuples(st.just("truncate"), _POS),
    st.tuples(st.just("splice"), _POS, _POS, _POS),
)
# Where ELF headers keep their counts and offsets: most damage concentrates there.
_ELF_FIELDS = ((0x20, 8), (0x28, 8), (0x36, 2), (0x38, 2), (0x3A, 2), (0x3C, 2), (0x3E, 2))
HEADER_EDIT = st.tuples(st.just("elf"), st.sampled_from(_ELF_FIELDS), st.one_of(_EDGE, st.integers(0, 2**16)))


def apply(data: bytes, edits: list[tuple[Any, ...]], other: bytes) -> bytes:
    for e in edits:
        kind = e[0]
        if kind == "flip":
            data = _flip(data, e[1], e[2])
        elif kind == "set":
            data = _set(data, e[1], e[2])
        elif kind == "field":
            data = _field(data, e[1], e[2], e[3])
        elif kind == "truncate":
            data = data[:e[1] % (len(data) + 1)]
        elif kind == "splice":
            data = _splice(data, other, e[1], e[2], e[3])
        elif kind == "elf":
            (off, width), value = e[1], e[2]
            if len(data) >= off + width:
                data = data[:off] + (value % (1 << (8 * width))).to_bytes(width, "little") + data[off + width:]
    return data


# ------------------------------------------------------------------ manifest edits (hash recomputed)

JSON_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.sampled_from(["__reduce__", "os.system", "eval", "cposix\nsystem\n", "sm_90a", "cubin"]),
)
JSON_VALUE = st.recursive(JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                          max_leaves=12)
MANIFEST_EDIT = st.tuples(st.integers(0, 2**31), st.sampled_from(["replace", "delete", "wrap", "dup"]), JSON_VALUE)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def edit_manifest(manifest: Any, edits: list[tuple[int, str, Any]]) -> Any:
    """Replace, delete, wrap in a list, or duplicate the value at a chosen path of the JSON tree."""
    root = json.loads(json.dumps(manifest))
    for pick, op, value in edits:
        paths = [p for p in _paths(root) if p]
        if not paths:
            return value
        path = paths[pick % len(paths)]
        parent = root
        for k in path[:-1]:
            parent = parent[k]
        key = path[-1]
        if op == "replace":
            parent[key] = value
        elif op == "delete":
            del parent[key]
        elif op == "wrap":
            parent[key] = [parent[key]]
        elif isinstance(parent, list):
            parent.append(parent[key])
        else:
            parent[f"{key}_"] = parent[key]
    return root


def forge(bundle: bytes, body: bytes, moff: int | None = None) -> bytes:
    """``bundle`` with its manifest replaced by ``body`` and the header (size, SHA-256) made consistent (``moff``:
    where the manifest begins, when not where the header says)."""
    _, version, flags, was, _, _ = struct.unpack_from("<8sIIQQ32s", bundle)
    moff = was if moff is None else moff
    if flags & FLAG_ZLIB_MANIFEST:
        body = zlib.compress(body)
    head = struct.pack("<8sIIQQ32s", MAGIC, version, flags, moff, len(body), hashlib.sha256(body).digest())
    return head + bundle[HEADER_SIZE:moff] + body


def manifest_of(bundle: bytes) -> Any:
    """The whole manifest (every artifact's entry in "artifacts"), less the family table and chunks that hold a
    format-2 bundle's entries: :func:`repack` writes those again from the artifacts."""
    return {k: v for k, v in read_manifest(bundle).items() if k not in ("families", "chunks")}


def repack(bundle: bytes, manifest: Any, version: int | None = None) -> bytes:
    """``bundle`` with its manifest replaced by ``manifest`` (a whole one, as :func:`manifest_of` gives, possibly
    edited), the header made consistent; its blobs kept as they are. Format 1 (the default for a format-1
    ``bundle``): the manifest itself, laid out as its writer does where its shape allows (:func:`laid_out`). Format
    2: the artifacts, grouped by name, written as family streams after the blobs, each hash-consistent, and the
    manifest naming them (artifacts that are not objects with a string name are left out)."""
    from kernelpack.bundle.kpack import pack

    _, was, flags, moff, _, _ = struct.unpack_from("<8sIIQQ32s", bundle)
    version = was if version is None else version
    if version == 1 or not isinstance(manifest, dict) or not isinstance(manifest.get("artifacts"), list):
        if version == 1:
            bundle = bundle[:8] + struct.pack("<I", 1) + bundle[12:]
        return forge(bundle, laid_out(manifest) if version == 1 else encode(manifest))
    blobs = read_manifest(bundle)["blobs"]
    end = max((b["offset"] + b["size"] for b in blobs), default=HEADER_SIZE)
    arts = [a for a in manifest["artifacts"] if isinstance(a, dict) and isinstance(a.get("name"), str)]
    packed = pack([], [], arts, str(manifest.get("generator")), version=2)  # the family streams and table
    pmoff = struct.unpack_from("<Q", packed, 16)[0]
    written = json.loads(zlib.decompress(packed[pmoff:]))
    for span in written["chunks"]:
        span["offset"] += end - HEADER_SIZE
    body = {k: v for k, v in manifest.items() if k != "artifacts"}
    body.update(chunks=written["chunks"], families=written["families"])
    head = struct.pack("<8sIIQQ32s", MAGIC, 2, flags, 0, 0, b"\0" * 32)
    streams = packed[HEADER_SIZE:pmoff]
    return forge(head + bundle[HEADER_SIZE:end] + streams, encode(body), moff=end + len(streams))


def edit_family_stream(bundle: bytes, name: str, edit: Callable[[bytes], bytes], key: str = "entries") -> bytes:
    """A format-2 ``bundle`` with family ``name``'s entry lines (``key`` "entries", as many lines again) or its
    dispatch record (``key`` "dispatch", one line) replaced by ``edit`` of their text: their chunk written again
    where the manifest was (its old bytes zeroed), the manifest's span and the header made consistent: an entry
    altered with every hash intact."""
    _, version, flags, moff, msize, _ = struct.unpack_from("<8sIIQQ32s", bundle)
    table = json.loads(zlib.decompress(bundle[moff:moff + msize]))
    fams = table["families"]
    i = fams["name"].index(name)
    where = ("entries", "line") if key == "entries" else ("dispatch", "record")
    chunk, line = fams[where[0]][i], fams[where[1]][i]
    count = fams["count"][i] if key == "entries" else 1
    span = table["chunks"][chunk]
    lines = zlib.decompress(bundle[span["offset"]:span["offset"] + span["size"]]).split(b"\n")
    new = edit(b"\n".join(lines[line:line + count])).split(b"\n")
    assert len(new) == count, "an edit keeps the number of lines"
    lines[line:line + count] = new
    text = b"\n".join(lines)
    stored = zlib.compress(text, 9)
    data = bytearray(bundle[:moff])
    data[span["offset"]:span["offset"] + span["size"]] = bytes(span["size"])
    table["chunks"][chunk] = {"offset": moff, "raw_size": len(text), "sha256": hashlib.sha256(stored).hexdigest(),
                              "size": len(stored)}
    return forge(bytes(data) + stored, encode(table), moff=moff + len(stored))


def encode(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


# ------------------------------------------------------------------ targets


def parse_cubin(data: bytes) -> None:
    cubin = read_cubin(data)
    assert len(cubin.kernels) >= 0  # every kernel's records (read when first asked for)
    repr(cubin)  # the toolkit version too


def parse_bundle(data: bytes) -> None:
    Bundle.from_bytes(data)


@contextmanager
def _as_file(data: bytes) -> Iterator[str]:
    """``data`` in a temporary ``.kpack`` file (removed after)."""
    fd, name = tempfile.mkstemp(suffix=".kpack", prefix="kpfuzz-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield name
    finally:
        os.unlink(name)


def load_and_preload(data: bytes) -> None:
    """``kernelpack.load`` of ``data`` (lazily, as users load), then every family built and every binary it can run
    on device 0 loaded (:meth:`KernelModule.preload`: the path a first launch takes, per specialization). Needs a
    driver: the tests' fake, installed by the caller."""
    import kernelpack

    with _as_file(data) as name:
        mod = kernelpack.load(name)
        for family in mod.__all__:
            mod[family].family.preload(0)


def load_and_launch(data: bytes) -> None:
    """``kernelpack.load`` of ``data`` lazily, then each family launched once with integer arguments (256-byte
    aligned addresses and counts) through the C launcher where it takes the family, as a process's first launch
    does, and every binary loaded (:meth:`KernelModule.preload`). Needs the tests' fake driver installed."""
    import kernelpack

    with _as_file(data) as name:
        mod = kernelpack.load(name)
        for family in mod.__all__:
            fn = mod[family]
            try:
                fn(*[0x10000] * len(fn.family.arg_names), grid=1, block=32)
            except KernelpackError:
                pass  # an argument that does not fit (the fuzzed record may say anything): refused, not packed
            fn.family.preload(0)


def laid_out(manifest: Any) -> bytes:
    """``manifest`` as this writer lays it out (one artifact per line: the loader's cut-by-keys path) where its shape
    allows, else canonical JSON (the loader's parse-whole path)."""
    if (isinstance(manifest, dict) and isinstance(manifest.get("artifacts"), list) and manifest["artifacts"]
            and all(isinstance(a, dict) and isinstance(a.get("name"), str) for a in manifest["artifacts"])):
        from kernelpack.bundle.kpack import manifest_json

        return manifest_json(manifest.get("format"), manifest.get("generator"), manifest.get("blobs"),
                             manifest["artifacts"])
    return encode(manifest)


def parse_embedded(data: bytes, suffix: str) -> None:
    fd, name = tempfile.mkstemp(suffix=suffix, prefix="kpfuzz-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        read_embedded_bundle(name)
    finally:
        os.unlink(name)


def check(target: str, fn: Callable[[], object]) -> str:
    """Run one example; return "parsed" (or the outcome the runner names), or "refused"; raise anything else (an
    undocumented exception, a hang, a MemoryError) as the finding."""
    try:
        with bounded():
            outcome = fn()
    except ALLOWED[target]:
        return "refused"
    return outcome if isinstance(outcome, str) else "parsed"


# ------------------------------------------------------------------ dispatch records: every integer at its boundaries

# Values around every width a record's integers are stored in (int8/16/32/64, their unsigned kinds) and past them
BOUNDARY = (-(2**63) - 1, -(2**63), -(2**31) - 1, -(2**31), -(2**15) - 1, -(2**15), -129, -128, -2, -1, 0, 1, 127, 128,
            255, 256, 2**15 - 1, 2**15, 2**15 + 1, 2**16 - 1, 2**16, 2**16 + 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
            2**32 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64)
# the suite's share: a value that wraps at each width (int16 to negative, uint16 to 1, int32, uint32 to 1), one whose
# sum with an offset overflows int64, one past int64, and -1
CI_BOUNDARY = (-1, 2**15, 2**16 + 1, 2**31, 2**32 + 1, 2**63 - 1, 2**63)
HEX_BOUNDARY = ("7fff", "8000", "8001", "ffff", "7fffffff", "80000000", "ffffffff")  # what a hex text can hold
DYN = -(2**63)  # a tensor mode passed at run time (KP_DYN)
# One C slot of each kind (Plan.to_c's rows) for a family of 4 arguments (pointer, pointer, bytes, int), each made a
# family's only plan, with the record's other integers (grid program, launch facts, binaries, requirements) beside it
SLOT_KINDS: dict[str, list[Any]] = {
    "ptr": [1, 0, 0, 8, 11, 16, 1, None, []],
    "scalar": [2, 3, 8, 4, 3, 1, 4, None, [[-1, 0, 1 << 20]]],
    "bytes": [4, 2, 16, 12, 0, 1, 1, None, []],
    "null": [0, -1, 32, 8, 0, 1, 1, None, []],
    "tensor": [3, 1, 40, 24, 11, 16, 1, [[DYN, 64], [DYN, 1], 0, [8, -1], [16, -1], 3, 4], [[0, 1, 1 << 20]]],
    "desc": [6, 2, 64, 128, 11, 1, 1, [1, 2, 7, 4, 0, 0, [16, 16]], [[1, 1, 1 << 20]]],
    "desc_field": [7, 2, 192, 4, 3, 1, 1, [0, 1, 2], []],
    "device": [8, 0, 200, 4, 3, 1, 1, None, []],
    "list": [9, 0, 0, 8, 11, 16, 1, [1, 3, -(1 << 31), (1 << 31) - 1, [DYN], [1], [4], [1], [0]], []],
    "list_count": [10, 0, 8, 4, 3, 1, 1, None, []],
}
GRID = [[[0, 1, 0]], [[1, 8, 3], [0, 64, 0], [6, 0, 0]], [[0, 1, 0]]]  # (1, ceil_div(the int at offset 8, 64), 1)
FACTS = [False, False, [32, 1, 1], [32, 1, 1], 1024, [1, 1, 1], [1, 1, 1], 0, 0]  # every launch fact set
SWEEP_FAMILY = "affine"  # of the seeds: x, y (pointers), p (12 bytes), n (int)


def seed_record(seeds: Seeds, family: str = SWEEP_FAMILY) -> bytes:
    """The dispatch record of the seed bundle's ``family``."""
    from kernelpack.bundle.index import BundleIndex

    record = BundleIndex(seeds.bundle, "seeds")._fams.record(family)
    assert record is not None, f"the seed family {family} has a dispatch record"
    return bytes(record)


def sweep_base(record: bytes, kind: str) -> dict[str, Any]:
    """A family's dispatch record made to hold slot ``kind`` as its one plan, with a grid program, every launch fact,
    a device role and a device requirement: a well-formed record whose integers the sweep sets one at a time."""
    doc = json.loads(record)
    doc.update(slots=[SLOT_KINDS[kind]], plans=["0000"], grids=[[0, GRID]], facts=[FACTS],
               requires=[*doc["requires"], [["sm_count", 132]]], roles=[[0, ["sm_count"]]] if kind == "device" else [])
    return doc


def _int_paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Where ``obj`` holds an int (not a bool): every integer field of a record."""
    if type(obj) is int:
        yield prefix
    elif isinstance(obj, (list, dict)):
        for k, v in (obj.items() if isinstance(obj, dict) else enumerate(obj)):
            yield from _int_paths(v, (*prefix, k))


def _set_path(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    doc = json.loads(json.dumps(doc))
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return doc


def record_sweep(record: bytes, values: tuple[int, ...] = BOUNDARY,
                 hex_values: tuple[str, ...] = HEX_BOUNDARY) -> Iterator[tuple[str, str, bytes]]:
    """Every forgery of the sweep, as (slot kind, field, record text): each integer of each slot kind's record
    (:func:`sweep_base`; the fields outside the slot with the first kind only) set to each of ``values``, and each
    4-digit group of the record's hex texts (its plan, its integer columns) to each of ``hex_values``."""
    for n, kind in enumerate(SLOT_KINDS):
        base = sweep_base(record, kind)
        for path in _int_paths(base):
            if n == 0 or path[0] == "slots":
                for value in values:
                    yield kind, "/".join(map(str, path)), encode(_set_path(base, path, value))
        if n:
            continue
        ints = base["specs"]["ints"]
        for at in range(0, len(ints), 4):
            for h in hex_values:  # 8 digits: the whole column is written with 8
                text = ints[:at] + h + ints[at + 4:] if len(h) == 4 else "".join(
                    h if k == at else "0000" + ints[k:k + 4] for k in range(0, len(ints), 4))
                yield kind, f"specs/ints/{at // 4}", encode(_set_path(base, ("specs", "ints"), text))
        for h in hex_values:
            if len(h) == 4:
                yield kind, "plans/0", encode(_set_path(base, ("plans", 0), h))
            yield kind, "plans/0 (a list)", encode(_set_path(base, ("plans", 0), [int(h, 16)]))


def launch_one(data: bytes, family: str) -> None:
    """``kernelpack.load`` of ``data`` lazily, then ``family`` launched once with integer arguments through the C
    launcher (as :func:`load_and_launch` does each family) and its every binary loaded."""
    import kernelpack

    with _as_file(data) as name:
        fn = kernelpack.load(name)[family]
        try:
            fn(*[0x10000] * len(fn.family.arg_names), grid=1, block=32)
        except KernelpackError:
            pass  # an argument that does not fit (the record may say anything): refused, not packed
        fn.family.preload(0)


def with_record(seeds: Seeds, record: bytes, family: str = SWEEP_FAMILY) -> bytes:
    """The seed bundle with ``family``'s dispatch record replaced by ``record``, written through the hash-recomputing
    writer (:func:`edit_family_stream`): every hash consistent, so the loader reaches the record's parsers."""
    return edit_family_stream(seeds.bundle, family, lambda _: record, key="dispatch")


def sweep_input(seeds: Seeds, record: bytes) -> None:
    """One forgery of the sweep, loaded and launched."""
    launch_one(with_record(seeds, record), SWEEP_FAMILY)


# ------------------------------------------------------------------ the fuzz targets: (parser, strategy, runner)


def _cubin(seeds: Seeds, args: tuple[int, list[Any]]) -> None:
    which, edits = args
    data, other = seeds.cubins[which % len(seeds.cubins)], seeds.cubins[(which + 1) % len(seeds.cubins)]
    parse_cubin(apply(data, edits, other))


def _bundle_bytes(seeds: Seeds, edits: list[Any]) -> None:
    parse_bundle(apply(seeds.bundle, edits, seeds.cubins[0]))


def _bundle_manifest(seeds: Seeds, args: tuple[int, list[Any]]) -> None:
    version, edits = args
    parse_bundle(repack(seeds.bundle, edit_manifest(manifest_of(seeds.bundle), edits), version))


def _bundle_load(seeds: Seeds, args: tuple[str, list[Any]]) -> None:
    layout, edits = args  # format 2, or format 1 laid out one artifact per line, or as one canonical JSON text
    edited = edit_manifest(manifest_of(seeds.bundle), edits)
    if layout == "families":
        load_and_preload(repack(seeds.bundle, edited, 2))
    else:
        old = repack(seeds.bundle, {}, 1)  # the header's version 1
        load_and_preload(forge(old, laid_out(edited) if layout == "lines" else encode(edited)))


def _dispatch_record(seeds: Seeds, args: tuple[int, list[Any]]) -> None:
    """A family's dispatch record (or one of the sweep's, holding a slot of each kind: :func:`sweep_base`), its JSON
    edited, written with every hash consistent, loaded and every family launched."""
    which, edits = args
    fams = read_manifest(seeds.bundle)["families"]
    names = [n for n, c in zip(fams["name"], fams["dispatch"]) if c >= 0]
    kinds = list(SLOT_KINDS)
    pick = which % (len(names) + len(kinds))
    name = names[pick] if pick < len(names) else SWEEP_FAMILY
    base = None if pick < len(names) else sweep_base(seed_record(seeds), kinds[pick - len(names)])
    load_and_launch(edit_family_stream(
        seeds.bundle, name, lambda text: encode(edit_manifest(json.loads(text) if base is None else base, edits)),
        key="dispatch"))


def _embedded_bytes(seeds: Seeds, args: tuple[bool, list[Any]]) -> None:
    static, edits = args
    parse_embedded(apply(seeds.static if static else seeds.shared, edits, seeds.bundle), ".a" if static else ".so")


def _embedded_manifest(seeds: Seeds, args: tuple[bool, list[Any]]) -> None:
    static, edits = args
    lib = seeds.static if static else seeds.shared
    forged = repack(seeds.bundle, edit_manifest(manifest_of(seeds.bundle), edits))
    start = lib.index(seeds.bundle)
    # same length keeps the ELF/ar structure intact (a longer manifest is cut, a shorter one leaves old bytes)
    data = lib[:start] + forged[:len(seeds.bundle)].ljust(len(seeds.bundle), b"\0") + lib[start + len(seeds.bundle):]
    parse_embedded(data, ".a" if static else ".so")


# a record's edits: any JSON value, or (as often) an integer at a width's boundary, anywhere in the record
RECORD_EDIT = st.tuples(st.integers(0, 2**31), st.sampled_from(["replace", "delete", "wrap", "dup"]),
                        st.one_of(JSON_VALUE, st.sampled_from(BOUNDARY)))
_BYTE_EDITS = st.lists(st.one_of(EDIT, HEADER_EDIT), min_size=1, max_size=5)
TARGETS: dict[str, tuple[str, st.SearchStrategy[Any], Callable[[Seeds, Any], None]]] = {
    "cubin": ("cubin", st.tuples(st.integers(0, 10), _BYTE_EDITS), _cubin),
    "bundle-bytes": ("bundle", st.lists(EDIT, min_size=1, max_size=4), _bundle_bytes),
    "bundle-manifest": ("bundle", st.tuples(st.sampled_from([1, 2]), st.lists(MANIFEST_EDIT, min_size=1, max_size=3)),
                        _bundle_manifest),
    "bundle-load": ("load", st.tuples(st.sampled_from(["families", "lines", "whole"]),
                                      st.lists(MANIFEST_EDIT, min_size=1, max_size=3)), _bundle_load),
    "dispatch-record": ("load", st.tuples(st.integers(0, 2**16), st.lists(RECORD_EDIT, min_size=1, max_size=3)),
                        _dispatch_record),
    "embedded-bytes": ("embedded", st.tuples(st.booleans(), _BYTE_EDITS), _embedded_bytes),
    "embedded-manifest": ("embedded", st.tuples(st.booleans(), st.lists(MANIFEST_EDIT, min_size=1, max_size=2)),
                          _embedded_manifest),
}
