"""GPU architecture names: ``sm_90a`` (SASS for that arch) and ``compute_90`` (PTX for the driver to JIT).

Which binary a device runs is the launch model's rule (:mod:`kernelpack.launch.binaries`); this module only names
targets and refuses names that are no NVIDIA arch (``sm_95``) or a suffix that arch does not have (``sm_80a``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .errors import KernelpackError
from .records import record
from .suggest import did_you_mean

# fullmatch; ASCII digits only. Patterns are compiled on first use (re caches them): sre compiles in Python, and
# `import kernelpack` pays for every module-level re.compile
_ARCH_RE = r"(sm_|compute_)?([1-9][0-9]?)([0-9])([af]?)"
_PARSED: dict[str, Arch] = {}  # Arch.parse memo: names read again and again (a first launch reads a few)

# Every SM number NVIDIA has shipped a toolkit target for (CUDA 12.x/13.x --list-gpu-arch, sm_101 being CUDA 12.9's
# name for what CUDA 13 calls sm_110), and which of them have arch-specific ("a", sm_90 on) and family-specific
# ("f", CUDA 12.9 on, Blackwell on) variants.
KNOWN_SM = (30, 32, 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121)
HAS_SUFFIX = {"a": frozenset({90, 100, 101, 103, 110, 120, 121}), "f": frozenset({100, 101, 103, 110, 120, 121})}


@record(frozen=True, order=True)
class Arch:
    """A CUDA target: ``sm_<major><minor>[a|f]`` (SASS), or with ``virtual`` ``compute_<major><minor>[a|f]`` (PTX).

    ``a`` (architecture-specific) binaries run only on exactly that compute capability;
    ``f`` (family) binaries on the same major with minor >= this one; plain SASS likewise; plain PTX on any device
    at or above it (the driver JIT-compiles it).
    """

    major: int
    minor: int
    suffix: str = ""
    virtual: bool = False  # compute_XY: PTX for that virtual arch

    @classmethod
    def parse(cls, text: str | Arch) -> Arch:
        """``sm_90a`` (any case) -> Arch; ``compute_90`` -> the virtual Arch (PTX). One rule: an arch is a name with
        its prefix. Anything else -- a bare number (``90`` or ``"90"``: SASS ``sm_90`` or ``sm_90a``, or PTX?), a
        malformed name, an SM no NVIDIA GPU has, a suffix that arch lacks -- is a KernelpackError naming the value
        and, where one is near, the name meant (``sm90`` -> ``sm_90``)."""
        if isinstance(text, Arch):
            return text
        got = _PARSED.get(text) if isinstance(text, str) else None
        if got is not None:
            return got
        if not isinstance(text, str):
            hint = f"; write 'sm_{text}'" if isinstance(text, int) and not isinstance(text, bool) else ""
            raise KernelpackError(f"a CUDA arch must be a string such as 'sm_80' or 'sm_90a' (got "
                                  f"{type(text).__name__} {text!r:.40}{hint})")
        m = re.fullmatch(_ARCH_RE, text.strip().lower())
        if not m or not m.group(1):
            raise KernelpackError(f"not a CUDA arch: {text!r:.60} (expected e.g. 'sm_80', 'sm_90a', 'sm_100f', "
                                  f"'compute_90'{_nearest(text)})")
        major, minor, suffix = int(m.group(2)), int(m.group(3)), m.group(4)
        sm = major * 10 + minor
        if sm not in KNOWN_SM:
            raise KernelpackError(f"not a CUDA arch: {text!r:.60} (no NVIDIA GPU has SM {sm}; known: "
                                  f"{', '.join(f'sm_{k}' for k in KNOWN_SM)}{_nearest(text)})")
        if suffix and sm not in HAS_SUFFIX[suffix]:
            kind = "arch-specific" if suffix == "a" else "family-specific"
            have = ", ".join(f"sm_{k}{suffix}" for k in sorted(HAS_SUFFIX[suffix]))
            raise KernelpackError(f"not a CUDA arch: {text!r:.60} (sm_{sm} has no {kind} '{suffix}' target; those "
                                  f"are {have}{_nearest(text)})")
        arch = cls(major, minor, suffix, m.group(1) == "compute_")
        if cls is Arch and len(_PARSED) < 1024:  # a few names per process; a flood of odd spellings is not kept
            _PARSED[text] = arch
        return arch

    @property
    def sm(self) -> int:
        """The numeric SM version, e.g. 90 for sm_90a."""
        return self.major * 10 + self.minor

    @property
    def real(self) -> Arch:
        """The SASS arch of the same name (``compute_90a`` -> ``sm_90a``); itself when it is one."""
        return Arch(self.major, self.minor, self.suffix) if self.virtual else self

    @property
    def ptx_name(self) -> str:
        """``compute_90a``: the virtual arch of the same name (what PTX for this arch is called)."""
        return f"compute_{self.major}{self.minor}{self.suffix}"

    def __str__(self) -> str:
        return self.ptx_name if self.virtual else f"sm_{self.major}{self.minor}{self.suffix}"


def all_names() -> list[str]:
    """Every arch name :meth:`Arch.parse` accepts (``sm_80``, ``sm_90a``, ``compute_100f``, ...)."""
    out = []
    for sm in KNOWN_SM:
        for suffix in ("", "a", "f"):
            if not suffix or sm in HAS_SUFFIX[suffix]:
                out += [f"sm_{sm}{suffix}", f"compute_{sm}{suffix}"]
    return out


def _nearest(text: str) -> str:
    """``; did you mean 'sm_90'?`` for a near miss: the same digits and suffix spelled as a name (``sm90``, ``90``,
    ``SM-90a``); for a suffix the arch lacks, the plain arch and the nearest newer one with the suffix (``sm_89a`` ->
    ``sm_89`` or ``sm_90a``); for an SM no GPU has, the nearest ones that exist (``sm_95`` -> ``sm_90`` or
    ``sm_100``); else the nearest spellings."""
    folded = text.strip().lower()
    m = re.fullmatch(r"(sm|compute)?[ _-]*([0-9]{1,4})([af]?)", folded)
    if not m:
        return did_you_mean(folded, all_names(), n=2)
    prefix, suffix = m.group(1) or "sm", m.group(3)
    sm = int(m.group(2)) * (10 if len(m.group(2)) == 1 else 1)  # sm_9: the major alone

    def name(k: int, sfx: str = suffix) -> str:
        return f"{prefix}_{k}{sfx}"

    if sm in KNOWN_SM and (not suffix or sm in HAS_SUFFIX[suffix]):
        near = [name(sm)]
    elif sm in KNOWN_SM:  # the suffix is what is wrong
        newer = [k for k in sorted(HAS_SUFFIX[suffix]) if k > sm]
        near = [name(sm, ""), *([name(newer[0])] if newer else [])]
    else:
        have = [k for k in KNOWN_SM if not suffix or k in HAS_SUFFIX[suffix]]
        below, above = [k for k in have if k < sm], [k for k in have if k > sm]
        near = [name(k) for k in (below[-1:] + above[:1])]
    return "; did you mean " + " or ".join(repr(n) for n in near) + "?" if near else ""


def parse_archs(archs: str | Arch | Sequence[str | Arch]) -> tuple[Arch, ...]:
    """Parse one arch or a list of them; order kept, duplicates removed; at least one required."""
    if isinstance(archs, (str, Arch)):
        items: list[object] = [archs]
    elif isinstance(archs, (list, tuple)):
        items = list(archs)
    else:
        hint = f"; write 'sm_{archs}'" if isinstance(archs, int) and not isinstance(archs, bool) else ""
        raise KernelpackError(f"arch must be an arch name such as 'sm_90a' or a list of them (got "
                              f"{type(archs).__name__} {archs!r:.40}{hint})")
    out: list[Arch] = []
    for item in items:
        a = Arch.parse(item)  # type: ignore[arg-type]  # checked inside
        if a not in out:
            out.append(a)
    if not out:
        raise KernelpackError("no target arch given: pass arch=['sm_80', 'sm_90a', ...]")
    return tuple(out)
