"""The build summary: one row per kernel specialization, with the resources its cubins use and warnings about
what will cost performance or portability (spills, occupancy limited by registers or shared memory, shared memory
above what some devices of the arch family allow, library archs a kernel does not carry)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (annotations only: reading a state's rows imports neither)
    from ..bundle.artifact import KernelArtifact
    from ..bundle.kpack import Bundle


REGS_PER_SM = 65536
DEFAULT_BLOCK = 256  # assumed for kernels that take any block shape


@dataclass(frozen=True)
class Occupancy:
    fraction: float
    limiter: str  # "threads" | "registers" | "smem" | "blocks"
    threads: int  # block size assumed


def occupancy(major: int, minor: int, threads: int, regs: int, smem: int) -> Occupancy | None:
    """Theoretical occupancy of a block of ``threads`` using ``regs`` registers per thread and ``smem`` bytes of
    shared memory (the 1 KiB system reserve per block added), or None for an unknown arch."""
    from ..launch.codes import SM_LIMITS  # the launch model's table (imported when a row is made)

    lim = SM_LIMITS.get((major, minor))
    if lim is None or threads <= 0:
        return None
    warps = math.ceil(threads / 32)
    regs_per_warp = math.ceil(max(regs, 1) * 32 / 256) * 256
    limits = {
        "threads": lim.threads // (warps * 32),
        "blocks": lim.blocks,
        "registers": (REGS_PER_SM // regs_per_warp) // warps,
        "smem": lim.smem_sm // (smem + 1024) if smem else lim.blocks,
    }
    limiter = min(limits, key=lambda k: (limits[k], k != "registers" and k != "smem"))
    blocks = limits[limiter]
    return Occupancy(blocks * warps * 32 / lim.threads, limiter, threads)


@dataclass
class Row:
    kernel: str
    frontend: str
    archs: list[str]
    bytes: int
    registers: dict[str, int] = field(default_factory=dict)
    spills: dict[str, int] = field(default_factory=dict)  # local memory bytes (spills, stack)
    smem: dict[str, int] = field(default_factory=dict)  # static + dynamic
    block: str = "any"
    occupancy: dict[str, float] = field(default_factory=dict)
    status: str = ""
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:  # what asdict gives (flat fields: one level of copies), 10x faster
        return {f.name: _copy(getattr(self, f.name)) for f in fields(self)}


def _copy(v: Any) -> Any:
    return dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v


def rows(bundle: Bundle, library_archs: Sequence[str], status: dict[str, str] | None = None,
         dropped: Sequence[Dropped] = ()) -> list[Row]:
    return rows_reusing(bundle, library_archs, status or {}, {}, dropped)[0]


Dropped = tuple[str, ...]  # a config left out for an arch: (frontend, kernel, config label, arch, reason)


def row_key(a: KernelArtifact, library_archs: Sequence[str], dropped: Mapping[str, str] | None = None) -> str:
    """What :func:`row` reads of ``a`` (its binaries by SHA-256, the archs it was left out for), the library's archs
    and kernelpack's code, hashed: equal keys give equal rows (the status aside)."""
    from ..core.cache import code_digest

    facts = [a.label, a.entry, a.provenance.frontend, list(library_archs),
             [[str(b.arch), b.kind, b.sha256, a.launch_for(b.arch).block, a.launch_for(b.arch).dynamic_smem]
              for b in a.binaries], sorted((dropped or {}).items()), code_digest()]
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()


def rows_reusing(bundle: Bundle, library_archs: Sequence[str], status: Mapping[str, str],
                 previous: Mapping[str, tuple[str, Mapping[str, Any]]],
                 dropped: Sequence[Dropped] = ()) -> tuple[list[Row], dict[str, str]]:
    """:func:`rows`, taking each kernel's row from ``previous`` (label -> (row key, row as ``Row.to_json`` wrote
    it)) where its key is the kernel's :func:`row_key` (no cubin is parsed for it); also returns every row's key.
    ``dropped``: configs left out for an arch (each a warning on its row; a config left out for every arch it was
    built for gets a row of its own, status "dropped")."""
    left: dict[str, dict[str, str]] = {}
    for _, _, label, arch, why in dropped:
        left.setdefault(label, {})[arch] = why
    out, keys = [], {}
    for a in bundle:
        mine = left.pop(a.label, {})
        k = keys[a.label] = row_key(a, library_archs, mine)
        prev = previous.get(a.label)
        if prev is not None and prev[0] == k:
            r = Row(**prev[1])
            r.status = status.get(a.label, "")
        else:
            r = row(a, library_archs, status.get(a.label, ""), mine)
        out.append(r)
    frontends = {d[2]: d[0] for d in dropped}
    for label, archs in left.items():  # not in the bundle at all: no arch it was built for could launch it
        out.append(Row(label, frontends[label], [], 0, status="dropped", warnings=_left_out(archs)))
    return out, keys


def _left_out(archs: Mapping[str, str]) -> list[str]:
    return [f"left out for {arch} (a config of a tuned family, as Triton's autotuner prunes it): {why}"
            for arch, why in sorted(archs.items())]


def row(a: KernelArtifact, library_archs: Sequence[str], status: str = "",
        dropped: Mapping[str, str] | None = None) -> Row:
    """The summary row of ``a``; ``dropped``: the archs it was left out for, and why."""
    from ..launch.facts import launch_bounds_threads
    archs = [str(b.arch) if b.kind == "cubin" else str(b.arch).replace("sm_", "compute_") for b in a.binaries]
    r = Row(a.label, a.provenance.frontend, archs, sum(len(b.data) for b in a.binaries), status=status)
    for b in a.binaries:
        if b.kind != "cubin":
            continue
        ck = b.cubin.kernel(a.entry)
        arch = str(b.arch)
        ls = a.launch_for(b.arch)  # each binary's own launch facts (kernelpack.launch.facts)
        block = ls.block
        smem = ck.static_smem + (ls.dynamic_smem or 0)
        r.registers[arch], r.spills[arch], r.smem[arch] = ck.registers, ck.stack_bytes, smem
        fixed = block or ck.reqntid
        if fixed:
            r.block = "x".join(map(str, fixed))
        threads = math.prod(fixed) if fixed else (launch_bounds_threads(ck.max_threads) or DEFAULT_BLOCK)
        occ = occupancy(b.arch.major, b.arch.minor, threads, ck.registers, smem)
        if occ is not None:
            r.occupancy[arch] = round(occ.fraction, 3)
            if occ.fraction < 0.5 and occ.limiter in ("registers", "smem"):
                what = f"{ck.registers} regs/thread" if occ.limiter == "registers" else f"{smem // 1024} KiB smem"
                at = "" if fixed or ck.max_threads else f" at {threads} threads"
                r.warnings.append(f"occupancy {occ.fraction:.0%} on {arch}{at} (limited by {occ.limiter}: {what})")
        if ck.stack_bytes:
            r.warnings.append(f"{ck.stack_bytes} B local memory (spills/stack) on {arch}")
        r.warnings += _smem_portability(b.arch.major, b.arch.minor, b.arch.suffix, smem)
    carried = {(b.arch.major, b.arch.minor) for b in a.binaries}
    left = {_mm(x) for x in dropped or {}}
    skipped = [x for x in library_archs if _mm(x) not in carried and _mm(x) not in left]
    if skipped:
        r.warnings.append(f"not built for {', '.join(skipped)}")
    r.warnings += _left_out(dropped or {})
    return r


def warn_shadowed(bundle: Bundle, report_rows: Sequence[Row]) -> None:
    """A warning on the row of each specialization that hides others of its family (launch.family.shadowed): an
    untuned autotune family launches its first config for every call."""
    from ..launch.family import shadowed

    by_label = {r.kernel: r for r in report_rows}
    for name, arts in bundle.families().items():
        for winner, hidden in shadowed(name, arts).items():
            text = (f"launched for every call of {name}: {', '.join(hidden)} accept{'s' * (len(hidden) == 1)} the "
                    f"same calls and {'is' if len(hidden) == 1 else 'are'} never launched (an untuned autotune "
                    f"family runs its first config: `kernelpack tune` on a GPU, then [library] tuning, picks one "
                    f"per shape)")
            row = by_label.get(winner)
            if row is not None and text not in row.warnings:  # a row reused from the last build has it already
                row.warnings.append(text)


def _mm(arch: str) -> tuple[int, int]:
    from ..core.arch import Arch

    a = Arch.parse(arch)
    return a.major, a.minor


def _smem_portability(major: int, minor: int, suffix: str, smem: int) -> list[str]:
    """A plain sm_XY cubin also runs on later minors of the same major, some with less shared memory."""
    from ..launch.codes import SM_LIMITS

    if suffix or not smem:
        return []
    short = [f"sm_{ma}{mi}" for (ma, mi), lim in sorted(SM_LIMITS.items())
             if ma == major and mi >= minor and smem > lim.smem_block]
    return [f"{smem // 1024} KiB smem will not launch on {', '.join(short)}"] if short else []


COLUMNS = ("kernel", "frontend", "archs", "bytes", "regs", "spills", "smem", "block", "occ", "status")
NARROW = 120  # below this many columns the table drops frontend, bytes, spills and occ (low occupancy and spills stay
#               in the warnings)
_RIGHT = ("bytes", "regs", "spills", "smem", "occ")


def render(report_rows: Sequence[Row], *, console: Any, title: str, footer: str = "", limit: int | None = 60) -> None:
    """The summary table (kernels with warnings always shown; others up to ``limit`` rows, None: all). Readable at
    80 columns: a narrow console gets fewer columns, no vertical rules, and kernel names folded, never cut."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    narrow = console.width < NARROW
    cols = [c for c in COLUMNS if not (narrow and c in ("frontend", "bytes", "spills", "occ"))]
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD if narrow else box.HEAVY_HEAD,
              pad_edge=not narrow)
    shown = [r for r in report_rows if r.warnings] + [r for r in report_rows if not r.warnings]
    longest = max((len(r.kernel) for r in shown), default=6)
    arch = max((len(a) for r in shown for a in r.archs), default=5)
    for col in cols:  # the kernel's name gets a third of a narrow line (folded below it); archs one a line there
        t.add_column(col, justify="right" if col in _RIGHT else "left", overflow="fold",
                     no_wrap=col not in ("kernel", "archs"),
                     min_width=min(longest, max(console.width // 3 - 4, 12)) if col == "kernel" else None,
                     max_width=max(arch, 5) if narrow and col == "archs" else None)
    keep = len(shown) if limit is None else max(limit, sum(1 for r in report_rows if r.warnings))
    hidden = max(0, len(shown) - keep)
    for r in shown[:len(shown) - hidden]:
        occ = min(r.occupancy.values()) if r.occupancy else None
        cells = {"kernel": escape(r.kernel), "frontend": r.frontend, "archs": " ".join(r.archs),
                 "bytes": f"{r.bytes:,}", "regs": _span(r.registers), "spills": _span(r.spills), "smem": _span(r.smem),
                 "block": r.block, "occ": f"{occ:.0%}" if occ is not None else "-", "status": r.status}
        t.add_row(*(cells[c] for c in cols))
    console.print(t)
    if hidden:
        console.print(f"  ... and {hidden} more kernel specialization(s) without warnings (-v shows them)")
    warned = [r for r in report_rows if r.warnings]
    for r in warned:
        for w in r.warnings:
            console.print(f"[yellow]warning[/]: {escape(r.kernel)}: {escape(w)}")
    if footer:
        console.print(footer)


def _span(values: dict[str, int]) -> str:
    if not values:
        return "-"
    lo, hi = min(values.values()), max(values.values())
    return str(lo) if lo == hi else f"{lo}-{hi}"
