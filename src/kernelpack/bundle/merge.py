"""Merging artifacts of one kernel compiled in separate calls: ``Bundle.of``, ``kernelpack.Library`` and
``kernelpack build`` combine artifacts with the same name and variant into one multi-arch artifact.

The rule: the parts must be the same kernel — the same entry symbol, caller-visible arguments (parameter names,
types, divisibility, roles; :func:`kernelpack.launch.facts.check_caller_args`), grid formula, device requirements and
range constraints — and each arch's binary must come from one part, or be the very same bytes wherever it appears
(the same cubin given twice is harmless). Anything else is refused, naming both parts and what differs. What may
differ per arch stays with the arch's binaries (``KernelArtifact.per_arch``): the launch facts (block, dynamic shared
memory, cluster, scratch, PDL, cooperative) and the parameter layout (a tensor descriptor as a CUtensorMap on sm_90a,
as pointer, shapes and strides on sm_80) -- so a Triton kernel compiled in one call per arch merges into the artifact
one call for both archs makes.

The result does not depend on the order of the parts: binaries are sorted by (arch, kind), and the merged artifact
keeps the provenance, kernel parameters and launch spec of the part holding the lowest arch (its binaries'; every
other arch's where they differ go to ``per_arch``). A part that already holds every binary is returned as it is, so
a bundle merged with itself is unchanged.

Where a part came from (a bundle's file, a build step, an argument position) is kept beside the artifact, never in
it: it names the parts in messages and changes no byte of a bundle.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from ..core._reprs import clip
from ..core.abi import Abi, Param, type_to_json
from ..core.arch import Arch
from ..core.binary import Binary
from ..core.errors import BundleError, KernelpackError
from ..core.launchspec import ArchLaunch, LaunchSpec
from .artifact import KernelArtifact

if TYPE_CHECKING:
    from .host_program import HostObject, HostProgram

T = TypeVar("T")
_ORIGIN = "_kp_origin"  # where an artifact came from, for messages (an instance attribute outside its fields)


def origin(a: object) -> str | None:
    """Where artifact or host program ``a`` was read or merged from (a bundle's path, a build step), when known."""
    value = vars(a).get(_ORIGIN)
    return value if isinstance(value, str) else None


def set_origin(a: T, where: str) -> T:
    """Record ``where`` as the origin of artifact or host program ``a`` unless it has one (outside its fields:
    equality, hashing and bundle bytes are unaffected)."""
    vars(a).setdefault(_ORIGIN, where)
    return a


def merge(parts: Sequence[tuple[KernelArtifact, str]]) -> KernelArtifact:
    """One artifact from ``parts``, pairs of (artifact, where it came from), all with the same name and variant."""
    if len(parts) == 1:
        return parts[0][0]
    ordered = sorted(parts, key=_order)
    ref, ref_where = ordered[0]
    binaries: dict[tuple[object, str], tuple[Binary, str]] = {}
    own: dict[Arch, tuple[Abi, LaunchSpec, str]] = {}  # each arch's kernel parameters and launch spec, and from where
    for a, where in ordered:
        diff = _difference(ref, ref_where, a, where)
        if diff:
            raise BundleError(f"kernel {ref.label}: cannot merge {_part(ref, ref_where)} with {_part(a, where)}: "
                              f"{diff} (one name and variant must be one kernel: give the other a different variant)")
        for b in a.binaries:
            key = (b.arch, b.kind)
            seen = binaries.get(key)
            if seen is None:
                binaries[key] = (b, where)
            elif seen[0].sha256 != b.sha256:
                raise BundleError(
                    f"kernel {ref.label}: two different {b.arch} {b.kind}s: {_binary(seen[0])} from {seen[1]}, "
                    f"{_binary(b)} from {where} (an arch's binary must come from one place: drop {b.arch} from one "
                    f"of them)")
            facts = (a.abi_for(b.arch), a.launch_for(b.arch))
            had = own.setdefault(b.arch, (*facts, where))
            if had[:2] != facts:
                what = _launch_difference(had[1], had[2], facts[1], where) or "other kernel parameters"
                raise BundleError(f"kernel {ref.label}: the {b.arch} binaries launch otherwise in {had[2]} and "
                                  f"{where}: {what} (an arch's launch facts must come from one place)")
    want = {k: b.sha256 for k, (b, _) in binaries.items()}
    for a, _ in ordered:  # one part holds it all already: keep it as it is
        if {(b.arch, b.kind): b.sha256 for b in a.binaries} == want:
            return a
    per_arch = {arch: ArchLaunch(ls, abi) for arch, (abi, ls, _) in own.items()}
    try:
        merged = dataclasses.replace(ref, binaries=tuple(b for _, (b, _) in sorted(binaries.items(), key=_key)),
                                     per_arch=per_arch)
    except KernelpackError as e:  # what _difference does not see (a scratch size without its parameter, say)
        raise BundleError(f"kernel {ref.label}: cannot merge {', '.join(w for _, w in ordered)}: {e.message}") from None
    wheres = list(dict.fromkeys(w for _, w in ordered))
    return set_origin(merged, " + ".join(wheres))


def _order(part: tuple[KernelArtifact, str]) -> tuple[object, ...]:
    """Parts in an order of their content alone: the lowest arch set first; ties by bytes, then provenance."""
    a = part[0]
    keys = sorted((b.arch, b.kind) for b in a.binaries)
    return (keys, sorted(b.sha256 for b in a.binaries), json.dumps(a.provenance.to_json(), sort_keys=True))


def _key(item: tuple[tuple[object, str], tuple[Binary, str]]) -> tuple[object, str]:
    return item[0]


def _part(a: KernelArtifact, where: str) -> str:
    return f"{where} ({', '.join(str(b.target) for b in a.binaries)})"


def _binary(b: Binary) -> str:
    return f"sha256 {b.sha256[:16]}, {len(b.data)} bytes"


def _difference(a: KernelArtifact, wa: str, b: KernelArtifact, wb: str) -> str:
    """What makes ``a`` and ``b`` different kernels ("" when they are one kernel), naming where each came from: what
    may differ per arch (launch facts, parameter layouts) is no difference."""
    if a.entry != b.entry:
        return f"entry symbol {clip(a.entry, 120)} in {wa}, {clip(b.entry, 120)} in {wb}"
    if a.abi != b.abi and _caller_args(a) != _caller_args(b):
        pa, pb = a.abi.params, b.abi.params
        for i, (x, y) in enumerate(zip(pa, pb)):
            if x != y:
                tx, ty = _param(x), _param(y)
                if tx == ty:  # same spelling, different type details (a struct's fields or tensor spec)
                    tx, ty = _type(x), _type(y)
                return f"parameter {i}: {tx} in {wa}, {ty} in {wb}"
        return f"{len(pa)} parameters in {wa}, {len(pb)} in {wb}"
    if a.launch.grid != b.launch.grid:  # the one launch fact every arch shares
        return _launch_difference(a.launch, wa, b.launch, wb)
    if a.requirements != b.requirements:
        return f"device requirements {dict(a.requirements)} in {wa}, {dict(b.requirements)} in {wb}"
    if a.range_rules != b.range_rules:
        ra, rb = (", ".join(r.text() for r in x.range_rules) or "none" for x in (a, b))
        return f"range constraints {clip(ra, 160)} in {wa}, {clip(rb, 160)} in {wb}"
    return ""


def _caller_args(a: KernelArtifact) -> list[object]:
    """What a caller of ``a`` passes (kernelpack.launch.facts): the same for every parameter layout of one kernel."""
    from ..launch.facts import caller_view, plans

    return [caller_view(s) for s in plans(a)[0].args]


def _launch_difference(x: LaunchSpec, wx: str, y: LaunchSpec, wy: str) -> str:
    for f in dataclasses.fields(x):
        vx, vy = getattr(x, f.name), getattr(y, f.name)
        if vx != vy:
            return f"launch {f.name}: {clip(repr(vx), 160)} in {wx}, {clip(repr(vy), 160)} in {wy}"
    return ""


def _param(p: Param) -> str:
    return p.describe(80)


def _type(p: Param) -> str:
    return clip(json.dumps(type_to_json(p.type), sort_keys=True), 300)


def merge_programs(parts: Sequence[HostProgram | tuple[HostProgram, str]]) -> list[HostProgram]:
    """CuTe host programs with the same name and variant merged into one (by the rule of :func:`merge`: the same
    parameters and zero-extent policy, each arch's object from one part or byte-identical); in order of first
    appearance. ``parts``: programs, or pairs of (program, where it came from)."""
    groups: dict[tuple[str, str], list[tuple[HostProgram, str]]] = {}
    for i, part in enumerate(parts, 1):
        p, where = part if isinstance(part, tuple) else (part, origin(part) or f"host program {i}")
        groups.setdefault((p.name, p.variant), []).append((p, where))
    return [_merge_program(g) for g in groups.values()]


def _merge_program(parts: list[tuple[HostProgram, str]]) -> HostProgram:
    if len(parts) == 1:
        return parts[0][0]
    ordered = sorted(parts, key=lambda pw: (sorted(o.arch for o in pw[0].objects),
                                            sorted(_digest(o.data) for o in pw[0].objects)))
    ref, ref_where = ordered[0]
    objects: dict[Arch, tuple[HostObject, str]] = {}
    for p, where in ordered:
        diff = ""
        if p.params != ref.params:
            diff = f"parameters ({_params(ref)}) in {ref_where}, ({_params(p)}) in {where}"
        elif p.zero_extent != ref.zero_extent:
            diff = f"zero_extent {ref.zero_extent!r} in {ref_where}, {p.zero_extent!r} in {where}"
        if diff:
            raise BundleError(f"host program {ref.label}: cannot merge {_objs(ref, ref_where)} with "
                              f"{_objs(p, where)}: {diff} (one name and variant must be one program)")
        for o in p.objects:
            seen = objects.get(o.arch)
            if seen is None:
                objects[o.arch] = (o, where)
            elif seen[0] != o:
                raise BundleError(f"host program {ref.label}: two different {o.arch} objects: {_object(seen[0])} "
                                  f"from {seen[1]}, {_object(o)} from {where} (an arch's object must come from one "
                                  f"place: drop {o.arch} from one of them)")
    for p, _ in ordered:
        if len(p.objects) == len(objects):
            return p
    kernels: dict[tuple[str, str], list[tuple[KernelArtifact, str]]] = {}
    for p, where in ordered:
        for k in p.kernels:
            kernels.setdefault((k.name, k.variant), []).append((k, where))
    merged_kernels: list[KernelArtifact] = []
    for ks in kernels.values():
        try:
            merged_kernels.append(merge(ks))
        except BundleError:  # descriptions only (the objects carry their own cubins): keep each arch's
            merged_kernels += [k for k, _ in ks]
    merged = dataclasses.replace(ref, objects=tuple(o for _, (o, _) in sorted(objects.items(), key=_arch_key)),
                                 kernels=tuple(merged_kernels))
    return set_origin(merged, " + ".join(dict.fromkeys(w for _, w in ordered)))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _arch_key(item: tuple[Arch, tuple[HostObject, str]]) -> Arch:
    return item[0]


def _params(p: HostProgram) -> str:
    return clip(", ".join(("void* " if q.stream else f"{q.type.c_type} ") + q.name +
                          "".join(f" [{f} % {n}]" for f, n in q.checks) for q in p.params), 200)


def _objs(p: HostProgram, where: str) -> str:
    return f"{where} ({', '.join(str(o.arch) for o in p.objects)})"


def _object(o: HostObject) -> str:
    return f"sha256 {_digest(o.data)[:16]}, {len(o.data)} bytes, prefix {o.prefix}"
