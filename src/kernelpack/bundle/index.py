"""A ``.kpack`` bundle read for loading: its manifest checked at once, its kernels built family by family on first
use, each specialization's artifact and binary on its own first use.

``BundleIndex(data, source)`` checks what proves the manifest is the one written (header, size, the manifest's
SHA-256, its top level) and finds each family's entries: in format 2 the manifest's family table names the chunk
and lines of each (a chunk is hash-checked and expanded when a family in it is first used), in format 1 the
manifest's artifact lines are grouped by family name; nothing else. A format-2 family's first launches read its
dispatch record (:meth:`BundleIndex.family_record`, :mod:`kernelpack.launch.record`) and the binary they run
(:meth:`BundleIndex.record_binary`); what follows is how a family is built from its entries when it is needed
whole. Each blob's bounds, SHA-256 and expansion are checked when a launch first needs that blob (a blob altered
after the build fails then, naming the kernel; :meth:`BundleIndex.verify`, i.e. ``kernelpack.load(...,
verify=True)``, checks every blob, chunk and record and the padding between them at load, as ``Bundle.read`` does).

A family's first use (:meth:`BundleIndex.family_specs`) reads of each entry only what dispatch needs -- its kernel
parameters, launch spec, binaries' archs, range constraints and device requirements -- as :class:`SpecSource`
rows; each distinct text of those is parsed once per bundle (the entries of a family repeat most of them), so a
family of 100 specializations costs what its distinct parameter lists cost. A launch that first chooses a
specialization reads only the binary it runs (:meth:`SpecSource.binary`: the entry symbol cut from the line, that
blob checked and expanded) and verifies that cubin against the kernel parameters it launches with
(:meth:`SpecSource.verify_binary`, the check :func:`kernelpack.bundle.artifact.verify_binary` an artifact makes); the
full
:class:`KernelArtifact` (its provenance, every binary) is built only when asked for (:meth:`SpecSource.artifact`:
docs, ``module.bundle``; its cubins verified on first use, :func:`kernelpack.bundle.artifact.deferred_verification`).
The build verified everything, and the hashes prove the bytes unchanged. ``family(name)`` builds every artifact
of a family (``module.bundle``, ``help()``).
"""

from __future__ import annotations

import gc
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..core.abi import Abi, param_from_json
from ..core.arch import Arch
from ..core.binary import Binary
from ..core.errors import BundleError, KernelpackError
from ..core.launchspec import ArchLaunch, LaunchSpec
from ..launch import ranges as ranges_model
from ..launch.device import normalize_requires
from ..launch.facts import layout_index, layout_key, layouts_of, plans
from ..launch.family import plan_specificity
from ..launch.plan import Plan
from . import kpack as bd
from .artifact import KernelArtifact, check_launch, deferred_verification, verify_binary
from .kpack import _HEADER, FLAG_ZLIB_BLOBS, Bundle, _artifact, check_blob, expand_blob
from .merge import set_origin

if TYPE_CHECKING:
    from ..launch.family import Specificity
    from ..launch.record import FamilyRecord

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused (as it was before, after): JSON parsing creates no cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Blobs(Sequence[tuple[bytes, "bytes | None"]]):
    """The bundle's blobs, each checked (bounds, SHA-256, encoding) and expanded on first access (under the index's
    lock)."""

    def __init__(self, entries: list[Any], data: bytes, source: str, zlib_blobs: bool) -> None:
        self._entries = entries
        self._data = data
        self._done: dict[int, tuple[bytes, bytes | None]] = {}
        self._source = source
        self._zlib = zlib_blobs

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, i: Any) -> Any:
        if not isinstance(i, int):
            raise TypeError("blob index must be an int")
        got = self._done.get(i)
        if got is None:
            blob, raw_size = check_blob(i, self._entries[i], self._data, self._source, zlib_blobs=self._zlib)
            got = self._done[i] = expand_blob(i, blob, raw_size, self._source)
        return got


# one family's run of entry lines (the first line's name, then the lines with the same name)
_BLOCK = re.compile(rb'\n\{"name":"([A-Za-z_][A-Za-z0-9_]*)",[^\n]*(?:\n\{"name":"\1",[^\n]*)*')
_VARIANT_OK = re.compile(r"[A-Za-z0-9_]*\Z")


class SpecSource:
    """What dispatch needs of one specialization, read from its manifest entry without building its artifact:
    ``label``, ``variant``, ``index`` (its place in the family, bundle order), device ``requirements``, ``bins``
    (each binary's arch and kind), the artifact's ``launch`` spec and :meth:`launch_of` each binary, ``layouts`` (the
    plan of each parameter layout, :func:`kernelpack.launch.facts.plans`), ``layout_of`` (each binary's layout),
    ``specificity``; :meth:`artifact` builds the whole :class:`KernelArtifact` (once). What a launch loads -- the
    kernel's ``entry``, a :meth:`binary` and its verification (:meth:`verify_binary`) -- is read without it."""

    __slots__ = ("name", "variant", "label", "index", "requirements", "bins", "launch", "layouts", "layout_of",
                 "specificity", "_make", "_art", "_layout", "_light", "_verified")

    def __init__(self, name: str, variant: str, index: int, requirements: tuple[tuple[str, int], ...],
                 layout: _Layout, make: Any, light: Any = None) -> None:
        self.name, self.variant, self.index = name, variant, index
        self.label = f"{name}[{variant}]" if variant else name
        self.requirements = requirements
        self.bins, self.launch = layout.bins, layout.launch
        self.layouts, self.layout_of, self.specificity = layout.plans, layout.layout_of, layout.specificity
        self._layout = layout
        self._make = make  # () -> KernelArtifact
        self._light = light  # (binary index) -> (entry, Binary) without the artifact; None: read from the artifact
        self._art: KernelArtifact | None = None
        self._verified: set[int] = set()  # binaries verified against the ABI without the artifact

    @classmethod
    def of(cls, art: KernelArtifact, index: int) -> SpecSource:
        """The row of an artifact already built (a Bundle in memory)."""
        layout = _Layout(tuple((b.arch, b.kind) for b in art.binaries), art.launch, plans(art))
        layout.layout_of = tuple(layout_index(art, b) for b in art.binaries)
        layout.pairs = tuple((art.abi_for(b.arch), art.launch_for(b.arch)) for b in art.binaries)
        spec = cls(art.name, art.variant, index, art.requirements, layout, lambda: art)
        spec._art = art
        return spec

    def launch_of(self, i: int) -> LaunchSpec:
        """The LaunchSpec binary ``i`` launches with (KernelArtifact.launch_for its arch)."""
        return self._layout.pairs[i][1]

    def artifact(self) -> KernelArtifact:
        """The specialization's whole artifact (built on the first call: BundleError naming the kernel when its
        entry or its blob is malformed or altered)."""
        art = self._art
        if art is None:
            art = self._make()
            pending = vars(art).get("_unverified")
            if pending:  # what a launch verified before the artifact was built
                pending.difference_update(self._verified)
            self._art = art
        return art

    @property
    def built(self) -> bool:
        return self._art is not None

    def binary(self, i: int) -> tuple[str, Binary]:
        """The kernel's entry symbol and its binary ``i``, its blob checked (BundleError naming the kernel when the
        blob was altered); the artifact is not built for it."""
        art = self._art
        if art is not None or self._light is None:
            art = self.artifact()
            return art.entry, art.binaries[i]
        return self._light(i)  # type: ignore[no-any-return]

    def verify_binary(self, i: int, entry: str, b: Binary) -> None:
        """Verify binary ``i`` against the kernel parameters it launches with, once (AbiMismatch naming the kernel
        and arch): the artifact's deferred check when it is built, else the same check on what this row read."""
        art = self._art
        if art is not None:
            art.verify_binary(b)
        elif i not in self._verified:
            abi, launch = self._layout.pairs[i]
            verify_binary(self.label, entry, abi, launch, b)
            self._verified.add(i)


def record_of(arts: Sequence[KernelArtifact], blob_of: Callable[[Binary], int]) -> bytes | None:
    """The dispatch record of a family of artifacts (bundle order), as the launch model computes it
    (:func:`kernelpack.launch.record.family_record`); ``blob_of``: the bundle's blob index of a binary."""
    from ..launch.record import family_record

    return family_record([SpecSource.of(a, i) for i, a in enumerate(arts)], blob_of)


class _Layout:
    """What one distinct (kernel parameters, binaries, launch spec, ranges) of a manifest entry gives dispatch."""

    __slots__ = ("bins", "launch", "plans", "layout_of", "pairs", "blobs", "rules", "checked", "specificity")

    def __init__(self, bins: tuple[tuple[Arch, str], ...], launch: LaunchSpec, plans: tuple[Plan, ...]) -> None:
        self.bins, self.launch, self.plans = bins, launch, plans
        self.layout_of: tuple[int, ...] = ()
        self.pairs: tuple[tuple[Abi, LaunchSpec], ...] = ()  # each binary's (kernel parameters, launch spec)
        self.blobs: tuple[tuple[int, str], ...] = ()  # each binary's blob and arch text (read from a manifest entry)
        self.rules: tuple[Any, ...] = ()  # range constraints (kernelpack.launch.ranges)
        self.checked = False  # the checks an artifact makes of what dispatch read (_light_binary) passed
        self.specificity: Specificity = plan_specificity(plans[0])


def _segments(line: bytes) -> tuple[bytes, bytes, bytes, bytes, bytes, str, bytes] | None:
    """The texts of an entry line as this writer lays it out (canonical JSON: ``{"name":..,"abi":..,"binaries":..,
    "entry":..,"launch":..,"provenance":..[,"ranges":..][,"requires":..],"variant":".."}``): abi, binaries, launch,
    ranges (b"" when absent), requires (b"" when absent), the variant and the entry symbol's JSON string (quoted);
    None when the line is not laid out so.
    JSON strings hold no unescaped quote, so each key searched for is found where it is a key of the entry (the
    parameter, binary and launch objects have no such keys); each text is parsed as one JSON value when first
    met, so a line cut wrongly fails to parse rather than giving other values."""
    a = line.find(b'","abi":[', 9)
    b = line.find(b'],"binaries":[', a)
    e = line.find(b'],"entry":"', b)
    la = line.find(b',"launch":{', e)
    p = line.find(b'},"provenance":{', la)
    v = line.rfind(b',"variant":"')
    if min(a, b, e, la, p) < 0 or v < p or not line.endswith(b'"}'):
        return None
    r = line.find(b',"ranges":[', p, v)
    q = line.find(b',"requires":{', p, v)
    ranges = line[r + 10:q if q > r else v] if r >= 0 else b""
    requires = line[q + 12:v] if q >= 0 else b""
    return (line[a + 8:b + 1], line[b + 13:e + 1], line[la + 10:p + 1], ranges, requires, line[v + 12:-2].decode(),
            line[e + 10:la])


def _entry_of(text: Any) -> str:
    """The ``entry`` of a manifest entry (its line, cut as :func:`_segments` cuts it, else parsed whole; or the parsed
    entry); BundleError when it is not a non-empty string."""
    if isinstance(text, dict):
        got = text.get("entry")
    else:
        seg = _segments(text)
        got = bd.loads(seg[6]) if seg is not None else bd.loads(text).get("entry")
    if not isinstance(got, str) or not got:
        raise BundleError(f"malformed manifest entry (entry {got!r:.80})")
    return got


class BundleIndex:
    """The families of one bundle file, each built on first use (thread-safe); see the module's doc."""

    def __init__(self, data: bytes, source: str) -> None:
        self.source = source
        self._data = data
        body = bd.manifest_bytes(data, source=source)
        groups: dict[str, list[Any]] = {}  # name -> its entries' lines (bytes) or parsed entries (dict)
        spans: dict[str, tuple[int, int]] | None = None  # name -> its lines' bytes [a, b) of the manifest
        manifest = None
        self._body = body
        self._count: int | None = None
        self._tail = -1  # where the manifest's artifact lines end (this writer's layout)
        self._fams: bd.FamilyTable | None = None  # format 2: the families and the chunks holding their texts
        version = _HEADER.unpack_from(data)[1]
        tail = body.rfind(b"\n],") if version == 1 and body.startswith(bd.ARTIFACTS_HEAD) else -1
        if version != 1:  # the manifest names each family's stream: read when the family is first used
            manifest = bd.parse_manifest(body, source)
            self._fams = bd.FamilyTable(manifest, data, source)
            self._count = sum(self._fams.counts)
        elif tail > 0:  # format 1 as its writer laid it out: one line per artifact, its name first, a family one run
            spans = {}
            pos = len(bd.ARTIFACTS_HEAD) - 1
            for m in _BLOCK.finditer(body, pos, tail):  # one match per family: C scans the lines
                name = m.group(1).decode()
                if m.start() != pos or name in spans:
                    spans = None
                    break
                spans[name] = (m.start() + 1, m.end())
                pos = m.end()
            if spans is not None and pos == tail:
                manifest = bd.parse_manifest(b'{"artifacts":[]' + body[tail + 2:], source)
                self._tail = tail
            else:  # a line of another form, or a family in two runs: the lines grouped one by one
                spans = None
                split = bd.split_manifest(body, source)
                if split is not None:
                    manifest, lines = split
                    for n, text in lines:
                        groups.setdefault(n, []).append(text)
                    self._count = len(lines)
        if manifest is None:  # format 1 in another layout (an older writer's, or altered): parsed whole
            with _gc_paused():  # parsing makes ~30 containers per artifact: collecting them midway only costs time
                manifest = bd.parse_manifest(body, source)
            for i, a in enumerate(manifest["artifacts"]):
                given = a.get("name") if isinstance(a, dict) else None
                if not isinstance(given, str) or not _IDENT.match(given):
                    raise BundleError(f"{source}: artifact {i} has no kernel name that is a C identifier "
                                      f"(name {given!r:.80})")
                groups.setdefault(given, []).append(a)
            self._count = len(manifest["artifacts"])
        if manifest["format"] != version:
            raise BundleError(f"{source}: the header says format {version}, the manifest {manifest['format']}")
        self._manifest = manifest
        self._zlib = bool(_HEADER.unpack_from(data)[2] & FLAG_ZLIB_BLOBS)
        self._blobs = _Blobs(manifest["blobs"], data, source, self._zlib)
        self._spans = spans
        self._groups = groups  # format 1 in another layout: name -> its entries
        self._names = sorted(spans if spans is not None else self._fams.names if self._fams is not None else groups)
        self._families: dict[str, tuple[KernelArtifact, ...]] = {}
        self._specs: dict[str, tuple[SpecSource, ...]] = {}
        self._memo: dict[tuple[str, bytes], Any] = {}  # (what, JSON text) -> what it gives (parsed once per bundle)
        self._shared: dict[tuple[int, str, str], Binary] = {}  # one Binary per blob, across families
        self._lock = threading.RLock()

    def __len__(self) -> int:
        """Specializations (artifacts) in the bundle (counted when first asked: one line each)."""
        if self._count is None:
            self._count = self._body.count(b"\n", 0, self._tail)
        return self._count

    def names(self) -> list[str]:
        """The family names, sorted."""
        return list(self._names)

    def _entries(self, name: str) -> list[Any]:
        """The entries of family ``name``: their lines (bytes, the separating comma removed) or parsed entries
        (dict); KeyError when there is none."""
        if self._spans is not None:
            a, b = self._spans[name]
            lines = self._body[a:b].split(b"\n")
            last = len(lines) - 1 if b == self._tail else -1  # the manifest's last entry: no comma
            out = []
            for i, line in enumerate(lines):
                if i != last:
                    if not line.endswith(b","):
                        raise BundleError(f"{self.source}: kernel {name}: malformed manifest entry (an entry line "
                                          f"that does not end with a comma)")
                    line = line[:-1]
                out.append(line)
            return out
        if self._fams is not None:
            return self._fams.lines(name)
        return list(self._groups[name])

    # ------------------------------------------------------------ what dispatch needs, per specialization

    def family_specs(self, name: str) -> tuple[SpecSource, ...]:
        """What dispatch needs of each specialization of family ``name``, sorted by variant (KeyError for a name
        the bundle lacks; BundleError naming the bundle and kernel when an entry is malformed)."""
        got = self._specs.get(name)
        if got is not None:
            return got
        with self._lock:
            got = self._specs.get(name)
            if got is None:
                got = self._specs[name] = self._build_specs(name)
        return got

    def _build_specs(self, name: str) -> tuple[SpecSource, ...]:
        source = self.source
        entries = self._entries(name)
        rows: list[tuple[str, tuple[tuple[str, int], ...], _Layout, Any]] = []
        with self._naming(name, name_kernel=True):  # what it reads does not name the kernel: the message does
            for text in entries:
                seg = _segments(text) if isinstance(text, bytes) else None
                if seg is None:  # another layout: parse it whole, key its parts by their canonical text
                    a = bd.artifact_entry(text, name, source) if isinstance(text, bytes) else text
                    seg = (bd._canonical_json(a["abi"]), bd._canonical_json(a["binaries"]),
                           bd._canonical_json(a["launch"]),
                           bd._canonical_json(a["ranges"]) if a.get("ranges") else b"",
                           bd._canonical_json(a["requires"]) if a.get("requires") else b"", a.get("variant", ""),
                           b"")
                abi_t, bins_t, launch_t, ranges_t, req_t, variant, _ = seg
                if not isinstance(variant, str) or not _VARIANT_OK.match(variant):
                    raise BundleError(f"variant {variant!r:.80} may hold only letters, digits, _")
                key = ("layout", b"\0".join((abi_t, bins_t, launch_t, ranges_t)))
                layout = self._memo.get(key)
                if layout is None:
                    layout = self._memo[key] = self._layout(name, abi_t, bins_t, launch_t, ranges_t)
                req = self._parsed("requires", req_t, name) if req_t else ()
                rows.append((variant, req, layout, text))
        rows.sort(key=lambda r: r[0])
        for (v, *_), (w, *_) in zip(rows, rows[1:]):
            if v == w:
                raise BundleError(f"{source}: two artifacts with the same name and variant: "
                                  f"{f'{name}[{v}]' if v else name}")
        return tuple(SpecSource(name, variant, i, req, layout, self._maker(name, variant, text, layout),
                                self._lighter(name, variant, text, layout))
                     for i, (variant, req, layout, text) in enumerate(rows))

    def _parsed(self, what: str, text: bytes, name: str) -> Any:
        key = (what, text)
        got = self._memo.get(key)
        if got is None:
            if what == "abi":
                got = self._abi(text, name)
                self._memo[key] = got
                return got
            value = bd.loads(text)
            if what == "launch":
                if not isinstance(value, dict):
                    raise BundleError(f"launch spec is not a JSON object: {text[:80]!r}")
                got = LaunchSpec.from_json(value)
            elif what == "requires":
                if not isinstance(value, dict):
                    raise BundleError(f"requires is not a JSON object: {text[:80]!r}")
                got = normalize_requires(value, f"kernel {name}")
            elif what == "ranges":
                if not isinstance(value, list):
                    raise BundleError(f"ranges is not a JSON list: {text[:80]!r}")
                got = ranges_model.normalize(value, f"kernel {name}")
            else:  # binaries: ((arch, kind, ArchLaunch | None), ...)
                if not isinstance(value, list) or not value:
                    raise BundleError(f"binaries is not a non-empty JSON list: {text[:80]!r}")
                out = []
                for b in value:
                    own = ArchLaunch.from_json(b) if b.get("launch") is not None or b.get("abi") is not None else None
                    blob = b["blob"]
                    if not isinstance(blob, int) or isinstance(blob, bool):
                        raise BundleError(f"binary blob index is not an integer: {blob!r:.40}")
                    out.append((Arch.parse(str(b["arch"])).real, str(b["kind"]), own, blob, str(b["arch"])))
                got = tuple(out)
            self._memo[key] = got
        return got

    def _abi(self, text: bytes, name: str) -> Abi:
        """Kernel parameters from their JSON list, each parameter's text parsed once per bundle (they begin with
        their "divisibility" key: canonical JSON; a text cut wrongly does not parse, and the list is parsed whole)."""
        if text.startswith(b'[{"divisibility":') and text.endswith(b"}]"):
            memo = self._memo
            params = []
            try:
                for t in text[17:-2].split(b'},{"divisibility":'):  # each parameter's text after that key
                    got = memo.get(("param", t))
                    if got is None:
                        got = memo[("param", t)] = param_from_json(bd.loads(b'{"divisibility":' + t + b"}"))
                    params.append(got)
                return Abi(tuple(params))
            except (ValueError, KeyError, TypeError, KernelpackError):
                pass  # parsed whole below: its error names what is wrong
        return Abi.from_json(bd.loads(text))

    def _layout(self, name: str, abi_t: bytes, bins_t: bytes, launch_t: bytes, ranges_t: bytes) -> _Layout:
        abi = self._parsed("abi", abi_t, name)
        launch = self._parsed("launch", launch_t, name)
        bins = self._parsed("bins", bins_t, name)
        rules = self._parsed("ranges", ranges_t, name) if ranges_t else ()
        per_arch: dict[Any, ArchLaunch] = {}
        for arch, _, own, _, _ in bins:
            if own is not None and per_arch.setdefault(arch, own) != own:
                raise BundleError(f"two binaries for {arch} state different launch facts")
        slots = self._memo.setdefault(("slots", b""), {})
        if not per_arch:  # every binary launches with the artifact's own parameters and launch spec: one layout
            plans: tuple[Plan, ...] = (Plan.of(abi, launch, rules, slots),)
            pairs = [(abi, launch)] * (len(bins) + 1)
            layout_of = (0,) * len(bins)
        else:
            pairs = [(abi, launch)] + [((per_arch[a].abi or abi) if a in per_arch else abi,
                                        (per_arch[a].launch or launch) if a in per_arch else launch)
                                       for a, *_ in bins]
            lay = layouts_of(pairs)
            keys = [layout_key(x, y) for x, y in lay]
            plans = tuple(Plan.of(x, y, rules, slots) for x, y in lay)
            layout_of = tuple(keys.index(layout_key(x, y)) for x, y in pairs[1:])
        out = _Layout(tuple((a, k) for a, k, *_ in bins), launch, plans)
        out.layout_of = layout_of
        out.pairs = tuple(pairs[1:])
        out.blobs = tuple((blob, text) for _, _, _, blob, text in bins)
        out.rules = tuple(rules)
        return out

    def _maker(self, name: str, variant: str, text: Any, layout: _Layout) -> Any:
        def make() -> KernelArtifact:
            with self._lock:
                art = self._artifact(name, text, f"{name}[{variant}]" if variant else name)
                if plans(art) != layout.plans:  # the entry read whole says otherwise than its parts: altered
                    raise BundleError(f"{self.source}: kernel {art.label}: malformed manifest entry (its parts and "
                                      f"the whole entry disagree)")
                return art

        return make

    def _lighter(self, name: str, variant: str, text: Any, layout: _Layout) -> Any:
        """What loads binary ``i`` of a specialization without building its artifact (None when its binaries take
        more than one parameter layout: the artifact checks those against each other)."""
        if len(layout.plans) != 1:
            return None
        label = f"{name}[{variant}]" if variant else name
        return lambda i: self._light_binary(name, label, text, layout, i)

    def _light_binary(self, name: str, label: str, text: Any, layout: _Layout, i: int) -> tuple[str, Binary]:
        """The entry symbol and binary ``i`` of a specialization, its blob checked, and what its artifact would check
        of the parts dispatch read (:func:`kernelpack.bundle.artifact.check_launch`, its range constraints against its
        arguments; once per distinct layout), without building the artifact: errors as :meth:`_artifact` gives
        them."""
        with self._lock, self._naming(label):
            entry = _entry_of(text)
            if not layout.checked:
                check_launch(label, *layout.pairs[0])
                if layout.rules:
                    try:
                        ranges_model.check(label, layout.plans[0], layout.rules)
                    except ValueError as e:  # as the artifact reports it
                        raise KernelpackError(str(e)) from None
                layout.checked = True
            blob, arch = layout.blobs[i]
            b = bd.shared_binary(blob, arch, layout.bins[i][1], self._blobs, self._shared, name)
        return entry, b

    def _artifact(self, name: str, text: Any, label: str) -> KernelArtifact:
        """One artifact of family ``name`` from its entry (text or parsed), its cubins' verification deferred;
        errors name ``label``."""
        with self._naming(label):
            a = bd.artifact_entry(text, name, self.source) if isinstance(text, bytes) else text
            with deferred_verification():
                art = _artifact(a, self._blobs, self._shared)
        return set_origin(art, self.source)

    @contextmanager
    def _naming(self, label: str, name_kernel: bool = False) -> Iterator[None]:
        """What reading entries raises, as a BundleError naming the bundle and kernel ``label`` (a KernelpackError's
        message names the kernel itself, as an artifact's checks do, unless ``name_kernel``)."""
        source = self.source
        try:
            yield
        except BundleError as e:
            raise BundleError(f"{source}: kernel {label}: {e.message.removeprefix(source + ': ')}") from None
        except KernelpackError as e:
            raise BundleError(f"{source}: {f'kernel {label}: ' if name_kernel else ''}{e.message}") from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError, RecursionError) as e:
            raise BundleError(f"{source}: kernel {label}: malformed manifest entry: {e!r:.300}") from None

    # ------------------------------------------------------------ what a family's first launches read

    def family_record(self, name: str) -> FamilyRecord | None:
        """The dispatch record of family ``name`` (:mod:`kernelpack.launch.record`), its stream checked; None when
        the bundle has none for it (format 1, or a family its writer could not record) or one of another record
        version. KeyError for a name the bundle lacks; BundleError naming the bundle and kernel when it is altered
        or malformed."""
        if self._fams is None:
            if name not in self._groups and (self._spans is None or name not in self._spans):
                raise KeyError(name)
            return None
        text = self._fams.record(name)
        if text is None:
            return None
        from ..launch.record import read_record

        try:
            return read_record(text, len(self._blobs))
        except BundleError as e:
            raise BundleError(f"{self.source}: kernel {name}: {e.message}") from None

    def record_binary(self, label: str, name: str, blob: int, arch: str, kind: str) -> Binary:
        """Binary ``blob`` of family ``name``'s specialization ``label`` (filed as ``arch`` ``kind``), its blob
        checked and expanded on first use (BundleError naming the kernel when it was altered)."""
        with self._lock, self._naming(label):
            return bd.shared_binary(blob, arch, kind, self._blobs, self._shared, name)

    # ------------------------------------------------------------ whole artifacts

    def family(self, name: str) -> tuple[KernelArtifact, ...]:
        """The artifacts of family ``name`` sorted by variant (KeyError for a name the bundle lacks); BundleError
        naming the bundle and kernel when an entry is malformed or a blob is altered or does not expand."""
        with self._lock:
            got = self._families.get(name)
            if got is None:
                specs = self.family_specs(name)
                got = Bundle(tuple(s.artifact() for s in specs), source=self.source).artifacts
                self._families[name] = got
        return got

    def bundle(self) -> Bundle:
        """Every family, as one Bundle (builds the families not built yet)."""
        return Bundle(tuple(a for n in self._names for a in self.family(n)), source=self.source)

    def verify(self) -> None:
        """Check every blob and the padding between them, build every family and verify every binary now (what
        ``kernelpack.load(..., verify=True)`` does)."""
        blobs = self._manifest["blobs"]
        for i in range(len(blobs)):
            self._blobs[i]
        bd.check_padding(self._manifest, self._data, self.source)
        for n in self._names:
            for a in self.family(n):
                try:
                    a.verify()
                except KernelpackError as e:
                    raise BundleError(f"{self.source}: {e.message}") from None
        if self._fams is not None:
            self._verify_records()

    def _verify_records(self) -> None:
        """Each family's dispatch record is the one its entries give (as this kernelpack writes it; a record of
        another version is not read, so not checked)."""
        blob_of = {id(b): idx for (idx, _, _), b in self._shared.items()}
        assert self._fams is not None
        for n in self._fams.names:
            if self.family_record(n) is None:
                continue
            if record_of(self.family(n), lambda b: blob_of[id(b)]) != self._fams.record(n):
                raise BundleError(f"{self.source}: kernel {n}: its dispatch record differs from the one its manifest "
                                  f"entries give (the file was altered)")
