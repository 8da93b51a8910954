"""Shape-range dispatch constraints: a specialization accepts an integer argument, or one extent of a tensor
argument, only inside a closed range (``n_cols <= 4096``, ``head_dim == 128``, ``M in [1, 64]``,
``x.shape[1] >= 128``).

A specialization declares them as ``KernelArtifact.ranges`` (texts as above, or ``{"M": (1, 64), "head_dim": 128,
"n_cols": (None, 4096)}``); they are normalized here into sorted :class:`Range` rows (several conditions on one
target are intersected; an empty result is refused), checked against the specialization's arguments
(:func:`check`), attached to its plan's slots (``Slot.ranges``) and from there read by the C generator, the C
extension and the Python runtime like alignment and divisibility. How ranges order a family's dispatch is
:mod:`kernelpack.launch.family`'s business (:func:`kernelpack.launch.family.check_ranges`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.records import record

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_TARGET = r"([A-Za-z_]\w*)(?:\.shape\[(\d+)\]|\[(\d+)\])?"
# compiled on first use (re caches them): the runtime imports this module, and few programs parse a range
_CMP = rf"^\s*{_TARGET}\s*(<=|<|>=|>|==)\s*(-?\d+)\s*$"
_IN = rf"^\s*{_TARGET}\s+in\s*\[\s*(-?\d+)\s*,\s*(-?\d+)\s*\]\s*$"
_BETWEEN = rf"^\s*(-?\d+)\s*(<=|<)\s*{_TARGET}\s*(<=|<)\s*(-?\d+)\s*$"
_KEY = rf"^\s*{_TARGET}\s*$"

RangesSpec = Sequence[Any] | Mapping[str, Any] | str


@record(frozen=True, order=True)
class Range:
    """``lo <= value <= hi`` for caller argument ``arg`` (``mode`` -1: its integer value; ``mode`` k: extent k of a
    tensor argument, ``shape[k]``). INT64_MIN / INT64_MAX: no bound on that side."""

    arg: str
    mode: int
    lo: int
    hi: int

    @property
    def target(self) -> str:
        return self.arg if self.mode < 0 else f"{self.arg}.shape[{self.mode}]"

    def text(self) -> str:
        """The canonical spelling (bundles store it): ``M in [1, 64]``, ``n <= 4096``, ``k >= 8``, ``d == 128``."""
        t, lo, hi = self.target, self.lo, self.hi
        if lo == hi:
            return f"{t} == {lo}"
        if lo == INT64_MIN and hi == INT64_MAX:
            return f"{t} in [{lo}, {hi}]"
        if lo == INT64_MIN:
            return f"{t} <= {hi}"
        if hi == INT64_MAX:
            return f"{t} >= {lo}"
        return f"{t} in [{lo}, {hi}]"

    def contains(self, value: int) -> bool:
        """``lo <= value <= hi``; a ``hi`` of INT64_MAX bounds nothing (a uint64 above it is inside)."""
        return self.lo <= value and (value <= self.hi or self.hi == INT64_MAX)

    def __str__(self) -> str:
        return self.text()


def _target(groups: Sequence[str | None]) -> tuple[str, int]:
    name, a, b = groups
    assert name is not None
    mode = a if a is not None else b
    return name, -1 if mode is None else int(mode)


def parse(text: str, where: str) -> Range:
    """One condition: ``n <= 4096``, ``n < 4097``, ``n >= 1``, ``n > 0``, ``d == 128``, ``M in [1, 64]``,
    ``1 <= M <= 64``, ``x.shape[1] <= 4096`` (ValueError naming ``where``)."""
    m = re.match(_CMP, text)
    if m:
        name, mode = _target(m.groups()[:3])
        op, v = m.group(4), int(m.group(5))
        lo, hi = {"<=": (INT64_MIN, v), "<": (INT64_MIN, v - 1), ">=": (v, INT64_MAX), ">": (v + 1, INT64_MAX),
                  "==": (v, v)}[op]
        return _make(name, mode, lo, hi, text, where)
    m = re.match(_IN, text)
    if m:
        name, mode = _target(m.groups()[:3])
        return _make(name, mode, int(m.group(4)), int(m.group(5)), text, where)
    m = re.match(_BETWEEN, text)
    if m:
        lo, op1 = int(m.group(1)), m.group(2)
        name, mode = _target(m.groups()[2:5])
        op2, hi = m.group(6), int(m.group(7))
        return _make(name, mode, lo + (op1 == "<"), hi - (op2 == "<"), text, where)
    raise ValueError(f"{where}: cannot read range constraint {text!r}; write e.g. 'n_cols <= 4096', "
                     f"'head_dim == 128', 'M in [1, 64]', '1 <= M <= 64' or 'x.shape[1] >= 128'")


def _make(name: str, mode: int, lo: int, hi: int, text: str, where: str) -> Range:
    lo, hi = max(lo, INT64_MIN), min(hi, INT64_MAX)
    if lo > hi:
        raise ValueError(f"{where}: range constraint {text!r} is empty (contradictory: no value satisfies it)")
    return Range(name, mode, lo, hi)


def _from_item(key: str, value: Any, where: str) -> Range:
    m = re.match(_KEY, key)
    if not m:
        raise ValueError(f"{where}: range constraint key {key!r} is not an argument name or 'name.shape[k]'")
    name, mode = _target(m.groups())
    text = f"{key}: {value!r}"
    if isinstance(value, bool):
        raise ValueError(f"{where}: range constraint {text} must be an int or a [lo, hi] pair")
    if isinstance(value, int):
        return _make(name, mode, value, value, text, where)
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2 and all(
            v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in value):
        lo = INT64_MIN if value[0] is None else value[0]
        hi = INT64_MAX if value[1] is None else value[1]
        return _make(name, mode, lo, hi, text, where)
    raise ValueError(f"{where}: range constraint {text} must be an int (equality) or a [lo, hi] pair of ints "
                     f"(None: unbounded)")


def normalize(ranges: RangesSpec | None, where: str) -> tuple[Range, ...]:
    """Texts, ``{target: value or (lo, hi)}`` or :class:`Range` rows as sorted rows, one per target (conditions
    on one target intersected); ValueError naming ``where`` for one that cannot be read or an empty one."""
    if not ranges:
        return ()
    if isinstance(ranges, str):
        ranges = [ranges]
    rows: list[Range] = []
    if isinstance(ranges, Mapping):
        rows = [_from_item(str(k), v, where) for k, v in ranges.items()]
    else:
        for item in ranges:
            if isinstance(item, Range):
                rows.append(_make(item.arg, item.mode, item.lo, item.hi, item.text(), where))
            elif isinstance(item, str):
                rows.append(parse(item, where))
            else:
                raise ValueError(f"{where}: a range constraint is a text such as 'n <= 4096' (got {item!r})")
    out: dict[tuple[str, int], Range] = {}
    for r in rows:
        key = (r.arg, r.mode)
        have = out.get(key)
        if have is not None:
            lo, hi = max(have.lo, r.lo), min(have.hi, r.hi)
            if lo > hi:
                raise ValueError(f"{where}: range constraints '{have.text()}' and '{r.text()}' contradict each other "
                                 f"(no value of {r.target} satisfies both)")
            r = Range(r.arg, r.mode, lo, hi)
        out[key] = r
    return tuple(sorted(out.values()))


def texts(ranges: Sequence[Range]) -> list[str]:
    return [r.text() for r in ranges]


def text(ranges: Sequence[Range]) -> str:
    """``M in [1, 64], n <= 4096`` (messages, docs, headers)."""
    return ", ".join(r.text() for r in ranges)


def check(label: str, plan: Any, ranges: Sequence[Range]) -> None:
    """ValueError unless every row names a caller argument of ``plan`` (a kernelpack.launch.plan.Plan) that can
    hold it -- an integer argument's value, an extent within a tensor's rank -- and leaves it some value."""
    from .plan import value_range

    args = {s.name: s for s in plan.args}
    for r in ranges:
        s = args.get(r.arg)
        if s is None:
            raise ValueError(f"kernel {label}: range constraint '{r.text()}' names no argument (arguments: "
                             f"{', '.join(args) or 'none'})")
        have = value_range(s, r.mode)
        if have is None:
            what = ("an integer argument's value" if r.mode < 0 else
                    "an extent of a tensor argument (within its rank)")
            raise ValueError(f"kernel {label}: range constraint '{r.text()}' must bound {what}; argument "
                             f"{s.describe()} has no {'integer value' if r.mode < 0 else f'extent {r.mode}'}")
        if max(r.lo, have[0]) > min(r.hi, have[1]):
            raise ValueError(f"kernel {label}: range constraint '{r.text()}' leaves argument {s.describe()} no "
                             f"value (it holds [{have[0]}, {have[1]}]); the range is contradictory")
