"""Fixtures shared by the Triton and cuTile GPU tests: the carried bundles and a CUDA-ready torch."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kernelpack.artifact import KernelArtifact
from kernelpack.bundle import Bundle


def carried(name: str) -> Path:
    """``$KERNELPACK_GPU_ARTIFACTS/frontends/<name>``: compiled by scripts/gpu_prepare_frontends.py (skip if absent)."""
    root = os.environ.get("KERNELPACK_GPU_ARTIFACTS")
    path = Path(root) / "frontends" / name if root else None
    if path is None or not path.is_file():
        pytest.skip(f"no carried {name}: run scripts/gpu_prepare_frontends.py on the build machine and set "
                    f"KERNELPACK_GPU_ARTIFACTS")
    return path


def load_bundle(name: str) -> Bundle:
    return Bundle.read(carried(name))


def cuda_torch() -> Any:
    torch = pytest.importorskip("torch")
    torch.cuda.init()
    torch.empty(1, device="cuda")  # makes the primary context current on this thread
    return torch


def get(bundle: Bundle, label: str) -> KernelArtifact:
    return next(a for a in bundle if a.label == label)


def runtime_module(path: Path) -> Any:
    """``kernelpack.load(path)`` once the Python runtime is there, else skip."""
    try:
        from kernelpack.runtime import load
    except ImportError:
        pytest.skip("kernelpack.runtime is not available yet")
    return load(path)
