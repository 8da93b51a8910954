"""kernelpack wheel and kernelpack.build_meta, GPU-less and without a venv: names and versions, bad input (nothing
half-written), reproducible bytes, what pip and wheel check, the PEP 517 backend (pip drives it; an sdist rebuilds
the same wheel), and generated Python that stays valid and inert whatever the kernels are called."""

from __future__ import annotations

import ast
import base64
import csv
import hashlib
import importlib
import importlib.util
import io
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import kernelpack
from kernelpack.core import config, names
from kernelpack.wheel import WheelError, build_sdist, build_wheel, check_platform
from kernelpack.wheel.meta import check_package_name, normalize_version
from kernelpack.wheel.runtime import EXTENSION, carried_runtime
from toolchain_support import needs_cuda_compiler

ROOT = Path(__file__).resolve().parent.parent
KERNELS = """extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""
TOML = """[library]
name = "{name}"
{version}archs = ["sm_80"]

[[cuda]]
source = "k.cu"
kernels = ["axpy"]
"""


def project(where: Path, name: str = "wkernels", version: str | None = "1.2.0") -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "k.cu").write_text(KERNELS)
    line = f'version = "{version}"\n' if version else ""
    (where / "kernelpack.toml").write_text(TOML.format(name=name, version=line))
    return where


# ------------------------------------------------------------------------------------------------ names, versions


@pytest.mark.parametrize("bad", ["class", "None", "json", "os", "Json", "a_", "_a", "a-b", "a.b", "", "é", "x" * 300,
                                 "a b", "../x", "int\n", 3])
def test_names_that_cannot_be_a_package_are_refused(bad: object) -> None:
    with pytest.raises(WheelError, match="name"):
        check_package_name(bad)


@pytest.mark.parametrize("good", ["mykernels", "ex_cuda", "K2", "a"])
def test_package_names(good: str) -> None:
    assert check_package_name(good) == good


@pytest.mark.parametrize(("given", "normal"), [("1.0.0", "1.0.0"), ("1.0.0-beta.2", "1.0.0b2"),
                                               ("1.0.0-alpha", "1.0.0a0"), ("2.0.0rc1", "2.0.0rc1"),
                                               ("1.0.post1.dev3", "1.0.post1.dev3")])
def test_versions_are_normalized(given: str, normal: str) -> None:
    assert normalize_version(given) == normal


@pytest.mark.parametrize("text", ['a"""b', "x\\", 'end"', "é\u2028\x00\r\n", "l1\n\nl3", "\\N{BULLET}", "'''"])
def test_docstrings_stay_docstrings(text: str) -> None:
    doc = names.py_docstring(text, "    ")
    tree = ast.parse(f"def f():\n    {doc}\n")
    assert ast.get_docstring(tree.body[0], clean=False).replace("\n    ", "\n") == text  # type: ignore[arg-type]
    assert doc.isascii()


# ------------------------------------------------------------------------------------------------ bad input


@needs_cuda_compiler
def test_a_project_without_version_fails_before_any_work(tmp_path: Path, fresh_cache) -> None:
    proj = project(tmp_path / "p", version=None)
    with pytest.raises(WheelError, match=r"no version.*\[library\] version"):
        build_wheel(proj, tmp_path / "dist")
    assert not (tmp_path / "dist").exists() and not (proj / "build").exists()


@pytest.mark.parametrize("name", ["json", "lambda", "x_"])
def test_a_name_that_is_no_package_fails_before_any_work(tmp_path: Path, name: str) -> None:
    proj = project(tmp_path / "p", name=name)
    with pytest.raises(WheelError, match=repr(name)):
        build_wheel(proj, tmp_path / "dist")
    assert not (tmp_path / "dist").exists() and not (proj / "build").exists()


@needs_cuda_compiler
def test_an_existing_wheel_is_kept_unless_overwrite(tmp_path: Path, fresh_cache) -> None:
    proj = project(tmp_path / "p")
    first = build_wheel(proj, tmp_path / "dist", jobs=1)
    again = build_wheel(proj, tmp_path / "dist", jobs=1)
    assert again.unchanged and again.path == first.path
    first.path.write_bytes(b"someone else's")
    with pytest.raises(WheelError, match="exists with other contents.*--overwrite"):
        build_wheel(proj, tmp_path / "dist", jobs=1)
    assert first.path.read_bytes() == b"someone else's"
    assert sorted(p.name for p in first.path.parent.iterdir()) == [first.path.name]  # nothing half-written
    replaced = build_wheel(proj, tmp_path / "dist", jobs=1, overwrite=True)
    assert not replaced.unchanged and replaced.path.read_bytes()[:2] == b"PK"
    replaced.path.unlink()
    replaced.path.mkdir()
    with pytest.raises(WheelError, match="not a regular file"):
        build_wheel(proj, tmp_path / "dist", jobs=1, overwrite=True)


def test_the_build_directory_stays_locked_until_the_wheel_has_read_its_outputs(tmp_path: Path, fresh_cache,
                                                                              monkeypatch) -> None:
    """A build racing into the project's output directory waits until the wheel has read the outputs it packs."""
    import fcntl

    import kernelpack.wheel as kw

    proj, seen = project(tmp_path / "p"), []
    real = kw._contents

    def contents(static, *args, **kwargs):
        fd = os.open(static.out, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen.append("free")
        except BlockingIOError:
            seen.append("locked")
        finally:
            os.close(fd)
        return real(static, *args, **kwargs)

    monkeypatch.setattr(kw, "_contents", contents)
    build_wheel(proj, tmp_path / "dist", jobs=1)
    assert seen == ["locked"]


def test_a_platform_without_cuda_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WheelError, match="--platform.*x86_64 or aarch64"):
        build_wheel(project(tmp_path / "p"), tmp_path / "dist", platform="riscv64")
    assert not (tmp_path / "dist").exists()


def test_the_cli_reports_bad_input_in_one_line(tmp_path: Path) -> None:
    proj = project(tmp_path / "p", version=None)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-m", "kernelpack.cli", "wheel", str(proj)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 1 and r.stderr.startswith("kernelpack: error: ") and "version" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------------ the bytes


def _entries(data: bytes) -> list[zipfile.ZipInfo]:
    return zipfile.ZipFile(io.BytesIO(data)).infolist()


@needs_cuda_compiler
def test_same_inputs_same_bytes_and_what_wheel_checks(tmp_path: Path, fresh_cache, monkeypatch) -> None:
    a = build_wheel(project(tmp_path / "a"), tmp_path / "da", jobs=1)
    os.utime(tmp_path / "b" if (tmp_path / "b").exists() else tmp_path, (1, 1))
    b = build_wheel(project(tmp_path / "b"), tmp_path / "db", jobs=1, force=True)
    python = "cp310-abi3" if (Path(kernelpack.__file__).parent / EXTENSION).is_file() else "py3-none"
    assert a.path.name == b.path.name == f"wkernels-1.2.0-{python}-manylinux_2_17_x86_64.whl" or "aarch64" in a.tag
    data = a.path.read_bytes()
    assert data == b.path.read_bytes()
    infos = _entries(data)
    names_ = [i.filename for i in infos]
    info = "wkernels-1.2.0.dist-info"
    assert names_ == sorted(n for n in names_ if not n.startswith(info)) + [f"{info}/METADATA", f"{info}/WHEEL",
                                                                              f"{info}/RECORD"]
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {i.filename: (i.external_attr >> 16) & 0o777 for i in infos} == {
        i.filename: 0o755 if i.filename.endswith(".so") else 0o644 for i in infos}
    z = zipfile.ZipFile(io.BytesIO(data))
    meta = z.read(f"{info}/METADATA").decode()
    assert not [x for x in meta.splitlines() if x.startswith("Requires-Dist")]  # the runtime is in the package
    for row in csv.reader(io.StringIO(z.read(f"{info}/RECORD").decode())):
        if row[1]:
            digest = hashlib.sha256(z.read(row[0])).digest()
            assert row[1] == "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
            assert int(row[2]) == len(z.read(row[0]))
    unpack = subprocess.run([sys.executable, "-m", "wheel", "unpack", "-d", str(tmp_path / "u"), str(a.path)],
                            capture_output=True, text=True)
    assert unpack.returncode == 0, unpack.stderr  # wheel checks every RECORD hash
    if importlib.util.find_spec("twine") is not None:  # not a dev dependency: checked where it is installed
        twine = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(a.path)], capture_output=True,
                               text=True)
        assert twine.returncode == 0, twine.stdout + twine.stderr
    with config.override(source_date_epoch="1700000000"):
        c = build_wheel(project(tmp_path / "c"), tmp_path / "dc", jobs=1)
    assert {i.date_time for i in _entries(c.path.read_bytes())} == {(2023, 11, 14, 22, 13, 20)}
    with config.override(source_date_epoch="yesterday"), pytest.raises(WheelError, match="SOURCE_DATE_EPOCH"):
        build_wheel(project(tmp_path / "e"), tmp_path / "de", jobs=1)
    assert not (tmp_path / "de").exists() or not any((tmp_path / "de").iterdir())


# ------------------------------------------------------------------------------------------------ PEP 517

PYPROJECT = """[build-system]
requires = ["kernelpack"]
build-backend = "kernelpack.build_meta"

[project]
name = "pep_kernels"
version = "0.3.0"
description = "axpy, through kernelpack.build_meta"
readme = "README.md"
license = {{ text = "MIT" }}
authors = [{{ name = "A. Author", email = "a@example.com" }}]

[tool.kernelpack.library]
archs = ["sm_80"]

[[tool.kernelpack.cuda]]
source = "k.cu"
kernels = ["axpy"]
"""


@needs_cuda_compiler
def test_pep517_backend_pip_and_sdist_give_the_same_wheel(tmp_path: Path, fresh_cache) -> None:
    import kernelpack.build_meta as backend

    src = tmp_path / "src"
    src.mkdir()
    (src / "k.cu").write_text(KERNELS)
    (src / "README.md").write_text("# pep_kernels\n\nAxpy.\n")
    (src / "pyproject.toml").write_text(PYPROJECT.format())
    cli = build_wheel(src, tmp_path / "cli", jobs=1)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    pip = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
                          "-w", str(tmp_path / "pip"), str(src)], capture_output=True, text=True, env=env, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert (tmp_path / "pip" / cli.path.name).read_bytes() == cli.path.read_bytes()
    meta = zipfile.ZipFile(cli.path).read("pep_kernels-0.3.0.dist-info/METADATA").decode()
    assert "Summary: axpy, through kernelpack.build_meta\n" in meta and "License: MIT\n" in meta
    assert "Author-email: A. Author <a@example.com>\n" in meta and meta.endswith("# pep_kernels\n\nAxpy.\n")

    sdist = build_sdist(src, tmp_path / "sdist")
    assert sdist.name == "pep_kernels-0.3.0.tar.gz"
    assert build_sdist(src, tmp_path / "sdist2").read_bytes() == sdist.read_bytes()
    with tarfile.open(sdist) as tf:
        members = sorted(m.name for m in tf.getmembers() if m.isfile())
        assert members == [f"pep_kernels-0.3.0/{n}" for n in ("PKG-INFO", "README.md", "k.cu", "pyproject.toml")]
        tf.extractall(tmp_path / "x", filter="data")
    cwd = os.getcwd()
    os.chdir(tmp_path / "x" / "pep_kernels-0.3.0")
    try:
        name = backend.build_wheel(str(tmp_path / "from-sdist"))
    finally:
        os.chdir(cwd)
    assert (tmp_path / "from-sdist" / name).read_bytes() == cli.path.read_bytes()
    with pytest.raises(WheelError, match="unknown config setting"):
        backend.build_wheel(str(tmp_path / "nope"), {"wtih-library": "true"})
    if subprocess.run([sys.executable, "-m", "build", "--version"], capture_output=True).returncode == 0:
        # python -m build: the sdist, then the wheel built from the unpacked sdist (no isolation: offline)
        pb = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "-o", str(tmp_path / "pb"), str(src)],
                            capture_output=True, text=True, env=env, timeout=300)
        assert pb.returncode == 0, pb.stdout + pb.stderr
        assert (tmp_path / "pb" / cli.path.name).read_bytes() == cli.path.read_bytes()
        assert (tmp_path / "pb" / sdist.name).read_bytes() == sdist.read_bytes()


def test_metadata_headers_cannot_be_forged_from_project_text() -> None:
    from kernelpack.wheel.meta import WheelMeta

    meta = WheelMeta("wk", "1.0", summary="ok\nRequires-Dist: evil", description="body\n\nRequires-Dist: x\n",
                     extra=(("License", "MIT\r\nRequires-Dist: evil2\x00"),))
    head, _, body = meta.metadata().partition("\n\n")
    assert not [x for x in head.splitlines() if x.startswith("Requires-Dist")]
    assert "Summary: ok Requires-Dist: evil\n" in head + "\n" and body == "body\n\nRequires-Dist: x\n"


def test_pyproject_refuses_what_a_kernelpack_wheel_cannot_honour(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# pep_kernels\n")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.format().replace('version = "0.3.0"',
                                                                        'version = "0.3.0"\ndependencies = ["numpy"]'))
    with pytest.raises(WheelError, match="dependencies: not supported"):
        build_wheel(tmp_path, tmp_path / "dist")
    clash = PYPROJECT.format().replace('name = "pep_kernels"', 'name = "other"')
    (tmp_path / "pyproject.toml").write_text(clash.replace("[tool.kernelpack.library]\n",
                                                           '[tool.kernelpack.library]\nname = "pep_kernels"\n'))
    with pytest.raises(WheelError, match="differs from the library name"):
        build_wheel(tmp_path, tmp_path / "dist")
    assert not (tmp_path / "dist").exists()


# ------------------------------------------------------------------------------------------------ hostile names


@pytest.fixture(scope="module")
def env(tmp_path_factory):  # type: ignore[no-untyped-def]
    from clib_support import session_env

    return session_env(tmp_path_factory)


@pytest.mark.parametrize("pool", ["keywords", "generated", "random"])
def test_generated_python_is_valid_and_inert_whatever_the_names(env, pool: str, tmp_path: Path, fake,
                                                                monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.runtime.module import KernelModule
    from kernelpack.wheel.package import package_files
    from test_generated_names import POOLS, hostile_artifacts

    bundle = Bundle.of(hostile_artifacts(env.kernels, POOLS[pool]))
    pkg = f"hostile_{pool}"
    (tmp_path / pkg).mkdir()
    bundle.write(tmp_path / pkg / f"{pkg}.kpack")
    mod = KernelModule(Bundle.from_bytes((tmp_path / pkg / f"{pkg}.kpack").read_bytes()), "x")
    gen = package_files(mod, pkg, '1.0"""\\', (f"{pkg}.kpack",), with_library=False)
    (tmp_path / pkg / "__init__.py").write_text(gen.init)
    (tmp_path / pkg / "__init__.pyi").write_text(gen.stub)
    for rel, data in carried_runtime(pkg, check_platform(None)).files.items():
        (tmp_path / pkg / gen.runtime / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / gen.runtime / rel).write_bytes(data)
    init, stub = ast.parse(gen.init), ast.parse(gen.stub)
    assert gen.init.isascii() and gen.stub.isascii()
    # __init__.py binds only dunder names; at module level it imports nothing but the runtime it carries
    bound = {t.id for n in init.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    bound |= {n.name for n in init.body if isinstance(n, ast.FunctionDef)}
    imports = [n for n in init.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [ast.unparse(n) for n in imports] == [f"from . import {gen.runtime} as __kernelpack_runtime__"]
    bound |= {"__kernelpack_runtime__"}
    assert all(b.startswith("__") and b.endswith("__") for b in bound), bound
    assert gen.runtime not in mod.__all__
    # the stub declares each attribute once, and its one import alias is never shadowed
    alias = next(n for n in stub.body if isinstance(n, ast.ImportFrom)).names[0].asname
    defs = [n.name for n in stub.body if isinstance(n, ast.FunctionDef)]
    defs += [n.target.id for n in stub.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
    assert len(defs) == len(set(defs)) and alias not in defs
    assert set(mod.__all__) <= set(defs)
    monkeypatch.syspath_prepend(str(tmp_path))
    package = importlib.import_module(pkg)
    assert package.__version__ == '1.0"""\\' and package.__all__ == sorted(mod.__all__)
    assert "kernelpack" not in vars(package) and "__kernelpack_module__" not in vars(package)
    for attr in package.__all__:
        fn = getattr(package, attr)
        assert fn.family.name in {a.name for a in bundle}
    assert sorted(dir(package)) == sorted(set(dir(package)))
    with pytest.raises(AttributeError):
        package.no_such_kernel  # noqa: B018


@pytest.mark.parametrize("text", ['"""; import os; os.system("x") #', "line1\nline2\r\n\u2028'''\\",
                                  "é\u00a0\u202e\x00", "def f(): pass", "\\N{BULLET} \\x41 \\u0041"])
def test_hostile_strings_in_a_bundle_stay_docs(env, text: str, tmp_path: Path, fake,
                                               monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A bundle's own strings (its frontend, compiler, entry names come from whoever built it) reach the generated
    files only inside docstrings: escaped, read back exactly, never run."""
    import dataclasses

    from kernelpack.bundle.artifact import Provenance
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.runtime.module import KernelModule
    from kernelpack.wheel.package import package_files
    from test_generated_names import POOLS, hostile_artifacts

    arts = [dataclasses.replace(a, provenance=Provenance(text, text, text, (text,), ""))
            for a in hostile_artifacts(env.kernels, POOLS["keywords"])[:6]]
    mod = KernelModule(Bundle.of(arts), "x")
    gen = package_files(mod, "hostile_docs", "1.0", ("hostile_docs.kpack",), with_library=False)
    assert gen.init.isascii() and gen.stub.isascii()
    stub = ast.parse(gen.stub)
    docs_ = [ast.get_docstring(n, clean=False) or "" for n in stub.body if isinstance(n, ast.FunctionDef)]
    assert any(text in d.replace("\n    ", "\n") for d in docs_)  # the exact string, inside a docstring
    calls = [n for n in ast.walk(stub) if isinstance(n, ast.Call)]
    assert not calls  # nothing in the stub runs anything
    init = ast.parse(gen.init)
    assert isinstance(init.body[0], ast.Expr) and isinstance(init.body[0].value, ast.Constant)
