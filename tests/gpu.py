"""Is a CUDA GPU usable here? Probed once through the driver with ctypes (no CUDA Python package needed).

Use ``requires_gpu`` on tests that need one: they are marked ``gpu`` and skipped cleanly without a device.
"""

from __future__ import annotations

import ctypes
import functools

import pytest


@functools.cache
def gpu_count() -> int:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    if lib.cuInit(0) != 0:
        return 0
    n = ctypes.c_int(0)
    return n.value if lib.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0


def requires_gpu(test):  # type: ignore[no-untyped-def]
    """Mark a test as a GPU test and skip it where no GPU and driver are present."""
    return pytest.mark.gpu(pytest.mark.skipif(gpu_count() == 0, reason="no CUDA GPU/driver")(test))
