"""A family's dispatch record: what a process's first launch of a family needs, computed by the launch model when the
bundle is written (:func:`family_record`: the family's specializations in dispatch order, :func:`.family.ordered_specs`,
the order the runtime dispatches in) and stored next to the family's manifest entries (bundle format 2).

Building a family from its entries parses each distinct parameter list, makes its ``Abi``, ``Plan``, specificity
and C plan, and orders the specializations: ~60 us per distinct layout in a fresh process, so milliseconds for a
family of tens. The record holds the results -- the caller's argument names, the C launcher's plans and grid
programs, each specialization in dispatch order with its binaries (arch, kind, blob, parameter layout) and each
binary's launch facts (from its cubin: required block, launch bounds, compile-time cluster, static shared memory;
from its launch spec: block, cluster, dynamic shared memory, PDL, cooperative) -- so a first launch reads one small
JSON text, hands the plans to the C launcher and loads the one binary it runs, its blob hash-checked. What the
record says is trusted as the build verified it (the bundle's hashes prove the bytes unchanged), with two checks
that cost nothing like a cubin parse: the C launcher keeps each plan's writes inside its buffer, whatever the record
says, and a binary's first load compares the plan its launches use with the kernel's parameters as the driver reports
them (``KernelFamily.load_entry``; a driver without that query has the binary verified against the entries).
``kernelpack.load(..., verify=True)`` and ``kernelpack inspect --verify`` compare every record with one computed again
from the entries. Anything else -- the Python launch path, an error to explain, docs -- builds the family from its
entries as before, and its dispatch order and plans must be the record's.

Text (canonical JSON; tables hold each distinct row once, the specializations are columns, in dispatch order)::

    {"v": 1, "args": [name, ...], "slots": [C slot, ...], "plans": [[slot index, ...], ...],
     "grids": [[plan, grid program | false], ...], "roles": [[plan, [device role, ...]], ...],
     "facts": [[pdl, cooperative, block, reqntid, max_threads, cluster, spec_cluster, static_smem, dyn_smem], ...],
     "binsets": [[[arch, kind, blob, layout, facts index], ...], ...], "requires": [[[name, value], ...], ...],
     "specs": {"label": [...], "entry": [...], "ints": hex}}

``ints`` holds the integer columns one after the other -- ``index``, ``rank``, ``first``, ``bins`` (binset indices),
``requires`` (requires indices) -- as one text of 4 hex digits per value (8 when one exceeds 0xFFFF): one JSON string
reads many times faster than lists of numbers, and a first launch reads them all.

``plans`` are the C launcher's (each specialization's layouts, in dispatch order; a specialization's binary of
``layout`` launches plan ``first + layout``), each its slots' indices in the table, as text of 4 hex digits per
index (a list of ints past 65,535 slots); ``grids`` and ``roles`` name only the plans that have a grid formula
or hidden device-derived parameters; a C slot is ``Plan.to_c``'s row;
``rank`` numbers the distinct specificities in dispatch order (a device sorts its entries by rank, then how well
the binary fits, then bundle index). ``VERSION`` names this layout and ``Plan.to_c``'s: a record of another
version is not read.
"""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any

from ..core.arch import Arch
from ..core.binary import Binary
from ..core.errors import BundleError, KernelpackError
from ..core.names import py_arg_names
from .device import check_role, normalize_requires, role_property
from .facts import binary_facts
from .family import LAUNCH_KEYWORDS, SpecSourceLike, order_key, ordered_specs
from .plan import grid_program

VERSION = 2  # 2: integer columns as hex text


def family_record(srcs: Sequence[SpecSourceLike], blob_of: Callable[[Binary], int]) -> bytes | None:
    """The dispatch record of one family (its specializations' sources, sorted by variant, as the bundle holds them:
    :meth:`kernelpack.bundle.index.SpecSource.of`); ``blob_of``: the bundle's blob index of a binary. None when the
    family cannot be recorded -- a binary that does not verify against its kernel parameters, a family the runtime
    would refuse: a first launch then builds it from its entries and says what is wrong."""
    try:
        for src in srcs:
            a = src.artifact()
            for b in a.binaries:
                a.verify_binary(b)
        specs = ordered_specs(srcs[0].artifact().name, srcs)
        arg_names = py_arg_names([s.name for s in specs[0].plan.args], LAUNCH_KEYWORDS)
        slots: dict[tuple[Any, ...], int] = {}
        plans: list[Any] = []
        grids, roles = [], []
        for s in specs:
            for p in s.layouts:
                plans.append([slots.setdefault(row, len(slots)) for row in p.c_form])
                program = grid_program(p, s.src.launch.grid)
                if program is not None:
                    grids.append([len(plans) - 1, program])
                if p.device_slots:
                    roles.append([len(plans) - 1, [d.param.role for d in p.device_slots]])
        if len(slots) <= 0xFFFF:  # as text, 4 hex digits per slot: one JSON string a plan, read by the C launcher
            plans = ["".join(f"{k:04x}" for k in plan) for plan in plans]
        facts: dict[tuple[Any, ...], int] = {}
        binsets: dict[tuple[Any, ...], int] = {}
        requires: dict[tuple[Any, ...], int] = {(): 0}
        cols: dict[str, list[Any]] = {k: [] for k in ("index", "label", "entry", "rank", "first", "bins", "requires")}
        rank, last = -1, None
        for s in specs:
            art = s.artifact
            key = order_key(s.specificity)
            if key != last:
                rank, last = rank + 1, key
            bins = []
            for i, b in enumerate(art.binaries):
                ls = art.launch_for(b.arch)
                f = binary_facts(art.entry, ls, s.src.layout_of[i], b)
                row = (ls.pdl, ls.cooperative, f.fixed_block, f.reqntid, f.max_threads, f.cluster, f.spec_cluster,
                       f.static_smem, f.dyn_smem)
                bins.append((str(b.arch), b.kind, blob_of(b), s.src.layout_of[i], facts.setdefault(row, len(facts))))
            for k, v in (("index", s.index), ("label", s.label), ("entry", art.entry), ("rank", rank),
                         ("first", s.first_plan), ("bins", binsets.setdefault(tuple(bins), len(binsets))),
                         ("requires", requires.setdefault(tuple(art.requirements), len(requires)))):
                cols[k].append(v)
    except (KernelpackError, ValueError, KeyError, TypeError):
        return None
    columns = {"label": cols["label"], "entry": cols["entry"],
               "ints": _hex_column([v for k in INT_COLUMNS for v in cols[k]])}
    record = {"v": VERSION, "args": list(arg_names), "slots": list(slots), "plans": plans, "grids": grids,
              "roles": roles, "facts": list(facts), "binsets": list(binsets), "requires": list(requires),
              "specs": columns}
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


INT_COLUMNS = ("index", "rank", "first", "bins", "requires")  # stored one after the other as one hex text


def _hex_column(values: list[int]) -> str:
    """Non-negative ints as one text: 4 hex digits each, or 8 when one exceeds 0xFFFF (json reads one string much
    faster than a list of numbers)."""
    width = 4 if max(values, default=0) <= 0xFFFF else 8
    return "".join(f"{v:0{width}x}" for v in values)


def _int_column(text: Any, n: int, what: str) -> list[int]:
    """A column of ``n`` ints from its text (:func:`_hex_column`)."""
    if not isinstance(text, str) or len(text) not in (4 * n, 8 * n):
        raise ValueError(f"{what} is not a text of {n} hex numbers")
    raw = bytes.fromhex(text)  # ValueError: not hex digits
    if 2 * len(raw) != len(text):  # fromhex skips whitespace
        raise ValueError(f"{what} is not a text of {n} hex numbers")
    column = array("H" if len(text) == 4 * n else "I", raw)  # 2 and 4 bytes on every platform CPython runs on
    if sys.byteorder == "little":
        column.byteswap()  # the text is big-endian
    return column.tolist()


Bins = tuple[tuple[Arch, str, int, int, int, str], ...]  # per binary: arch, kind, blob, layout, facts, arch text


class FamilyRecord:
    """A dispatch record read from its text and checked to be well formed (:func:`read_record`). The
    specializations, in dispatch order, are columns: ``index`` (bundle order), ``label``, ``entry``, ``rank``,
    ``first`` (its first C plan), ``bins`` (its binaries: an index in ``binsets``) and ``requires`` (its device
    requirements: an index in ``requirements``)."""

    __slots__ = ("arg_names", "plans", "slots", "labels", "grids", "roles", "launch", "facts", "binsets",
                 "requirements", "index", "label", "entry", "rank", "first", "bins", "requires")

    def __init__(self) -> None:
        self.arg_names: tuple[str, ...] = ()
        self.plans: tuple[str | list[int], ...] = ()  # the C launcher's plans: their slots' indices in ``slots``
        self.slots: tuple[tuple[Any, ...], ...] = ()  # the C slots (Plan.to_c's rows) the plans name
        self.labels: tuple[str, ...] = ()  # each plan's specialization's label
        self.grids: tuple[Any, ...] = ()
        self.roles: tuple[tuple[str, ...], ...] = ()  # each plan's device roles (its OP_DEVICE slots, in order)
        self.launch: tuple[tuple[bool, bool], ...] = ()  # per facts row: (pdl, cooperative)
        self.facts: tuple[tuple[Any, ...], ...] = ()  # per facts row: BinaryFacts' fields but the layout
        self.index: list[int] = []
        self.label: list[str] = []
        self.entry: list[str] = []
        self.rank: list[int] = []
        self.first: list[int] = []
        self.binsets: tuple[Bins, ...] = ()  # the distinct sets of binaries
        self.requirements: tuple[tuple[tuple[str, int], ...], ...] = ()  # the distinct device requirements
        self.bins: list[int] = []  # each specialization's binaries: its index in binsets
        self.requires: list[int] = []  # and its requirements: its index in requirements

    def plan_slots(self, k: int) -> tuple[tuple[Any, ...], ...]:
        """C plan ``k``'s slots, as ``Plan.to_c`` gives them (BundleError naming the plan when it names a slot the
        table lacks)."""
        p = self.plans[k]
        try:
            return tuple(self.slots[i] for i in (p if isinstance(p, list) else _int_column(p, len(p) // 4, "a plan")))
        except (ValueError, IndexError, TypeError) as e:
            raise BundleError(f"malformed dispatch record: plan {k}: {e!s:.100}") from None


def read_record(text: bytes, nblobs: int) -> FamilyRecord | None:
    """A record's text parsed and checked (types, indices, counts); None for a record of another version (another
    kernelpack's C plans: the family is built from its entries); BundleError saying what is malformed (the caller
    names the bundle and kernel). The C launcher checks what each plan's slots write (inside its buffer)."""
    try:
        doc = json.loads(text)
        if isinstance(doc, dict) and type(doc.get("v")) is int and doc["v"] != VERSION:
            return None
        return _record(doc, nblobs)
    except BundleError:
        raise
    except KernelpackError as e:  # an arch that is none
        raise BundleError(f"malformed dispatch record: {e.message:.200}") from None
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError) as e:
        raise BundleError(f"malformed dispatch record: {e!s:.200}") from None


def _only(xs: Any, kind: type, what: str, n: int | None = None) -> list[Any]:
    """``xs``: a list (of ``n`` items) of ``kind`` only (not a subclass: no bool for int)."""
    if not isinstance(xs, list) or (n is not None and len(xs) != n) or not set(map(type, xs)) <= {kind}:
        raise ValueError(f"{what} is not a list of {n if n is not None else ''} {kind.__name__}")
    return xs


U32 = (0, 2**32 - 1)  # the C launcher's launch facts (kp_entry) are 32-bit unsigned


def _ints(xs: Any, bound: tuple[int, int], what: str, n: int | None = None) -> list[int]:
    """``xs``: a list (of ``n`` items) of ints, each within ``bound`` (inclusive): the width the C launcher stores
    them in, or the table they index."""
    out = _only(xs, int, what, n)
    if out and not bound[0] <= min(out) <= max(out) <= bound[1]:
        raise ValueError(f"{what} {out!r:.60} not within [{bound[0]}, {bound[1]}]")
    return out


def _dim3(x: Any) -> tuple[int, int, int] | None:
    return None if x is None else tuple(_ints(x, U32, "a dim3", 3))  # type: ignore[return-value]


def _tuples(x: Any) -> Any:
    """JSON lists as tuples, all the way down (the C launcher reads tuples)."""
    return tuple(map(_tuples, x)) if isinstance(x, list) else x


def _record(doc: Any, nblobs: int) -> FamilyRecord:
    if not isinstance(doc, dict) or doc.get("v") != VERSION:
        raise ValueError(f"version {doc.get('v') if isinstance(doc, dict) else None!r:.20}, expected {VERSION}")
    r = FamilyRecord()
    r.arg_names = tuple(_only(doc["args"], str, "args"))
    slots = doc["slots"]
    if not isinstance(slots, list) or not all(isinstance(s, list) and len(s) == 9 for s in slots):
        raise ValueError("slots is not a list of 9-field slots")
    c_slots = [(*s[:7], s[7] if s[7] is None else _tuples(s[7]), _tuples(s[8]) if s[8] else ()) for s in slots]
    plans = doc["plans"]
    kinds = set(map(type, plans)) if isinstance(plans, list) else set()
    if kinds == {list}:
        flat = _only(list(chain.from_iterable(plans)), int, "plans' slot indices")
        if flat and not 0 <= min(flat) <= max(flat) < len(c_slots):
            raise ValueError("a plan names a slot the table lacks")
    elif kinds != {str}:  # texts of slot indices: the C launcher reads them (ValueError for a malformed one)
        raise ValueError("plans are not lists of slot indices or their texts")
    r.plans, r.slots = tuple(plans), tuple(c_slots)  # the C launcher reads each slot of the table once
    grids: list[Any] = [None] * len(plans)
    at = (0, len(plans) - 1)  # a plan's index (a negative one would name a plan from the end)
    for i, program in _only(doc["grids"], list, "grids"):
        grids[_ints([i], at, "a grid's plan")[0]] = _tuples(program)
    roles: list[tuple[str, ...]] = [()] * len(plans)
    for i, names in _only(doc["roles"], list, "roles"):
        roles[_ints([i], at, "a role's plan")[0]] = tuple(_only(names, str, "roles"))
        for name in names:
            if role_property(name) is None or check_role(name, "") is not None:
                raise ValueError(f"device role {name!r:.40} is none kernelpack reads")
    r.grids, r.roles = tuple(grids), tuple(roles)
    launch, facts = [], []
    for f in _only(doc["facts"], list, "facts"):
        pdl, coop, block, reqntid, max_threads, cluster, spec_cluster, static_smem, dyn_smem = f
        _only([pdl, coop], bool, "facts flags")
        _ints([max_threads, static_smem, dyn_smem], U32, "facts sizes")
        launch.append((pdl, coop))
        facts.append((_dim3(block), _dim3(reqntid), max_threads, _dim3(cluster), _dim3(spec_cluster), static_smem,
                      dyn_smem))
    r.launch, r.facts = tuple(launch), tuple(facts)
    binsets: list[Bins] = []
    for bs in _only(doc["binsets"], list, "binsets"):
        out = []
        for arch_t, kind, blob, layout, fi in bs:
            arch = Arch.parse(_only([arch_t], str, "arch")[0])
            if arch.virtual:
                raise ValueError(f"binary arch {arch_t!r:.20} is not a real arch")
            if kind not in ("cubin", "ptx") or type(blob) is not int or not 0 <= blob < nblobs:
                raise ValueError(f"binary {arch_t!r:.20} {kind!r:.20} blob {blob!r:.20}")
            if type(layout) is not int or not 0 <= layout < len(plans) or type(fi) is not int or \
                    not 0 <= fi < len(facts):
                raise ValueError(f"binary {arch_t} layout {layout!r:.20} facts {fi!r:.20}")
            out.append((arch, kind, blob, layout, fi, arch_t))
        if not out:
            raise ValueError("a specialization with no binary")
        binsets.append(tuple(out))
    requires = [tuple((k, v) for k, v in _only(rq, list, "requires") if type(k) is str and type(v) is int)
                for rq in _only(doc["requires"], list, "requires")]
    if any(len(a) != len(b) for a, b in zip(requires, doc["requires"])):
        raise ValueError("requires rows are not [name, value] pairs")
    requires = [normalize_requires(rq, "requires") for rq in requires]  # properties kernelpack reads, values >= 0
    cols = doc["specs"]
    if not isinstance(cols, dict):
        raise ValueError("specs is not an object of columns")
    n = len(_only(cols["label"], str, "label"))
    if not n:
        raise ValueError("no specialization")
    r.label, r.entry = cols["label"], _only(cols["entry"], str, "entry", n)
    if not all(r.entry):
        raise ValueError("an empty entry symbol")
    ints = _int_column(cols["ints"], len(INT_COLUMNS) * n, "ints")
    r.index, r.rank, r.first, r.bins, r.requires = (ints[k * n:(k + 1) * n] for k in range(len(INT_COLUMNS)))
    if max(r.bins) >= len(binsets) or max(r.requires) >= len(requires):
        raise ValueError("a binset or requires index past its table")
    r.binsets, r.requirements = tuple(binsets), tuple(requires)
    if len(plans) == n and r.first == list(range(n)) and not any(b[3] for bs in binsets for b in bs):
        r.labels = tuple(r.label)  # one layout per specialization (the common case): plan k is specialization k's
    else:
        labels = [""] * len(plans)
        for first, bins, label in zip(r.first, r.bins, r.label):
            for b in binsets[bins]:
                if not 0 <= first + b[3] < len(plans):
                    raise ValueError(f"{label}: layout {b[3]} of plan {first}: no such plan")
                labels[first + b[3]] = label
        if not all(labels):
            raise ValueError("a plan no specialization launches")
        r.labels = tuple(labels)
    return r
