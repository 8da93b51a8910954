"""Wheels built by ``kernelpack wheel`` from each example project (one per DSL), installed the way their users
install them: into a fresh, empty venv, offline, by name from the folder they were written to (``pip install
--no-index --find-links dist NAME``): nothing but the wheels is installed (each carries its runtime), importing a
package imports no DSL, no compiler, no torch and no kernelpack, and each kernel launches (on the fake driver here);
mypy accepts a correct call through the typed stubs and flags a wrong argument type. kernelpack's own wheel pulls no
DSL either. On a GPU: tests/test_wheel_gpu.py.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from example_builds import ALL, Example
from wheel_support import (
    LIGHT,
    Venv,
    VenvUnavailable,
    dependency_closure,
    install_target,
    kernelpack_wheel,
    make_venv,
    requirements,
    wheel_requires,
)

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXPECTED = {"cuda": {"saxpy", "relu"}, "triton": {"add", "axpy"}, "cutile": {"vadd", "scale"}, "cute": {"ew_add"}}


@pytest.fixture(scope="module")
def kp_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return kernelpack_wheel(tmp_path_factory.mktemp("kp"))
    except VenvUnavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """An empty venv: what a user of a generated wheel starts from."""
    try:
        return make_venv(tmp_path_factory.mktemp("wheel-venv") / "venv")
    except VenvUnavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A wheel of every buildable example (a copy of its folder, so the checkout gains no build/ or dist/)."""
    from kernelpack.core import config
    from kernelpack.wheel import build_wheel

    root = tmp_path_factory.mktemp("wheels")
    out = {}
    with config.override(cache_dir=root / "cache"):
        for ex in ALL:
            if ex.buildable():
                out[ex.dsl] = build_wheel(ex.copy(root / ex.dsl), root / "dist", jobs=2).path
    if not out:
        pytest.skip("no example is buildable here (no CUDA compiler, no DSL)")
    return out


@pytest.fixture(scope="module")
def installed(venv: Venv, wheels: dict[str, Path]) -> dict[str, Path]:
    """The example wheels installed into the empty venv by name, offline, from the folder they were written to (with
    dependencies: there are none to fetch)."""
    dist = {w.parent for w in wheels.values()}
    assert len(dist) == 1
    r = venv.pip("install", "--no-index", "--find-links", str(dist.pop()), *(f"ex_{dsl}" for dsl in wheels))
    assert r.returncode == 0, r.stdout + r.stderr
    return wheels


def test_kernelpack_without_extras_pulls_no_dsl_compiler_or_torch(kp_wheel: Path,
                                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    requires = wheel_requires(kp_wheel)
    pulled = dependency_closure(requires)
    assert pulled and pulled <= LIGHT, f"pip install kernelpack pulls {sorted(pulled - LIGHT)}"
    optional = {n for n, _ in requirements(requires, frozenset({"nvrtc", "triton", "cutile", "cute", "dev"}))}
    assert {"triton", "cuda-tile", "nvidia-cutlass-dsl", "torch"} <= optional - pulled  # extras only
    try:
        venv = make_venv(tmp_path_factory.mktemp("kp-venv") / "venv", kp_wheel)
    except VenvUnavailable as e:
        pytest.skip(str(e))
    assert venv.installed() - {"pip", "setuptools", "wheel"} == {"kernelpack"}


def test_wheels_install_by_name_into_an_empty_venv_import_nothing_heavy_and_launch(
        venv: Venv, installed: dict[str, Path], fake_cuda) -> None:  # type: ignore[no-untyped-def]
    # nothing but the wheels came: no kernelpack, no dependency (pip install fetched 0 packages beyond them)
    assert venv.installed() - {"pip", "setuptools", "wheel"} == {f"ex-{dsl}" for dsl in installed}
    for whl in installed.values():
        assert wheel_requires(whl) == []
    check = venv.pip("check")
    assert check.returncode == 0, check.stdout + check.stderr
    names = [f"ex_{dsl}" for dsl in installed]
    run = venv.run(str(HERE / "wheel_venv_check.py"), *names, env=fake_cuda.env(cc="9.0"), cwd=venv.dir)
    assert run.returncode == 0, run.stderr[-4000:]
    got = json.loads(run.stdout)
    assert got["before_import"] == []
    for dsl in installed:
        pkg = got["packages"][f"ex_{dsl}"]
        assert pkg["heavy_after_import"] == [] and pkg["heavy_after_launch"] == [], pkg
        assert pkg["kernelpack_modules"] == [], pkg  # each launched through the runtime it carries
        assert pkg["version"] == "1.0.0" and "site-packages" in pkg["file"]
        assert pkg["runtime"] == f"ex_{dsl}._kernelpack"
        assert set(pkg["launched"]) == EXPECTED[dsl], pkg


def test_importing_a_package_imports_no_dsl_even_where_they_are_installed(installed: dict[str, Path], tmp_path: Path,
                                                                          fake_cuda) -> None:  # type: ignore
    """This interpreter has torch and the DSLs: importing and launching an installed package imports none of them."""
    target = tmp_path / "site"
    install_target(list(installed.values()), target)
    env = {**fake_cuda.env(cc="9.0"), "PYTHONPATH": f"{target}{os.pathsep}{ROOT / 'src'}"}
    run = subprocess.run([sys.executable, str(HERE / "wheel_venv_check.py"), *(f"ex_{d}" for d in installed)],
                         capture_output=True, text=True, env={**os.environ, **env}, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    got = json.loads(run.stdout)
    for dsl in installed:
        pkg = got["packages"][f"ex_{dsl}"]
        assert pkg["heavy_after_import"] == [] and pkg["heavy_after_launch"] == [], pkg
        assert set(pkg["launched"]) == EXPECTED[dsl] and str(target) in pkg["file"], pkg
        assert pkg["kernelpack_modules"] == [], pkg  # kernelpack is importable here, and unused


def _calls(stub: str, pkg: str) -> tuple[str, str]:
    """A correct call and a call with a wrong argument type of the first kernel in ``stub``, as mypy input."""
    tree = ast.parse(stub)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name not in ("preload",))
    values = {"Pointer": "arr", "Tensor": "arr", "Int": "1", "Float": "1.0", "Bool": "True", "Struct": "b''",
              "Bytes": "b''", "Dim3": "(1, 1, 1)", "Stream": "0"}
    args = [values[ast.unparse(a.annotation).rsplit(".", 1)[-1]] for a in fn.args.args]  # type: ignore[union-attr]
    kws = [f"{a.arg}={values[ast.unparse(a.annotation).split('|')[0].strip().rsplit('.', 1)[-1]]}"
           for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is None]  # type: ignore[union-attr]
    head = (f"import {pkg}\n\nclass Arr:\n    @property\n    def __cuda_array_interface__(self) -> dict[str, object]:"
            f"\n        return {{}}\n\narr = Arr()\n")
    good = f"{head}{pkg}.{fn.name}({', '.join(args + kws)})\n"
    bad = f"{head}{pkg}.{fn.name}({', '.join(['object()'] + args[1:] + kws)})\n"
    return good, bad


def test_mypy_accepts_a_correct_call_and_flags_a_wrong_type(venv: Venv, installed: dict[str, Path],
                                                            tmp_path: Path) -> None:
    if subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True).returncode:
        pytest.skip("mypy is not installed (pip install 'kernelpack[dev]')")
    wheels = installed
    for dsl, whl in wheels.items():
        pkg = f"ex_{dsl}"
        with zipfile.ZipFile(whl) as z:
            good, bad = _calls(z.read(f"{pkg}/__init__.pyi").decode(), pkg)
        (tmp_path / f"good_{dsl}.py").write_text(good)
        (tmp_path / f"bad_{dsl}.py").write_text(bad)
    mypy = [sys.executable, "-m", "mypy", "--python-executable", str(venv.python), "--no-incremental",
            "--strict", "--no-error-summary", "--hide-error-context"]
    ok = subprocess.run([*mypy, *sorted(map(str, tmp_path.glob("good_*.py")))], capture_output=True, text=True,
                        cwd=tmp_path, timeout=600)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    flagged = subprocess.run([*mypy, *sorted(map(str, tmp_path.glob("bad_*.py")))], capture_output=True, text=True,
                             cwd=tmp_path, timeout=600)
    assert flagged.returncode == 1, flagged.stdout + flagged.stderr
    lines = [x for x in flagged.stdout.splitlines() if "error:" in x]
    assert {Path(x.split(":", 1)[0]).name for x in lines} == {f"bad_{d}.py" for d in wheels}, flagged.stdout
    assert all("[arg-type]" in x for x in lines), flagged.stdout


def test_wheel_with_library_installs_the_c_library(venv: Venv, installed: dict[str, Path], tmp_path: Path,
                                                   fake_cuda) -> None:  # type: ignore[no-untyped-def]
    from kernelpack.wheel import build_wheel

    ex = next(e for e in ALL if e.dsl == "cuda")
    if not Example.buildable(ex):
        pytest.skip("no CUDA C++ compiler")
    src = tmp_path / "cuda"
    shutil.copytree(ex.dir, src, ignore=shutil.ignore_patterns("build", "dist"))
    whl = build_wheel(src, tmp_path / "dist", with_library=True, jobs=2).path
    assert "-cp310-abi3-manylinux_" in whl.name and whl.name.endswith("_x86_64.whl") or "aarch64" in whl.name
    r = venv.pip("install", "--no-index", "--force-reinstall", "--no-deps", str(whl))
    assert r.returncode == 0, r.stdout + r.stderr
    where = venv.run("-m", "ex_cuda", "--cmake-dir", cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    cmake = Path(where.stdout.strip())
    assert (cmake / "ex_cudaConfig.cmake").is_file()
    lib = cmake.parent.parent / "libex_cuda.so"
    assert lib.is_file() and lib.stat().st_mode & 0o111
    code = f"import ex_cuda; m = ex_cuda.__kernelpack_runtime__.load({str(lib)!r}); print(sorted(m.__all__))"
    run = venv.run("-c", code, cwd=tmp_path, env=fake_cuda.env(cc="9.0"))
    assert run.returncode == 0 and "saxpy" in run.stdout, run.stderr
