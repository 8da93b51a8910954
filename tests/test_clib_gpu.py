"""GPU tests of generated libraries: C and C++ programs launching real kernels, results vs CPU references.

Run on a GPU machine with ``python3 -m pytest -m gpu tests/test_clib_gpu.py``; skipped cleanly without a driver.
"""

from __future__ import annotations

import subprocess

import pytest

from clib_support import HERE, bins, compile_kernels, demo_artifacts
from gpu import GPU_MARKS
from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.clib import Library
from kernelpack.core.abi import Abi, DType, Param, Pointer
from toolchain_support import CC, CXX

pytestmark = GPU_MARKS


@pytest.fixture(scope="module")
def gpu_lib(tmp_path_factory):
    root = tmp_path_factory.mktemp("clib_gpu")
    kernels = compile_kernels(root)
    only = KernelArtifact("only_80_100", "fixed_block", Abi((Param("out", Pointer(DType.f32)),)),
                          bins(kernels, "80", "100a"))
    return root, Library("demo", *demo_artifacts(kernels), only).build(root / "demo")


def _program(root, lib, src, cxx=False):
    exe = root / (src.stem + ("_cxx" if cxx else "_c"))
    compiler = [CXX, "-std=c++17"] if cxx else [CC, "-std=c99"]
    subprocess.run([*compiler, "-O2", "-Wall", "-Wextra", "-Werror", f"-I{lib.include_dir}", str(src), "-o",
                    str(exe), f"-L{lib.lib_dir}", "-ldemo", f"-Wl,-rpath,{lib.lib_dir}", "-ldl", "-lpthread"],
                   check=True)
    return exe


def _run(exe):
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "ALL PASSED" in proc.stdout, proc.stdout + proc.stderr
    return proc.stdout


def test_c_program_launches_every_kind_of_kernel(gpu_lib):
    root, lib = gpu_lib
    out = _run(_program(root, lib, HERE / "clib_gpu_main.c"))
    for check in ("add_f32_vec4_path", "add_f32_odd_n", "add_f32_misaligned", "add_f64", "pack_scalars", "tensor",
                  "big_smem", "cluster", "fixed_block", "hidden_null_scratch", "no_binary_for_arch", "fresh_thread"):
        assert f"PASS {check}\n" in out


def test_cpp_program_overloads_and_errors(gpu_lib):
    root, lib = gpu_lib
    out = _run(_program(root, lib, HERE / "clib_gpu_main.cpp", cxx=True))
    assert "PASS add_4" in out and "PASS add_8" in out and "PASS error 8" in out


def test_static_archive_program(gpu_lib):
    root, lib = gpu_lib
    exe = root / "static_c"
    subprocess.run([CC, "-std=c99", "-O2", f"-I{lib.include_dir}", str(HERE / "clib_gpu_main.c"), "-o", str(exe),
                    str(lib.static), "-ldl", "-lpthread"], check=True)
    _run(exe)
