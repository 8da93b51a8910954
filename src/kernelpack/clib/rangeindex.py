"""A family entry's range index: dispatch over many shape-range specializations in O(log n) instead of a walk.

The linear dispatch (``generate.py``) checks every specialization's constraints in dispatch order, group by group
(:meth:`kernelpack.clib.family.Family.groups`), and takes the first group with a match that has a binary for the
device. When the specializations carry ranges on one integer argument or tensor extent -- the *key* -- the values
of the key split into elementary intervals at the ranges' bounds; within one interval every specialization's range
on the key either holds for every value or for none. So the generator tabulates, per interval, the
*candidates*: the specializations whose range on the key covers it (those without a range on the key are
candidates everywhere), in dispatch order. At run time the entry reads the key once, binary-searches the sorted
bounds (branch-free), and runs the same group-by-group choice over that interval's candidates alone, checking each
one's constraints in full except its range on the key (the interval lies inside it). A specialization left out
cannot match, so the choice -- the specialization, and whether any matched at all (the no-match message) -- is the
linear walk's, exactly.

The key is the ranged target that gives the shortest longest candidate list (then the fewest candidates in all);
a family gets an index only where that list is shorter than the family (otherwise the walk is no worse) and its
tables stay small (``MAX_TABLE`` candidate entries per specialization). Keys:
an integer argument of up to 64 bits (signed) or 32 bits (unsigned) -- read as an ``int64_t`` exactly -- or an
extent of a ``kp_tensor`` argument (read only below its rank; a specialization ranging over an extent checks the
rank among its other constraints, so the value read otherwise never decides).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.abi import Scalar
from ..launch.codes import (
    INT_RANGE,  # the types' own bounds (cdecl's are clamped to int64)
    MAX_RANK,  # KP_MAX_RANK: a kp_tensor's shape array
)
from ..launch.ranges import INT64_MAX, INT64_MIN

MAX_TABLE = 16  # an index's candidate table holds at most this many entries per specialization (else: the walk)


@dataclass(frozen=True)
class Candidate:
    """What the index needs of one specialization: its place in the spec table, its dispatch group, its range on
    each target ``(argument index, mode) -> (lo, hi)`` and its constraints as ``(C expression, target or None)``."""

    index: int
    group: int
    ranges: dict[tuple[int, int], tuple[int, int]]
    checks: tuple[tuple[str, tuple[int, int] | None], ...]
    label: str = ""


@dataclass(frozen=True)
class RangeIndex:
    """The tables of one family's index on ``key`` (argument index, mode: -1 the value, k extent k).

    ``bounds``: the sorted starts of intervals 1..len(bounds) (interval 0 starts at INT64_MIN); ``offsets``: where
    each interval's candidates start in ``cands`` (one more entry than intervals); ``cands``: positions in dispatch
    order."""

    key: tuple[int, int]
    bounds: tuple[int, ...]
    offsets: tuple[int, ...]
    cands: tuple[int, ...]

    @property
    def longest(self) -> int:
        return max(b - a for a, b in zip(self.offsets, self.offsets[1:]))

    def candidates(self, value: int) -> tuple[int, ...]:
        """The positions the entry considers for a key ``value`` (what the generated binary search finds)."""
        i = len([b for b in self.bounds if b <= value])
        return self.cands[self.offsets[i]:self.offsets[i + 1]]


def indexable(kind: str, type_: object, mode: int) -> bool:
    """Can a family argument of ``kind``/``type_`` key an index at ``mode``: an integer read exactly as int64, or a
    kp_tensor extent."""
    if mode >= 0:
        return kind in ("tensor", "desc") and mode < MAX_RANK
    if kind != "value" or not isinstance(type_, Scalar) or not type_.dtype.is_integer:
        return False
    return INT_RANGE[type_.dtype][1] <= INT64_MAX


def _index_on(key: tuple[int, int], specs: Sequence[Candidate]) -> RangeIndex | None:
    bounds = sorted({lo for s in specs if key in s.ranges and (lo := s.ranges[key][0]) > INT64_MIN}
                    | {hi + 1 for s in specs if key in s.ranges and (hi := s.ranges[key][1]) < INT64_MAX})
    if not bounds:
        return None
    lists: list[list[int]] = [[] for _ in range(len(bounds) + 1)]
    for p, s in enumerate(specs):
        lo, hi = s.ranges.get(key, (INT64_MIN, INT64_MAX))
        first = 0 if lo == INT64_MIN else bisect_left(bounds, lo) + 1
        last = len(bounds) if hi == INT64_MAX else bisect_left(bounds, hi + 1)
        for i in range(first, last + 1):
            lists[i].append(p)
    offsets = [0]
    for li in lists:
        offsets.append(offsets[-1] + len(li))
    return RangeIndex(key, tuple(bounds), tuple(offsets), tuple(p for li in lists for p in li))


def build(specs: Sequence[Candidate], keys: Sequence[tuple[int, int]]) -> RangeIndex | None:
    """The best index of a family (``specs`` in dispatch order) on one of the indexable targets ``keys``, or None
    where none makes the longest candidate list shorter than the family."""
    if len(specs) < 2 or len(specs) > 65535:
        return None
    best: RangeIndex | None = None
    for key in sorted(set(keys)):
        idx = _index_on(key, specs)
        if idx is None or len(idx.cands) > MAX_TABLE * len(specs):  # many unranged ones over many intervals
            continue
        if best is None or (idx.longest, len(idx.cands)) < (best.longest, len(best.cands)):
            best = idx
    return best if best is not None and best.longest < len(specs) else None


def _halves(n: int) -> list[int]:
    """The steps of a branch-free binary search over ``n`` sorted values: each moves past half of what is left."""
    out = []
    while n > 1:
        out.append(n // 2)
        n -= n // 2
    return out


def _uint(values: Sequence[int]) -> str:
    return "uint16_t" if max(values, default=0) <= 0xFFFF else "uint32_t"


def _lit(v: int) -> str:
    return "INT64_MIN" if v == INT64_MIN else f"INT64_C({v})"


def _rows(values: Sequence[int], per_line: int = 12, fmt=str) -> str:  # type: ignore[no-untyped-def]
    rows = [", ".join(fmt(v) for v in values[i:i + per_line]) for i in range(0, len(values), per_line)]
    return ",\n        ".join(rows)


def dispatch_c(idx: RangeIndex, specs: Sequence[Candidate], key_expr: str, key_text: str) -> str:
    """C statements choosing ``kp_best`` (the spec table index, -1: none) and ``kp_cm`` (some specialization's
    constraints held) for the entry's arguments, like the linear walk, through index ``idx``. ``key_expr``: a C
    expression of the key's value (already guarded: see :func:`key_expr`)."""
    nb = len(idx.bounds)
    cases = []
    for p, s in enumerate(specs):
        exprs = [f"({e})" for e, target in s.checks if target != idx.key]
        if exprs:
            cases.append(f"        case {p}: kp_ok = {' && '.join(exprs)}; break; /* {s.label} */\n")
    if cases:  # the candidates' other constraints, by position
        check = ("        int kp_ok = 1;\n        switch (kp_p) {\n" + "".join(cases)
                 + "        default: break;\n        }\n        if (kp_ok) {\n")
    else:
        check = "        {\n"
    search = "".join(f"    kp_ri += kp_rb[kp_ri + {h}] <= kp_x ? {h} : 0;\n" for h in _halves(nb))
    groups = [s.group for s in specs]
    return (
        f"    /* range index on {key_text} (kernelpack.clib.rangeindex): its interval among the {nb} bounds of the "
        f"ranges on it\n     * gives the candidates, in dispatch order; each is checked in full but for its range "
        f"on {key_text} */\n"
        f"    static const int64_t kp_rb[{nb}] = {{\n        {_rows(idx.bounds, 6, _lit)}}};\n"
        f"    static const {_uint(idx.offsets)} kp_ro[{len(idx.offsets)}] = {{ /* interval -> its first candidate */\n"
        f"        {_rows(idx.offsets, 16)}}};\n"
        f"    static const {_uint(idx.cands)} kp_rc[{len(idx.cands)}] = {{ /* positions, in dispatch order */\n"
        f"        {_rows(idx.cands, 16)}}};\n"
        f"    static const int32_t kp_rx[{len(specs)}] = {{ /* position -> spec table index */\n"
        f"        {_rows([s.index for s in specs], 16)}}};\n"
        f"    static const {_uint(groups)} kp_rg[{len(specs)}] = {{ /* position -> dispatch group */\n"
        f"        {_rows(groups, 16)}}};\n"
        f"    const int64_t kp_x = {key_expr};\n"
        f"    size_t kp_ri = 0; /* binary search, unrolled and branch-free: how many bounds are <= kp_x */\n"
        f"{search}"
        f"    kp_ri += kp_rb[kp_ri] <= kp_x;\n"
        f"    int kp_best = -1, kp_cm = 0, kp_g = -1;\n    int32_t kp_q, kp_bq = 0;\n"
        f"    for (size_t kp_k = kp_ro[kp_ri]; kp_k < kp_ro[kp_ri + 1]; kp_k++) {{\n"
        f"        const int kp_p = (int)kp_rc[kp_k];\n"
        f"        if (kp_best >= 0 && (int)kp_rg[kp_p] != kp_g) break; /* a more specific group has chosen */\n"
        f"        kp_g = (int)kp_rg[kp_p];\n"
        f"{check}"
        f"            kp_cm = 1;\n"
        f"            kp_q = kp_c.d->quality[kp_rx[kp_p]];\n"
        f"            if (kp_q > kp_bq) kp_best = kp_rx[kp_p], kp_bq = kp_q;\n"
        f"        }}\n    }}\n")


def key_expr(cname: str, kind: str, mode: int) -> str:
    """The key's value as int64: the integer, or the extent (0 at or beyond the tensor's rank)."""
    if mode < 0:
        return f"(int64_t){cname}"
    return f"({mode} < {cname}->rank ? {cname}->shape[{mode}] : 0)"
