"""The Python runtime: load a bundle or a built library and launch its kernels with no JIT and no DSL.

    kernels = kernelpack.load("kernels.kpack")      # or "libkernels.so"
    kernels.axpy(0.5, x, y, n, grid=(n + 255) // 256, block=256)

See :func:`load`. Kernels launch through the C extension ``_launch`` when it is built (per launch it only reads
pointers and sizes and calls the driver), else through a pure-Python path that does the same checks.
"""

from __future__ import annotations

from .errors import (
    ArgumentError,
    ArgumentTypeError,
    ArgumentValueError,
    DriverError,
    NoBinaryForDevice,
    NoMatchingSpecialization,
)
from .fast import FallbackWarning
from .module import KernelModule, load


def fast_path() -> dict[str, bool]:
    """What the fast path can do in this process: ``extension``, ``driver``, ``torch_bridge``, ``torch_streams``."""
    from .fast import extension

    ext = extension()
    if ext is None:
        return {"extension": False, "driver": False, "torch_bridge": False, "torch_streams": False}
    return {"extension": True, **ext.state()}


__all__ = ["ArgumentError", "ArgumentTypeError", "ArgumentValueError", "DriverError", "FallbackWarning", "KernelModule",
           "NoBinaryForDevice", "NoMatchingSpecialization", "fast_path", "load"]
