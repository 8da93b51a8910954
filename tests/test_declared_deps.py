"""Every third-party module the package, its tests, scripts and benchmarks import — or run with ``python -m`` — comes
from a distribution that ``pip install -e '.[dev]'`` installs (issue 25 item 1: ``python -m wheel unpack`` failed on
a fresh machine because nothing declared ``wheel``). ``.ci/run`` proves the same end to end in a fresh venv; this
test names the module and the file at once, on any machine."""

from __future__ import annotations

import ast
import importlib.metadata as md
import importlib.util
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("src", "tests", "scripts", "bench", "corpus", "examples")

# Imported or run only where present, each behind an explicit guard (find_spec / importorskip / try), and never
# needed for the suite to pass. A module added here must say why.
OPTIONAL = {
    "cupy": "tests/test_runtime_gpu.py: an extra GPU interop check where CuPy is installed (the GPU machine)",
    "twine": "tests/test_wheel.py: `twine check` where installed; not a dev dependency",
    "flashinfer": "corpus tests of flashinfer-python, skipped unless it is installed (--no-deps, 62 MB)",
    "liger_kernel": "corpus of liger-kernel, skipped unless installed",
    "flash_attn": "corpus of flash-attn-4, skipped unless installed",
    "quack": "corpus of quack-kernels, skipped unless installed",
    "tvm_ffi": "CuTe DSL's TVM-FFI path, used where apache-tvm-ffi is installed",
    "atheris": "scripts/fuzz.py: an optional fuzzing engine",
    "zstandard": "fatbin entries: the reference zstd decoder where installed (the pure-Python one otherwise)",
    "lz4": "fatbin entries: the reference LZ4 decoder where installed (the pure-Python one otherwise)",
}
LOCAL = {"kernelpack", "conftest", "corpus"}  # this repository's own packages and test helpers
MADE_BY_TESTS = {"ex_cuda"}  # packages the tests build as wheels and install into venvs of their own
BOOTSTRAP = {"pip"}  # what `python3 -m venv` itself installs


def _local_modules() -> set[str]:
    """Modules these folders import from themselves (a script's sibling, a test's helper): their files' stems and
    their packages; ``src`` is the package, named in LOCAL."""
    names = set(LOCAL)
    for d in ("tests", "scripts", "bench", "examples", "corpus"):
        names.update(p.stem for p in (ROOT / d).rglob("*.py"))
        names.update(p.parent.name for p in (ROOT / d).rglob("__init__.py"))
    return names


def _used_modules() -> dict[str, str]:
    """Top-level module -> the first file (relative) that imports it or runs it with ``-m``."""
    used: dict[str, str] = {}
    dash_m = re.compile(r"""["']-m["']\s*,\s*["']([A-Za-z_][\w.]*)["']""")
    for d in SCANNED:
        for p in sorted((ROOT / d).rglob("*.py")):
            text = p.read_text(encoding="utf-8")
            where = str(p.relative_to(ROOT))
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    mods = [node.module]
                else:
                    continue
                for m in mods:
                    used.setdefault(m.split(".")[0], where)
            for m in dash_m.findall(text):
                used.setdefault(m.split(".")[0], where)
    return used


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared_closure() -> set[str]:
    """The distributions ``kernelpack[dev]`` brings, recursively, as installed here (normalised names)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    named: set[str] = set()  # declared, installed or not (tomli is declared for Pythons below 3.11 only)
    todo: list[tuple[str, frozenset[str]]] = [("kernelpack", frozenset({"dev"}))]
    while todo:
        name, extras = todo.pop()
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        key = _norm(dist.metadata["Name"])
        if (key, extras) in seen:
            continue
        seen.add((key, extras))
        for req in dist.requires or []:
            spec, _, marker = req.partition(";")
            m = re.match(r"\s*([A-Za-z0-9_.-]+)(\[([^\]]*)\])?", spec)
            if not m:
                continue
            extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
            if extra and extra.group(1) not in extras:
                continue
            env = re.sub(r"(and\s+)?extra\s*==\s*['\"][^'\"]+['\"]", "", marker).strip()
            named.add(_norm(m.group(1)))
            if env and not _marker_holds(env):
                continue
            sub = frozenset(x.strip() for x in (m.group(3) or "").split(",") if x.strip())
            todo.append((m.group(1), sub))
    return named | {key for key, _ in seen}


def _marker_holds(env: str) -> bool:
    try:
        from packaging.markers import Marker
    except ImportError:  # without packaging, count the requirement (the check stays strict on what is declared)
        return True
    env = env.removeprefix("and").strip()
    try:
        return Marker(env).evaluate()
    except Exception:
        return True


def _providers(mod: str, providers: Mapping[str, list[str]]) -> set[str]:
    """The distributions that install ``mod``: from their RECORDs, or, for a module found through a ``.pth`` path
    (nvidia-cutlass-dsl's ``cutlass``), from the top-level folder of site-packages that holds it."""
    if mod in providers:
        return {_norm(d) for d in providers[mod]}
    try:
        spec = importlib.util.find_spec(mod)
    except (ImportError, ValueError):
        return set()
    origin = spec.origin if spec and spec.origin not in (None, "namespace") else None
    where = Path(origin) if origin else Path(next(iter(spec.submodule_search_locations or []), "")) if spec else None
    for site in map(Path, sys.path):
        if where is not None and site.is_dir() and where.is_relative_to(site) and where != site:
            top = where.relative_to(site).parts[0]
            if top in providers:
                return {_norm(d) for d in providers[top]}
    return set()


def test_every_imported_or_run_module_comes_from_a_declared_distribution() -> None:
    try:
        md.distribution("kernelpack")
    except md.PackageNotFoundError:
        pytest.skip("kernelpack is not installed as a distribution here")
    declared = _declared_closure()
    providers = md.packages_distributions()
    local = _local_modules()
    missing = []
    for mod, where in sorted(_used_modules().items()):
        if mod in sys.stdlib_module_names or mod in local or mod in OPTIONAL or mod in MADE_BY_TESTS \
                or mod in BOOTSTRAP or mod == "__future__":
            continue
        dists = _providers(mod, providers)
        if not dists & declared and not (not dists and _norm(mod) in declared):  # tomli: declared, not needed here
            missing.append(f"{mod} (first used by {where}; installed from: {sorted(dists) or 'nothing here'})")
    assert not missing, ("modules used but installed by no dependency of kernelpack[dev]; declare them in "
                         "pyproject.toml or guard them and list them in OPTIONAL:\n  " + "\n  ".join(missing))


def test_the_check_sees_an_undeclared_module() -> None:
    """The scan is not vacuous: it reads ``-m`` runs and imports, and ``wheel`` is declared because tests run it."""
    used = _used_modules()
    assert used.get("wheel") == "tests/test_wheel.py"
    assert "torch" in used and "pytest" in used
    if "wheel" in {_norm(d) for d in md.packages_distributions().get("wheel", [])}:
        assert "wheel" in _declared_closure()
