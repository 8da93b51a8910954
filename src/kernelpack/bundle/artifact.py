"""KernelArtifact: the immutable result of compiling one kernel specialization for one or more archs.

An artifact holds bytes and facts, never runtime state (no modules, streams or devices). Its typed ABI is
verified against the parameter table of every cubin it carries when it is constructed, except inside
:func:`deferred_verification` (what ``kernelpack.load`` reads bundles with: they were verified when built, and the
bundle's hashes prove the bytes unchanged); such an artifact verifies a binary on its first use
(:meth:`KernelArtifact.verify_binary`, which the runtime calls before loading it) or all at once (:meth:`verify`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import field
from typing import Any, cast

from ..core import _reprs
from ..core.abi import Abi
from ..core.arch import Arch
from ..core.binary import Binary
from ..core.cubin import CubinKernel
from ..core.errors import AbiMismatch, KernelpackError, LimitError
from ..core.launchspec import ArchLaunch, LaunchSpec, PerArch, grid_params
from ..core.records import record
from ..launch import ranges as ranges_model

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VARIANT = re.compile(r"^[A-Za-z0-9_]*$")

_DEFER = threading.local()  # .on: artifacts constructed by this thread leave their cubins unparsed


@contextmanager
def deferred_verification() -> Iterator[None]:
    """Artifacts constructed inside (by this thread) check everything but their cubins: each binary is parsed and
    its ABI verified on first use (:meth:`KernelArtifact.verify_binary`). A copy made later (``replace``) verifies
    as usual."""
    saved = getattr(_DEFER, "on", False)
    _DEFER.on = True
    try:
        yield
    finally:
        _DEFER.on = saved


@record(frozen=True)
class Provenance:
    """Where an artifact came from: frontend and its version, the compiler, options, the source hash."""

    frontend: str
    frontend_version: str
    compiler: str = ""
    options: tuple[str, ...] = ()
    source_sha256: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple(self.options))

    def to_json(self) -> dict[str, Any]:
        return {
            "frontend": self.frontend,
            "frontend_version": self.frontend_version,
            "compiler": self.compiler,
            "options": list(self.options),
            "source_sha256": self.source_sha256,
        }

    def __repr__(self) -> str:
        compiler = f" ({self.compiler})" if self.compiler not in ("", self.frontend_version) else ""
        tool = self.frontend_version + compiler
        source = f", source {self.source_sha256[:12]}" if self.source_sha256 else ""
        return (f"<Provenance {_reprs.clip(self.frontend, 24)} {_reprs.clip(tool, 80)}, "
                f"{len(self.options)} option{'s' * (len(self.options) != 1)}{source}>")

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Provenance:
        return cls(d["frontend"], d["frontend_version"], d.get("compiler", ""), tuple(d.get("options", ())),
                   d.get("source_sha256", ""))


@record(frozen=True)
class KernelArtifact:
    """One kernel specialization, compiled for one or more archs.

    ``name`` is the family (what users call); artifacts sharing a name are specializations told apart by
    ``variant`` and chosen by dispatch on their ABI constraints. ``entry`` is the symbol in the binaries.

    ``abi`` and ``launch`` hold for every binary unless ``per_arch`` (``{"sm_90a": ArchLaunch(...)}``) gives the
    binaries of an arch their own: the launch facts and kernel parameters of the binary chosen for a device are
    the ones a launch uses (:mod:`kernelpack.launch.facts`); every arch takes the same caller-visible arguments.
    ``requires`` (``{"sm_count": 132}``) restricts the artifact to devices with those properties
    (:mod:`kernelpack.launch.device`). ``ranges`` (``["n_cols <= 4096", "M in [1, 64]", "x.shape[1] == 128"]``)
    restricts the integer arguments and tensor extents it accepts (:mod:`kernelpack.launch.ranges`): a dispatch
    constraint like alignment.
    """

    name: str
    entry: str
    abi: Abi
    binaries: tuple[Binary, ...]
    launch: LaunchSpec = field(default_factory=LaunchSpec)
    provenance: Provenance = field(default_factory=lambda: Provenance("unknown", ""))
    variant: str = ""
    per_arch: PerArch | Mapping[Any, ArchLaunch] = ()  # read it as arch_launches
    requires: tuple[tuple[str, int], ...] | Mapping[str, int] = ()  # read it as requirements
    ranges: Any = ()  # range constraints (kernelpack.launch.ranges): texts or {target: value or (lo, hi)}

    def __post_init__(self) -> None:
        if not _IDENT.match(self.name):
            raise KernelpackError(f"kernel name {self.name!r} is not a C identifier")
        if not _VARIANT.match(self.variant):
            raise KernelpackError(f"kernel {self.name}: variant {self.variant!r} may hold only letters, digits, _")
        object.__setattr__(self, "binaries", tuple(self.binaries))
        if not self.binaries:
            raise KernelpackError(f"kernel {self.name}: no binaries")
        seen = [(b.arch, b.kind) for b in self.binaries]
        if len(set(seen)) != len(seen):
            raise KernelpackError(f"kernel {self.name}: two binaries for the same arch: {[str(a) for a, _ in seen]}")
        self._normalize_per_arch()
        from ..launch import device

        try:
            object.__setattr__(self, "requires", device.normalize_requires(self.requires, f"kernel {self.label}"))
            object.__setattr__(self, "ranges", ranges_model.normalize(self.ranges, f"kernel {self.label}"))
        except ValueError as e:
            raise KernelpackError(str(e)) from None
        for abi, launch in self._pairs():
            check_launch(self.label, abi, launch)
        if getattr(_DEFER, "on", False):
            object.__setattr__(self, "_unverified", {i for i, b in enumerate(self.binaries) if b.kind == "cubin"})
        else:
            for b in self.binaries:
                if b.kind == "cubin":
                    self._verify(b)
        for b in self.binaries:  # PTX: checked against its .entry now (no parse of a cubin to defer)
            if b.kind != "cubin":
                self._verify(b)
        from ..launch.facts import check_caller_args, plans

        check_caller_args(self)
        if self.ranges:
            try:
                ranges_model.check(self.label, plans(self)[0], self.range_rules)
            except ValueError as e:
                raise KernelpackError(str(e)) from None

    def with_roles(self, roles: Mapping[str, str]) -> KernelArtifact:
        """This artifact with the named parameters given other roles in every arch's parameters, e.g.
        ``{"num_sms": "sm_count"}``: a parameter the launcher fills from the device (kernelpack.launch.device)."""
        from dataclasses import replace

        def abi(a: Abi) -> Abi:
            return Abi(tuple(replace(p, role=roles[p.name]) if p.name in roles else p for p in a.params))

        have = {p.name for a in [self.abi, *(x.abi for x in self.arch_launches.values() if x.abi)] for p in a.params}
        unknown = sorted(set(roles) - have)
        if unknown:
            raise KernelpackError(f"kernel {self.label}: no parameter named {', '.join(unknown)} (parameters: "
                                  f"{', '.join(p.name for p in self.abi.params)})")
        per_arch = {a: ArchLaunch(x.launch, abi(x.abi) if x.abi is not None else None)
                    for a, x in self.arch_launches.items()}
        return replace(self, abi=abi(self.abi), per_arch=per_arch)

    def _normalize_per_arch(self) -> None:
        raw = self.per_arch
        items = list(raw.items()) if isinstance(raw, Mapping) else list(raw)
        carried = set(self.archs)
        out: dict[Arch, ArchLaunch] = {}
        for key, over in items:
            arch = Arch.parse(key)
            if not isinstance(over, ArchLaunch):
                raise KernelpackError(f"kernel {self.label}: per_arch[{arch}] must be an ArchLaunch (got {over!r})")
            if arch not in carried:
                raise KernelpackError(f"kernel {self.label}: per_arch names {arch}, for which it carries no binary "
                                      f"(it carries {', '.join(map(str, self.archs))})")
            if arch in out:
                raise KernelpackError(f"kernel {self.label}: per_arch names {arch} twice")
            if over.launch is not None and over.launch.grid != self.launch.grid:
                raise KernelpackError(f"kernel {self.label}: per_arch[{arch}] has another grid formula than the "
                                      f"artifact; the grid formula is one for every arch")
            same_launch = over.launch is None or over.launch == self.launch
            same_abi = over.abi is None or over.abi == self.abi
            if not (same_launch and same_abi):
                out[arch] = ArchLaunch(None if same_launch else over.launch, None if same_abi else over.abi)
        object.__setattr__(self, "per_arch", tuple(sorted(out.items(), key=lambda kv: str(kv[0]))))

    @property
    def arch_launches(self) -> dict[Arch, ArchLaunch]:
        """``per_arch`` as it is after construction: the archs whose binaries launch otherwise than the artifact."""
        return dict(cast(PerArch, self.per_arch))

    @property
    def requirements(self) -> tuple[tuple[str, int], ...]:
        """``requires`` as it is after construction: (device property, value) pairs, sorted."""
        return cast("tuple[tuple[str, int], ...]", self.requires)

    @property
    def range_rules(self) -> tuple[ranges_model.Range, ...]:
        """``ranges`` as it is after construction: one :class:`~kernelpack.launch.ranges.Range` per target, sorted."""
        return cast("tuple[ranges_model.Range, ...]", self.ranges)

    def with_ranges(self, ranges: Any) -> KernelArtifact:
        """This artifact with other range constraints (``["M in [1, 64]"]``; () for none)."""
        from dataclasses import replace

        return replace(self, ranges=ranges)

    def launch_for(self, arch: Arch | str) -> LaunchSpec:
        """The LaunchSpec the binaries of ``arch`` launch with."""
        over = self.arch_launches.get(Arch.parse(arch))
        return over.launch if over is not None and over.launch is not None else self.launch

    def abi_for(self, arch: Arch | str) -> Abi:
        """The kernel parameters of the binaries of ``arch``."""
        over = self.arch_launches.get(Arch.parse(arch))
        return over.abi if over is not None and over.abi is not None else self.abi

    def _pairs(self) -> list[tuple[Abi, LaunchSpec]]:
        """Each distinct (kernel parameters, launch spec) of its binaries, the artifact's own first."""
        out = [(self.abi, self.launch)]
        for b in self.binaries:
            pair = (self.abi_for(b.arch), self.launch_for(b.arch))
            if pair not in out:
                out.append(pair)
        return out

    @property
    def label(self) -> str:
        """``name`` or ``name[variant]``, for messages."""
        return f"{self.name}[{self.variant}]" if self.variant else self.name

    @property
    def archs(self) -> tuple[Arch, ...]:
        return tuple(b.arch for b in self.binaries)

    def __repr__(self) -> str:
        entry = "" if self.entry == self.name else f" entry {_reprs.clip(self.entry, 48)},"
        kinds, n = sorted({b.kind for b in self.binaries}), len(self.binaries)
        bins = f"{n} {kinds[0]}{'s' * (n > 1)}" if len(kinds) == 1 else f"{n} binaries ({'+'.join(kinds)})"
        targets = (str(b.target) for b in self.binaries)  # compute_80 for PTX
        return (f"<KernelArtifact {_reprs.clip(self.label, 64)} for {_reprs.listing(targets, 60)}:{entry} "
                f"{len(self.abi.params)} params, {bins} {_reprs.size(sum(len(b.data) for b in self.binaries))}, "
                f"{_reprs.clip(self.provenance.frontend, 24)}>")

    def binary(self, arch: Arch | str, kind: str = "cubin") -> Binary:
        a = Arch.parse(arch)
        for b in self.binaries:
            if b.arch == a and b.kind == kind:
                return b
        raise KernelpackError(f"kernel {self.label}: no {kind} for {a} (carries {', '.join(map(str, self.archs))})")

    def cubin_kernel(self, arch: Arch | str) -> CubinKernel:
        """Launch facts (registers, smem, REQNTID, cluster) for this entry in the cubin of ``arch``."""
        return self.binary(arch).cubin.kernel(self.entry)

    @property
    def verified(self) -> bool:
        """Whether every cubin's ABI was verified (always, unless constructed under ``deferred_verification``)."""
        return not vars(self).get("_unverified")

    def verify_binary(self, binary: Binary) -> None:
        """Verify ``binary`` (one of this artifact's) against the ABI now if construction deferred it: AbiMismatch
        naming the kernel and arch when its cubin is malformed or disagrees. Verified once."""
        pending = vars(self).get("_unverified")
        if not pending:
            return
        for i in [i for i in pending if self.binaries[i] is binary]:
            self._verify(binary)
            pending.discard(i)

    def verify(self) -> KernelArtifact:
        """Verify every binary whose verification construction deferred; return self."""
        for b in self.binaries:
            self.verify_binary(b)
        return self

    def _verify(self, binary: Binary) -> None:
        verify_binary(self.label, self.entry, self.abi_for(binary.arch), self.launch_for(binary.arch), binary)

def verify_binary(label: str, entry: str, abi: Abi, launch: LaunchSpec, binary: Binary) -> None:
    """Check one binary of kernel ``label`` against the kernel parameters (``abi``) and launch spec it launches with:
    AbiMismatch naming the kernel and arch when they disagree or the binary is malformed. A cubin: its kernel
    ``entry``'s parameters (kernelpack.core.verify) and required block; PTX: as far as PTX fixes parameters (each one's
    size, not its type), and its ``.target`` must be the arch it is filed under. Either must fit the limits of some
    device it runs on (LimitError: :func:`over_limits`)."""
    if binary.kind != "cubin":
        _verify_ptx(label, entry, abi, binary)
        _check_limits(label, entry, launch, binary)
        return
    from ..core.verify import verify_abi

    try:
        ck = binary.cubin.kernel(entry)
    except KernelpackError as e:
        raise AbiMismatch(f"kernel {label} ({binary.arch}): {e.message}") from None
    verify_abi(label, abi, ck, binary.arch)
    fixed = launch.block
    if fixed is not None and ck.reqntid is not None and fixed != ck.reqntid:
        raise AbiMismatch(f"kernel {label} ({binary.arch}): launch block {fixed} contradicts the cubin's "
                          f"required block {ck.reqntid}; give {binary.arch} its own block (per_arch)")
    _check_limits(label, entry, launch, binary)


def over_limits(entry: str, launch: LaunchSpec, binary: Binary) -> str | None:
    """Why kernel ``entry`` of ``binary``, launched with ``launch``, fits no device the binary runs on (its shared
    memory, static and dynamic, beyond the arch's limit: :mod:`kernelpack.launch.limits`); None when it fits. What a
    frontend asks before it makes an artifact of a tuning config, to leave the config out for that arch."""
    from ..launch.limits import smem_overflow

    static = binary.cubin.kernel(entry).static_smem if binary.kind == "cubin" else 0
    return smem_overflow(binary.target, static, launch.dynamic_smem or 0)


def _check_limits(label: str, entry: str, launch: LaunchSpec, binary: Binary) -> None:
    why = over_limits(entry, launch, binary)
    if why:
        raise LimitError(f"kernel {label} ({binary.arch}): {why}; use less shared memory (smaller tiles, fewer "
                         f"pipeline stages) or leave {binary.arch} out")


def _verify_ptx(label: str, entry: str, abi: Abi, binary: Binary) -> None:
    from ..core.ptx import ptx_entries, ptx_target, verify_ptx_abi

    where = f"kernel {label} ({binary.target} PTX)"
    try:
        entries = ptx_entries(binary.data.decode())
        target = ptx_target(binary.data.decode())
    except UnicodeDecodeError:
        raise AbiMismatch(f"{where}: PTX that is not UTF-8 text") from None
    except KernelpackError as e:
        raise AbiMismatch(f"{where}: {e.message}") from None
    if entry not in entries:
        raise AbiMismatch(f"{where}: no .entry {entry} in the PTX (entries: {', '.join(entries) or 'none'})")
    if target != binary.arch:
        raise AbiMismatch(f"{where}: the PTX is for .target {target}, not {binary.arch}; file it as "
                          f"{target.ptx_name}")
    verify_ptx_abi(label, abi, entry, entries[entry], binary.target)


def check_launch(label: str, abi: Abi, launch: LaunchSpec) -> None:
    """What kernel ``label`` launching with ``abi`` and ``launch`` must satisfy: its grid formula reads integer
    arguments; scratch sizes, tensor descriptors and device-derived roles have the params they need (KernelpackError
    / AbiMismatch naming the kernel)."""
    if launch.grid is not None:
        _check_grid(label, abi, launch)
    _check_launch_roles(label, abi, launch)


def _check_grid(label: str, abi: Abi, launch: LaunchSpec) -> None:
    params = {p.name: p.type for p in abi.params}
    for e in launch.grid or ():
        for name, fld in grid_params(e):
            t = params.get(name)
            fields = {f.name: f.type for f in getattr(t, "fields", ())}
            dtype = getattr(t, "dtype", None) if fld is None else getattr(fields.get(fld), "dtype", None)
            ok = t is not None and dtype is not None and dtype.is_integer
            if not ok:
                raise KernelpackError(f"kernel {label}: grid formula reads {name}{'.' + fld if fld else ''}, "
                                      f"which is not an integer argument or field of this kernel")


def _check_launch_roles(label: str, abi: Abi, launch: LaunchSpec) -> None:
    """Scratch sizes need a param of that role; tensor descriptors need their params in the ABI; device-derived
    roles must be usable."""
    from ..launch.device import check_role

    roles = {p.role for p in abi.params}
    for role in ("global_scratch", "profile_scratch"):
        if getattr(launch, role) and role not in roles:
            raise AbiMismatch(f"kernel {label}: launch needs {getattr(launch, role)} bytes of {role} "
                              f"per CTA but no parameter has role {role!r}")
    for p in abi.params:
        why = check_role(p.role, f"kernel {label}: parameter {p.name}")
        if why:
            raise AbiMismatch(why)
    for t in launch.tensor_descs:
        try:
            t.check(abi, label)
        except KernelpackError as e:
            raise AbiMismatch(e.message) from None
