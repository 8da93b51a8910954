"""Configs left out for an arch: a family of interchangeable configs (an autotuned kernel's) keeps, for each arch, the
configs that fit it (:func:`kernelpack.bundle.artifact.over_limits`); the others simply have no binary of that arch,
and dispatch there picks another config. What must hold once the family is whole (after one ``compile`` call, or
after every step of ``kernelpack build``): each arch a config was left out for is still carried by some config of
its family -- else nothing of the kernel would run there, and the build is refused naming each config's need.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..core.errors import ConfigDropped, LimitError
from .artifact import KernelArtifact


def check_pruned(artifacts: Iterable[KernelArtifact], dropped: Sequence[ConfigDropped]) -> None:
    """LimitError naming the kernel, the arch and why each config was left out, where no config of a family that
    lost one to ``dropped`` carries that arch."""
    carried: dict[str, set[str]] = {}
    for a in artifacts:
        carried.setdefault(a.name, set()).update(str(b.target) for b in a.binaries)
    missing: dict[tuple[str, str], list[ConfigDropped]] = {}
    for d in dropped:
        if d.arch not in carried.get(d.kernel, set()):
            missing.setdefault((d.kernel, d.arch), []).append(d)
    for (kernel, arch), ds in sorted(missing.items()):
        why = "; ".join(f"{d.label} {d.reason}" for d in ds)
        raise LimitError(f"kernel {kernel}: no config fits {arch}: {why}")
