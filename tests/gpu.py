"""Is a CUDA GPU usable here? Probed once through the driver with ctypes (no CUDA Python package needed).

Use ``requires_gpu`` on tests that need one (``pytestmark = GPU_MARKS`` for a whole module): they are marked ``gpu``
and skipped cleanly without a device. ``driver_present()`` says whether a CUDA driver can be opened at all.
GPU tests run artifacts compiled on a GPU-less machine by ``scripts/gpu.py prepare`` and carried over in
``$KERNELPACK_GPU_ARTIFACTS`` (``carried``, ``require_carried``).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kernelpack.bundle.kpack import Bundle

ARTIFACTS = "KERNELPACK_GPU_ARTIFACTS"
ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def driver_present() -> bool:
    """A libcuda.so.1 this process can open (a GPU need not be there)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@functools.cache
def gpu_count() -> int:
    if not driver_present():
        return 0
    lib = ctypes.CDLL("libcuda.so.1")
    if lib.cuInit(0) != 0:
        return 0
    n = ctypes.c_int(0)
    return n.value if lib.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0


GPU_MARKS = [pytest.mark.gpu, pytest.mark.skipif(gpu_count() == 0, reason="no CUDA GPU/driver")]


def requires_gpu(test):  # type: ignore[no-untyped-def]
    """Mark a test as a GPU test and skip it where no GPU and driver are present."""
    for mark in reversed(GPU_MARKS):
        test = mark(test)
    return test


def cuda_torch(*, current: bool = True) -> Any:
    """torch with its CUDA initialised (skips when torch or its GPU is missing); with ``current``, its primary context
    is made current on this thread."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    torch.cuda.init()
    if current:
        torch.empty(1, device="cuda")
    return torch


def carried(rel: str) -> Path | None:
    """``$KERNELPACK_GPU_ARTIFACTS/<rel>`` when it is there."""
    root = os.environ.get(ARTIFACTS)
    path = Path(root) / rel if root else None
    return path if path is not None and path.exists() else None


def require_carried(rel: str, step: str, *, holding: str = "") -> Path:
    """``$KERNELPACK_GPU_ARTIFACTS/<rel>`` (with ``holding`` inside it), built by ``scripts/gpu.py prepare <step>`` on
    the build machine; skips the test when absent."""
    path = carried(rel)
    if path is None or (holding and not (path / holding).exists()):
        what = f"{rel}/{holding}" if holding else rel
        pytest.skip(f"no carried {what}: run `python scripts/gpu.py prepare {step}` on the build machine, carry .gpu/ "
                    f"and set {ARTIFACTS}")
    return path


def demo_kernels() -> Bundle:
    """The demo kernels: the carried ``demo.kpack`` when there is one, else compiled here."""
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.cli.demo import compile_examples

    path = carried("demo.kpack")
    return Bundle.read(path) if path is not None else compile_examples(("sm_80", "sm_90a"))


def fa4_glue():  # type: ignore[no-untyped-def]
    """corpus/fa4/attention.py (FA4's host logic), imported by path under a name of its own."""
    import importlib.util

    name = "kp_corpus_fa4_attention"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "corpus" / "fa4" / "attention.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]
