"""GPU architecture names (``sm_90a``) and the rule for which binary runs on which device."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import KernelpackError

_ARCH_RE = re.compile(r"(?:sm_|compute_)?([1-9][0-9]?)([0-9])([af]?)")  # fullmatch; ASCII digits only


@dataclass(frozen=True, order=True)
class Arch:
    """A CUDA target: ``sm_<major><minor>[a|f]``.

    ``a`` (architecture-specific) binaries run only on exactly that compute capability;
    ``f`` (family) binaries on the same major with minor >= this one; plain ones likewise.
    """

    major: int
    minor: int
    suffix: str = ""

    @classmethod
    def parse(cls, text: str | Arch) -> Arch:
        """``sm_90a`` (also ``compute_90a``, ``90a``, any case) -> Arch; anything else (an int such as 90, a
        malformed name) is a KernelpackError naming the value."""
        if isinstance(text, Arch):
            return text
        if not isinstance(text, str):
            hint = f"; write 'sm_{text}'" if isinstance(text, int) and not isinstance(text, bool) else ""
            raise KernelpackError(f"a CUDA arch must be a string such as 'sm_80' or 'sm_90a' (got "
                                  f"{type(text).__name__} {text!r:.40}{hint})")
        m = _ARCH_RE.fullmatch(text.strip().lower())
        if not m:
            raise KernelpackError(f"not a CUDA arch: {text!r:.60} (expected e.g. 'sm_80', 'sm_90a', 'sm_100a')")
        return cls(int(m.group(1)), int(m.group(2)), m.group(3))

    @property
    def sm(self) -> int:
        """The numeric SM version, e.g. 90 for sm_90a."""
        return self.major * 10 + self.minor

    def __str__(self) -> str:
        return f"sm_{self.major}{self.minor}{self.suffix}"

    def runs_on(self, major: int, minor: int) -> bool:
        """True when a SASS binary for this arch can run on a device of compute capability major.minor."""
        if self.suffix == "a":
            return (major, minor) == (self.major, self.minor)
        return major == self.major and minor >= self.minor


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
