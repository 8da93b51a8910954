"""Which of a kernel's binaries a device runs: one rule, as data, for the C library, the Python runtime and the
CuTe host entries (``csrc/kp_model.h`` renders the table and the function that reads it).

Each binary gets a quality for a device of compute capability ``major.minor``: 0 means it cannot run there; the
highest quality wins (then bundle order). Per NVIDIA's compatibility rules: arch-specific SASS (``sm_90a``) runs
only on exactly that arch and beats everything; family-specific SASS (``sm_100f``: 10.0 and 10.3) and plain SASS
run on the same major with an equal or newer minor (the newest such minor first; family and plain of one minor
tie, and bundle order decides); PTX is JIT-compiled by the driver for any device at or above its virtual arch
(arch-specific PTX only on exactly that arch, family-specific PTX only on that family), the newest PTX first, after
every SASS binary. When nothing fits, both back ends fail with KP_ERROR_NO_BINARY_FOR_ARCH naming the device's arch
and what the kernel carries (:func:`describe_binaries`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..arch import Arch

MATCH_EXACT, MATCH_SAME_MAJOR, MATCH_AT_MOST = 1, 2, 3  # the device is exactly / same major, minor >= / sm >=
PLUS_NONE, PLUS_MINOR, PLUS_SM = 0, 1, 2


@dataclass(frozen=True)
class BinaryRule:
    """Binaries of kind ``ptx`` (else SASS) whose arch suffix is ``suffix`` ("" = any suffix no other row of that
    kind names) run where ``match`` holds, with quality ``base`` plus the binary's minor or SM number."""

    ptx: bool
    suffix: str
    match: int
    base: int
    plus: int


RULES: tuple[BinaryRule, ...] = (
    BinaryRule(False, "a", MATCH_EXACT, 3000, PLUS_NONE),
    BinaryRule(False, "f", MATCH_SAME_MAJOR, 2000, PLUS_MINOR),
    BinaryRule(False, "", MATCH_SAME_MAJOR, 2000, PLUS_MINOR),
    BinaryRule(True, "a", MATCH_EXACT, 1000, PLUS_SM),
    BinaryRule(True, "f", MATCH_SAME_MAJOR, 1000, PLUS_SM),
    BinaryRule(True, "", MATCH_AT_MOST, 1000, PLUS_SM),
)


def rule_for(ptx: bool, suffix: str) -> BinaryRule:
    named = [r for r in RULES if r.ptx == ptx and r.suffix == suffix and suffix]
    return named[0] if named else next(r for r in RULES if r.ptx == ptx and not r.suffix)


def quality(arch: Arch, ptx: bool, major: int, minor: int) -> int:
    """How well a binary for ``arch`` (PTX when ``ptx``) fits a device of compute capability major.minor
    (0: it cannot run there)."""
    r = rule_for(ptx, arch.suffix)
    if r.match == MATCH_EXACT:
        ok = (arch.major, arch.minor) == (major, minor)
    elif r.match == MATCH_SAME_MAJOR:
        ok = arch.major == major and arch.minor <= minor
    else:
        ok = arch.sm <= major * 10 + minor
    if not ok:
        return 0
    return r.base + (arch.minor if r.plus == PLUS_MINOR else arch.sm if r.plus == PLUS_SM else 0)


def best(binaries: Sequence[tuple[Arch, bool]], major: int, minor: int) -> int | None:
    """The index of the binary (arch, is PTX) a device of compute capability major.minor runs: the best quality,
    the first in order among equals; None when none can run there."""
    top, at = 0, None
    for i, (arch, ptx) in enumerate(binaries):
        q = quality(arch, ptx, major, minor)
        if q > top:
            top, at = q, i
    return at


def describe_binaries(binaries: Sequence[tuple[Arch, bool]]) -> str:
    """``sm_90a, compute_80 PTX``: what a kernel carries, as the C library's NO_BINARY message spells it."""
    return ", ".join(f"{a.ptx_name} PTX" if ptx else str(a.real) for a, ptx in binaries)
