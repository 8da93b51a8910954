"""Shared helpers for the CuTe DSL tests: load the examples under examples/cute/ from their files (CuTe needs
kernel source in a real .py file) and cache compiled artifacts for the session (CuTe compiles are slow)."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "cute"


def need_cute() -> None:
    pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl is not installed")


@functools.cache
def example(name: str) -> ModuleType:
    """examples/cute/<name>.py as module ``kp_cute_example_<name>``."""
    need_cute()
    mod_name = f"kp_cute_example_{name}"
    spec = importlib.util.spec_from_file_location(mod_name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    spec.loader.exec_module(mod)
    return mod
