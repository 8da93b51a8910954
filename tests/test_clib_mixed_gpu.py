"""On the H200: one library (kernelpack.Library) holding CuTe host programs, CuTe kernel-level artifacts and Triton
kernels, built on the GPU-less machine by `scripts/gpu.py prepare cute` (.gpu/cute/kpmix), called from C++ through
the shared and the static library."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clib_support import HERE
from gpu import require_carried, requires_gpu
from toolchain_support import CXX


def _lib() -> Path:
    return require_carried("cute/kpmix", "cute", holding="lib/libkpmix.so")


@requires_gpu
@pytest.mark.parametrize("kind", ["shared", "static"])
def test_cpp_program_against_a_mixed_library(tmp_path, kind):
    lib = _lib()
    exe = tmp_path / f"mixed_{kind}"
    link = ([f"-L{lib / 'lib'}", "-lkpmix", f"-Wl,-rpath,{lib / 'lib'}"] if kind == "shared"
            else [str(lib / "lib" / "libkpmix.a")])
    subprocess.run([CXX, "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{lib / 'include'}",
                    str(HERE / "clib_mixed_gpu_main.cpp"), "-o", str(exe), *link, "-ldl", "-lpthread"], check=True)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "ALL PASSED" in proc.stdout, proc.stdout + proc.stderr
    for check in ("gemm_f16_200x136x264", "ew_add_grid_from_formula", "ew_add_zero_extent_skipped",
                  "tr_scale_rows_in_mixed_library"):
        assert f"PASS {check}\n" in proc.stdout
