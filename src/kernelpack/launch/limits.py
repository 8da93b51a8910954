"""Per-arch launch limits, checked when a binary becomes part of an artifact: a binary whose launch cannot fit any
device it runs on is refused at compile, never shipped to fail at launch.

Shared memory: a block's static shared memory (the cubin's) and dynamic shared memory (its LaunchSpec) together must
fit the opt-in maximum per block (:data:`.codes.SM_LIMITS`) of some device the binary runs on
(:func:`.binaries.runs_on`): a plain ``sm_80`` cubin runs on 8.0 and 8.7 (163 KiB) as well as 8.6 and 8.9 (99 KiB), so
it may have up to 163 KiB -- the build summary warns about the devices where it will not launch; ``sm_90a`` exactly
227 KiB; ``compute_80`` PTX, any device from 8.0 on, 227 KiB. What a device allows is read from it again at launch.
"""

from __future__ import annotations

from ..core.arch import Arch
from .binaries import runs_on
from .codes import SM_LIMITS


def smem_limit(target: Arch) -> int | None:
    """The most shared memory (bytes, static and dynamic together) a block of a binary built for ``target``
    (``sm_80``, ``compute_80`` for PTX) can have: the largest opt-in maximum among the devices it runs on; None when
    it runs on no device of the table."""
    limits = [lim.smem_block for (major, minor), lim in SM_LIMITS.items() if runs_on(target, major, minor)]
    return max(limits) if limits else None


def smem_overflow(target: Arch, static: int, dynamic: int) -> str | None:
    """Why a block of ``static`` + ``dynamic`` bytes of shared memory of a binary for ``target`` launches nowhere
    (None: it fits)."""
    limit = smem_limit(target)
    need = static + dynamic
    if limit is None or need <= limit:
        return None
    parts = f"{dynamic:,} dynamic + {static:,} static" if static else f"{dynamic:,} dynamic"
    name = f"{target} PTX" if target.virtual else str(target)
    return (f"needs {need:,} bytes of shared memory per block ({parts}); {name} allows at most {limit:,} "
            f"({limit // 1024} KiB, with opt-in)")
