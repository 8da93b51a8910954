"""The examples (examples/<dsl>/: kernel -> kernelpack.toml -> library -> C++ program and Python script).

GPU-less: each project builds, its C++ program compiles warning-free and links against the library (and runs up to
the point where it needs the driver), its Python script loads the library and binds the kernels; the CUDA example
also builds through CMake's find_package and pkg-config. On a GPU (artifacts carried in
$KERNELPACK_GPU_ARTIFACTS/examples/<dsl>/ by `scripts/gpu.py prepare examples`): both run and check their results.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from example_builds import ALL, EXAMPLES, Example, build_example, compile_program
from gpu import gpu_count, require_carried, requires_gpu
from toolchain_support import CXX

IDS = [e.dsl for e in ALL]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every buildable example, built once per session (fresh compile cache) into a temp prefix each."""
    from kernelpack.core import config

    root = tmp_path_factory.mktemp("examples")
    out: dict[str, Path] = {}
    with config.override(cache_dir=root / "cache"):
        for ex in ALL:
            if ex.buildable():
                build_example(ex, root / ex.dsl)
                out[ex.dsl] = root / ex.dsl
    return out


def _prefix(built: dict[str, Path], ex: Example) -> Path:
    if ex.dsl not in built:
        pytest.skip(f"{ex.needs or 'a CUDA C++ compiler'} is not installed")
    return built[ex.dsl]


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_cpp_program_links_and_runs_up_to_the_driver(ex: Example, built, tmp_path: Path) -> None:
    prefix = _prefix(built, ex)
    exe = tmp_path / f"{ex.dsl}_demo"
    r = compile_program(ex, prefix, exe)
    assert r.returncode == 0, r.stderr
    env = dict(os.environ, LD_LIBRARY_PATH="/nonexistent")  # no libcuda.so.1 here: the program says so cleanly
    if gpu_count() > 0:
        pytest.skip("a driver is present: the GPU test runs the program")
    run = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 2 and "libcuda.so.1 not found" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_python_script_loads_and_binds(ex: Example, built) -> None:
    prefix = _prefix(built, ex)
    r = subprocess.run([sys.executable, str(ex.dir / "run.py"), str(prefix), "--bind-only"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "<kernelpack kernel" in r.stdout


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_library_carries_every_example_kernel(ex: Example, built) -> None:
    from kernelpack.clib import read_embedded_bundle

    prefix = _prefix(built, ex)
    bundle = read_embedded_bundle(prefix / "lib" / f"lib{ex.name}.so")
    expected = {"cuda": {"saxpy", "relu[float]", "relu[double]"}, "triton": {"add[any]", "add[aligned]", "axpy"},
                "cutile": {"vadd[f32]", "vadd[f16]", "scale"}, "cute": {"ew_add[f32]", "ew_add[bf16]"}}[ex.dsl]
    assert {a.label for a in bundle} == expected
    assert all({str(x) for x in a.archs} >= {"sm_80", "sm_90a"} for a in bundle)


def test_cuda_example_through_cmake_and_pkg_config(built, tmp_path: Path) -> None:
    ex = ALL[0]
    prefix = _prefix(built, ex)
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake not installed")
    b = tmp_path / "cbuild"
    r = subprocess.run([cmake, "-S", str(ex.dir), "-B", str(b), f"-DCMAKE_PREFIX_PATH={prefix}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([cmake, "--build", str(b)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (b / "ex_cuda_demo").is_file()
    pc = shutil.which("pkg-config")
    if pc is None:
        return
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = subprocess.run([pc, "--cflags", "--libs", "ex_cuda"], capture_output=True, text=True, env=env,
                           check=True).stdout.split()
    exe = tmp_path / "pc_demo"
    r = subprocess.run([CXX, "-std=c++17", f"-I{EXAMPLES / 'common'}", str(ex.dir / "main.cpp"), *flags, "-ldl",
                        "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------------------------------- on the GPU


def _carried(ex: Example) -> Path:
    return require_carried(f"examples/{ex.dsl}", "examples", holding=f"lib/lib{ex.name}.so")


@requires_gpu
@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_gpu_cpp_program(ex: Example, tmp_path: Path) -> None:
    prefix = _carried(ex)
    exe = tmp_path / f"{ex.dsl}_demo"
    r = compile_program(ex, prefix, exe, werror=False)  # (another compiler version there: warnings are not the test)
    assert r.returncode == 0, r.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    print(run.stdout)
    assert run.returncode == 0 and run.stdout.rstrip().endswith(": ok"), run.stdout + run.stderr


@requires_gpu
@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_gpu_python_script(ex: Example) -> None:
    pytest.importorskip("torch")
    prefix = _carried(ex)
    r = subprocess.run([sys.executable, str(ex.dir / "run.py"), str(prefix)], capture_output=True, text=True,
                       timeout=300)
    print(r.stdout)
    assert r.returncode == 0 and "from Python: ok" in r.stdout, r.stdout + r.stderr
