"""Shared helpers for the CuTe DSL tests: load the examples under examples/cute/ from their files (CuTe needs
kernel source in a real .py file) and cache compiled artifacts for the session (CuTe compiles are slow)."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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


@functools.cache
def host_programs() -> list[Any]:
    """The host programs of the CuTe host-library tests (compiled once per session): ew_add (f32, bf16),
    scale_shift, and the Hopper gemm (f16, bf16)."""
    import cutlass

    import kernelpack.cute as kc

    ea, ps, hg = example("elementwise_add"), example("policy_scale"), example("hopper_gemm")
    out = [kc.export(ea.elementwise_add, *ea.example_args(dt), arch=["sm_80", "sm_90a"], name="ew_add", variant=v)
           for dt, v in ((cutlass.Float32, "f32"), (cutlass.BFloat16, "bf16"))]
    out.append(kc.export(ps.ScaleShift(), *ps.example_args(), arch=["sm_80", "sm_90a"], name="scale_shift"))
    out += [kc.export(hg.HopperGemm(), *hg.example_args(dt), arch="sm_90a", name="gemm", variant=v)
            for dt, v in ((cutlass.Float16, "f16"), (cutlass.BFloat16, "bf16"))]
    return out
