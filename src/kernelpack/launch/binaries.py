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

from ..core.arch import Arch
from ..core.errors import KernelpackError
from ..core.records import record

MATCH_EXACT, MATCH_SAME_MAJOR, MATCH_AT_MOST = 1, 2, 3  # the device is exactly / same major, minor >= / sm >=
PLUS_NONE, PLUS_MINOR, PLUS_SM = 0, 1, 2


@record(frozen=True)
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


def runs_on(arch: Arch, major: int, minor: int) -> bool:
    """True when a binary for ``arch`` (PTX when the arch is virtual: ``compute_80``) can run on a device of compute
    capability major.minor."""
    return quality(arch.real, arch.virtual, major, minor) > 0


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
    return ", ".join(binary_name(a, ptx) for a, ptx in binaries)


def binary_name(arch: Arch, ptx: bool) -> str:
    """``sm_90a`` for SASS, ``compute_80 PTX`` for PTX: how both back ends name the binary a device gets."""
    return f"{arch.ptx_name} PTX" if ptx else str(arch.real)


def device_arch(device: str) -> tuple[int, int]:
    """The compute capability of a device named by its arch (``sm_120`` -> (12, 0)). A device is plain ``sm_XY``:
    ``sm_90a`` and ``compute_90`` name binaries, not devices, and an SM no NVIDIA GPU has is refused."""
    if not isinstance(device, str):
        raise KernelpackError(f"a device arch must be a string such as 'sm_120' (got {type(device).__name__} "
                              f"{device!r:.40})")
    a = Arch.parse(device)
    if a.virtual or a.suffix:
        what = "PTX" if a.virtual else "SASS"
        raise KernelpackError(f"not a device arch: {device!r:.60} names a binary target ({what} for {a}); a device "
                              f"is plain sm_XY, e.g. 'sm_{a.sm}'")
    return a.major, a.minor


def choice(label: str, binaries: Sequence[tuple[Arch, bool]], major: int, minor: int) -> tuple[str | None, str]:
    """What kernel ``label`` runs on a device of compute capability major.minor: (``binary_name``, "") or, when
    nothing fits, (None, the NO_BINARY_FOR_ARCH message both back ends give)."""
    at = best(binaries, major, minor)
    if at is not None:
        return binary_name(*binaries[at]), ""
    return None, f"kernel {label} has no binary for sm_{major}{minor}: it carries {describe_binaries(binaries)}"


def family_choice(family: str, specs: Sequence[tuple[str, Sequence[tuple[Arch, bool]]]], major: int,
                  minor: int) -> tuple[str | None, str, bool]:
    """The answer for a family of specializations (label, binaries): (name, "", ok) when all of them get the same
    binary; (None, first NO_BINARY message, True) when none has one; (None, why, False) when they differ (name a
    specialization). The C library's NAME_binary_for_device applies the same rule."""
    answers = [(label, *choice(label, bins, major, minor)) for label, bins in specs]
    names = {a[1] for a in answers}
    if len(names) == 1:
        name = answers[0][1]
        return (name, "", True) if name is not None else (None, answers[0][2], True)
    listed = ", ".join(f"{label}: {name or 'no binary'}" for label, name, _ in answers)
    return None, (f"kernel {family}: its specializations get different binaries on sm_{major}{minor} ({listed}); "
                  f"name one"), False
