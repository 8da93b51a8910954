"""GPU architecture names (``sm_90a``) and the rule for which binary runs on which device."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import KernelpackError

_ARCH_RE = re.compile(r"^(?:sm_|compute_)?(\d+)(\d)([af]?)$")


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
        if isinstance(text, Arch):
            return text
        m = _ARCH_RE.match(str(text).strip().lower())
        if not m:
            raise KernelpackError(f"not a CUDA arch: {text!r} (expected e.g. 'sm_80', 'sm_90a', 'sm_100a')")
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
    items = [archs] if isinstance(archs, (str, Arch)) else list(archs)
    out: list[Arch] = []
    for item in items:
        a = Arch.parse(item)
        if a not in out:
            out.append(a)
    if not out:
        raise KernelpackError("no target arch given: pass arch=['sm_80', 'sm_90a', ...]")
    return tuple(out)
