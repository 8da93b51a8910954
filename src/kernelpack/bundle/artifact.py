"""KernelArtifact: the immutable result of compiling one kernel specialization for one or more archs.

An artifact holds bytes and facts, never runtime state (no modules, streams or devices). Its typed ABI is
verified against the parameter table of every cubin it carries when it is constructed, except inside
:func:`deferred_verification` (what ``kernelpack.load`` reads bundles with: they were verified when built, and the
bundle's hashes prove the bytes unchanged); such an artifact verifies a binary on its first use
(:meth:`KernelArtifact.verify_binary`, which the runtime calls before loading it) or all at once (:meth:`verify`).
"""

from __future__ import annotations

import hashlib
import re
import threading
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

from ..core import _reprs
from ..core.abi import Abi
from ..core.arch import Arch
from ..core.cubin import Cubin, CubinKernel, read_cubin
from ..core.errors import AbiMismatch, KernelpackError
from ..core.tma import TensorDescSpec
from ..launch import ranges as ranges_model

BINARY_KINDS = ("cubin", "ptx")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VARIANT = re.compile(r"^[A-Za-z0-9_]*$")

Dim3 = tuple[int, int, int]


def _dim3(value: Any, what: str) -> Dim3 | None:
    if value is None:
        return None
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise KernelpackError(f"{what} must be 1 to 3 ints >= 1 (got {value!r})")
    return (dims + (1, 1))[:3]  # type: ignore[return-value]


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


ZLIB_LEVEL = 6  # for binaries in bundles: within 1% of level 9's size for cubins, 4x faster


@dataclass(frozen=True)
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
        from ..core.ptx import ptx_isa_version

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


GRID_OPS = ("add", "sub", "mul", "div", "ceil_div", "min", "max")
GridExpr = int | tuple  # int | ("arg", param, field | None) | (op, GridExpr, GridExpr)


def _grid_expr(e: Any) -> GridExpr:
    """Validate one grid formula (JSON lists or tuples) and return it as nested tuples."""
    if isinstance(e, bool) or not isinstance(e, (int, list, tuple)):
        raise KernelpackError(f"grid expression must be an int or a list (got {e!r})")
    if isinstance(e, int):
        if e < 1:
            raise KernelpackError(f"constant grid dimension must be >= 1 (got {e})")
        return e
    if len(e) == 3 and e[0] == "arg" and isinstance(e[1], str) and (e[2] is None or isinstance(e[2], str)):
        return ("arg", e[1], e[2])
    if len(e) == 3 and e[0] in GRID_OPS:
        return (e[0], _grid_operand(e[1]), _grid_operand(e[2]))
    raise KernelpackError(f"malformed grid expression {e!r}: expected an int, ['arg', param, field|null] or "
                          f"[op, a, b] with op in {GRID_OPS}")


def _grid_operand(e: Any) -> GridExpr:
    return e if isinstance(e, int) and not isinstance(e, bool) else _grid_expr(e)


def _grid_json(e: GridExpr) -> Any:
    return e if isinstance(e, int) else [_grid_json(x) if isinstance(x, tuple) else x for x in e]


def grid_text(e: GridExpr) -> str:
    """A grid formula as text: ``ceil_div(n, 256)``, ``c.shape1``."""
    if isinstance(e, int):
        return str(e)
    if e[0] == "arg":
        return e[1] + (f".{e[2]}" if e[2] else "")
    return f"{e[0]}({grid_text(e[1])}, {grid_text(e[2])})"


def grid_params(e: GridExpr) -> list[tuple[str, str | None]]:
    """The (param, field) pairs a grid formula reads."""
    if isinstance(e, int):
        return []
    if e[0] == "arg":
        return [(e[1], e[2])]
    return grid_params(e[1]) + grid_params(e[2])


def evaluate_grid(e: GridExpr, fields: Mapping[tuple[str, str | None], int]) -> int:
    """The reference semantics every launcher must match: 64-bit signed integer math on the argument values
    (``("arg", "c", "shape1")`` is field ``shape1`` of struct param ``c``; field None is a scalar param);
    ``div`` truncates; ``ceil_div(a, b)`` is ``(a + b - 1) / b`` and 0 for b <= 0. A dimension <= 0 means there
    is nothing to launch: the launcher returns success without launching."""
    if isinstance(e, int):
        return e
    if e[0] == "arg":
        return int(fields[(e[1], e[2])])
    a, b = evaluate_grid(e[1], fields), evaluate_grid(e[2], fields)
    op = e[0]
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":  # C semantics: truncate toward zero, exactly (no float detour above 2**53)
        if not b:
            return 0
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q
    if op == "ceil_div":
        return (a + b - 1) // b if b > 0 else 0
    return min(a, b) if op == "min" else max(a, b)


@dataclass(frozen=True)
class LaunchSpec:
    """What a launch must use. None means the caller chooses.

    ``block``: fixed block dims (a frontend's choice, e.g. Triton's 32 x num_warps; a cubin's REQNTID is
    read from the cubin itself). ``dynamic_smem``: bytes of dynamic shared memory the kernel needs.
    ``cluster``: cluster dims the launch must request (a cubin's explicit cluster is read from the cubin).
    ``global_scratch``/``profile_scratch``: bytes per CTA of the buffers passed in the params of those roles
    (Triton's hidden trailing pointers): 0 means pass NULL, else allocate ``size x grid CTAs`` bytes aligned to
    ``*_align`` for the launch. ``tensor_descs``: tensor-descriptor arguments the host encodes (see
    :mod:`kernelpack.core.tma`). ``grid``: per dimension, a formula of the kernel's arguments the launcher computes
    the grid from when the caller gives none (see :func:`evaluate_grid`). ``pdl``: launch with programmatic
    dependent launch (the kernel was built to overlap the one before it: ``griddepcontrol``; Triton's
    ``launch_pdl``). ``cooperative``: the kernel synchronizes its whole grid, so every launch is cooperative and
    its grid must fit on the device at once (Triton's ``launch_cooperative_grid``). The JSON form carries these
    only when set, so older bundles read unchanged.
    """

    block: Dim3 | None = None
    dynamic_smem: int | None = None
    cluster: Dim3 | None = None
    global_scratch: int = 0
    global_scratch_align: int = 1
    profile_scratch: int = 0
    profile_scratch_align: int = 1
    tensor_descs: tuple[TensorDescSpec, ...] = ()
    grid: tuple[GridExpr, GridExpr, GridExpr] | None = None
    pdl: bool = False
    cooperative: bool = False

    def __post_init__(self) -> None:
        for f in ("pdl", "cooperative"):
            if not isinstance(getattr(self, f), bool):
                raise KernelpackError(f"LaunchSpec.{f} must be True or False (got {getattr(self, f)!r})")
        if self.grid is not None:
            if not isinstance(self.grid, (tuple, list)) or len(self.grid) != 3:
                raise KernelpackError(f"LaunchSpec.grid must be 3 grid expressions (got {self.grid!r})")
            object.__setattr__(self, "grid", tuple(_grid_expr(e) for e in self.grid))
        object.__setattr__(self, "block", _dim3(self.block, "LaunchSpec.block"))
        object.__setattr__(self, "cluster", _dim3(self.cluster, "LaunchSpec.cluster"))
        object.__setattr__(self, "tensor_descs", tuple(self.tensor_descs))
        if self.dynamic_smem is not None and (not isinstance(self.dynamic_smem, int) or self.dynamic_smem < 0):
            raise KernelpackError(f"LaunchSpec.dynamic_smem must be an int >= 0 (got {self.dynamic_smem!r})")
        for f in ("global_scratch", "profile_scratch"):
            size, align = getattr(self, f), getattr(self, f + "_align")
            if not isinstance(size, int) or size < 0:
                raise KernelpackError(f"LaunchSpec.{f} must be an int >= 0 (got {size!r})")
            if not isinstance(align, int) or align < 1 or align & (align - 1):
                raise KernelpackError(f"LaunchSpec.{f}_align must be a power of two (got {align!r})")
        if not all(isinstance(t, TensorDescSpec) for t in self.tensor_descs):
            raise KernelpackError("LaunchSpec.tensor_descs must hold TensorDescSpec values")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "block": list(self.block) if self.block else None,
            "dynamic_smem": self.dynamic_smem,
            "cluster": list(self.cluster) if self.cluster else None,
        }
        for f in ("global_scratch", "profile_scratch"):
            if getattr(self, f):
                out[f] = getattr(self, f)
                out[f + "_align"] = getattr(self, f + "_align")
        if self.tensor_descs:
            out["tensor_descs"] = [t.to_json() for t in self.tensor_descs]
        if self.grid is not None:
            out["grid"] = [_grid_json(e) for e in self.grid]
        for f in ("pdl", "cooperative"):
            if getattr(self, f):
                out[f] = True
        return out

    def __repr__(self) -> str:
        shown = []
        for f in ("block", "dynamic_smem", "cluster", "global_scratch", "profile_scratch", "pdl", "cooperative"):
            if getattr(self, f):
                shown.append(f"{f}={getattr(self, f)!r}")
        if self.tensor_descs:
            shown.append(f"tensor_descs={len(self.tensor_descs)}")
        if self.grid is not None:
            shown.append(f"grid=[{_reprs.clip(', '.join(map(grid_text, self.grid)), 120)}]")
        return f"LaunchSpec({', '.join(shown)})"

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LaunchSpec:
        return cls(d.get("block"), d.get("dynamic_smem"), d.get("cluster"), int(d.get("global_scratch", 0)),
                   int(d.get("global_scratch_align", 1)), int(d.get("profile_scratch", 0)),
                   int(d.get("profile_scratch_align", 1)),
                   tuple(TensorDescSpec.from_json(t) for t in d.get("tensor_descs", ())), d.get("grid"),
                   bool(d.get("pdl", False)), bool(d.get("cooperative", False)))


@dataclass(frozen=True)
class ArchLaunch:
    """What the binaries of one arch launch with where it differs from their artifact (``KernelArtifact.per_arch``).

    ``launch``: the whole LaunchSpec of those binaries (None: the artifact's): the block, dynamic shared memory,
    cluster, scratch sizes and tensor-descriptor lowerings may differ per arch; the grid formula may not.
    ``abi``: their kernel parameters (None: the artifact's): the same caller-visible arguments, lowered
    differently -- a tensor descriptor as a CUtensorMap on sm_90a and as pointer, shapes and strides on sm_80.
    """

    launch: LaunchSpec | None = None
    abi: Abi | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.launch is not None:
            out["launch"] = self.launch.to_json()
        if self.abi is not None:
            out["abi"] = self.abi.to_json()
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ArchLaunch:
        return cls(LaunchSpec.from_json(d["launch"]) if d.get("launch") is not None else None,
                   Abi.from_json(d["abi"]) if d.get("abi") is not None else None)


PerArch = tuple[tuple[Arch, ArchLaunch], ...]


def split_per_arch(items: Sequence[tuple[Arch, Abi, LaunchSpec]]) -> tuple[Abi, LaunchSpec, dict[Arch, ArchLaunch]]:
    """What a frontend that compiled one kernel for several archs passes to :class:`KernelArtifact`: the first arch's
    kernel parameters and LaunchSpec for the artifact, and each other arch's own where they differ (``per_arch``)."""
    _, abi, launch = items[0]
    per_arch = {arch: ArchLaunch(None if ls == launch else ls, None if a == abi else a)
                for arch, a, ls in items[1:] if ls != launch or a != abi}
    return abi, launch, per_arch


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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
    size, not its type), and its ``.target`` must be the arch it is filed under."""
    if binary.kind != "cubin":
        _verify_ptx(label, entry, abi, binary)
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
