"""Fixtures shared by the Triton and cuTile GPU tests: the carried bundles and a CUDA-ready torch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu import require_carried
from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.bundle.kpack import Bundle


def carried(name: str) -> Path:
    """``$KERNELPACK_GPU_ARTIFACTS/frontends/<name>``: compiled by ``scripts/gpu.py prepare frontends`` (skip if
    absent)."""
    return require_carried(f"frontends/{name}", "frontends")


def load_bundle(name: str) -> Bundle:
    return Bundle.read(carried(name))


def get(bundle: Bundle, label: str) -> KernelArtifact:
    return next(a for a in bundle if a.label == label)


def runtime_module(path: Path) -> Any:
    """``kernelpack.load(path)`` once the Python runtime is there, else skip."""
    try:
        from kernelpack.runtime import load
    except ImportError:
        pytest.skip("kernelpack.runtime is not available yet")
    return load(path)
