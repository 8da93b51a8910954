"""The project file: a library and the kernels of every frontend that go into it.

``kernelpack.toml``::

    [library]
    name = "mykernels"             # C identifier: libmykernels.so, mykernels.h, find_package(mykernels)
    archs = ["sm_80", "sm_90a"]    # default for every entry
    out = "build"                  # output prefix, relative to this file (include/, lib/, mykernels.kpack)
    outputs = ["library", "bundle"]
    version = "1.0.0"              # CMake / pkg-config version
    include = ["more_kernels.py"]  # Python modules whose KERNELS list is appended

    [[cuda]]
    source = "kernels/vector_ops.cu"
    kernels = ["axpy", "scale<float>", "scale<__half>"]   # or { name = "expression" }
    options = ["-O3"]

    [[triton]]
    kernel = "kernels/add.py:add_kernel"                  # file.py:attr or package.module:attr
    signature = { x = "*fp32", y = "*fp32", out = "*fp32", n = "i32" }
    constexprs = { BLOCK = 1024 }
    specializations = [{ variant = "f32" }, { variant = "f32_aligned", divisibility = "all" }]

    [[cutile]]
    kernel = "kernels/tile.py:vadd"
    signatures = "kernels/tile.py:SIGNATURES"             # list/dict of signatures, or a function returning one

    [[cute]]
    function = "kernels/ew.py:elementwise_add"             # a class is instantiated with `init`
    example_args = "kernels/ew.py:example_args"            # called with each variant's arguments
    variants = { f32 = [{ py = "cutlass.Float32" }], bf16 = [{ py = "cutlass.BFloat16" }] }
    name = "ew_add"
    mode = "kernel"                                        # or "host": CuTe's host program (TMA, clusters)

    [[cubin]]
    files = ["prebuilt/kernels.fatbin"]                    # cubins, fatbins, objects with a fatbin (globs)
    kernels = { add = "const float* x, const float* y, float* out, int n" }

A ``pyproject.toml`` whose ``[tool.kernelpack]`` table holds the same tables (``[tool.kernelpack.library]``,
``[[tool.kernelpack.cuda]]``, ...) is a project too (``[project] name`` and ``version`` stand in for the library's
when it has none): ``kernelpack.build_meta`` builds it as a Python wheel.

``{ py = "dotted.name" }`` (or ``"file.py:attr"``) anywhere in ``init``/``variants``/``args`` is a Python object.
A Python project module exposes ``KERNELS`` (a list of entries: :class:`~kernelpack.frontends.Cuda`, ``Triton``,
``Cutile``, ``Cute``, ``Cubin``, whose fields may hold the objects themselves) and optionally ``LIBRARY`` (the
``[library]`` table). The tables and their keys are the registered frontends' (:mod:`kernelpack.frontends`); this
module knows none of them by name.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.arch import Arch
from ..core.errors import KernelpackError, ProjectError
from ..core.names import check_library_name, check_version
from ..core.suggest import close
from ..frontends import fields as fl
from ..frontends.base import Entry, entry_keys, entry_problem
from ..frontends.refs import import_file, rel
from ..frontends.registry import FRONTENDS, frontend_of
from . import tomlpos

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

OUTPUTS = ("library", "bundle")
LIBRARY: dict[str, fl.Check] = {"name": fl.STRING, "archs": fl.ARCHS, "out": fl.PATH, "outputs": fl.STRINGS,
                                "version": fl.STRING, "cflags": fl.STRINGS, "include": fl.STRINGS, "tuning": fl.PATH,
                                "claim_name": fl.STRING}  # a wheel's name that is also another package's (wheel.taken)
EXECUTORS = ("local", "ray")  # [build] executor / kernelpack build --executor
BUILD: dict[str, fl.Check] = {"executor": fl.STRING, "address": fl.STRING}
PYPROJECT = "pyproject.toml"  # a project when it has a [tool.kernelpack] table
__all__ = ["BuildSpec", "Entry", "LibrarySpec", "Project", "ProjectError", "declared_library", "entry_problem",
           "find_project", "load_project"]


@dataclass(frozen=True)
class LibrarySpec:
    name: str
    archs: tuple[str, ...] = ()
    out: Path = Path("build")
    outputs: tuple[str, ...] = OUTPUTS
    version: str = "1.0.0"
    cflags: tuple[str, ...] = ()
    tuning: Path | None = None  # a kernelpack tune file (kernelpack.tuning), relative to the project

    def __post_init__(self) -> None:
        try:
            check_library_name(self.name, "[library] name")
            check_version(self.version, "[library] version")
            for a in self.archs:
                Arch.parse(a)
        except KernelpackError as e:
            raise ProjectError(e.message) from None
        bad = [o for o in self.outputs if o not in OUTPUTS]
        if bad:
            raise ProjectError(f"[library] outputs: unknown {bad}; expected a subset of {list(OUTPUTS)}")


@dataclass(frozen=True)
class BuildSpec:
    """The ``[build]`` table: where the compile steps run (``--executor``/``--address`` override it)."""

    executor: str = "local"  # "local": worker processes on this machine; "ray": Ray tasks
    address: str | None = None  # a Ray cluster to connect to (executor "ray"); None: start a local one

    def __post_init__(self) -> None:
        check_executor(self.executor, "[build] executor")
        if self.address is not None and self.executor != "ray":
            raise ProjectError(f"[build] address: given {self.address!r} with executor {self.executor!r}; an "
                               f"address is only for executor \"ray\"")


def check_executor(executor: str, where: str) -> None:
    if executor not in EXECUTORS:
        raise ProjectError(f"{where}: expected one of {list(EXECUTORS)}, given {executor!r}")


@dataclass(frozen=True)
class Project:
    """A loaded project: where it lives, the library, the entries (TOML entries first, then included modules')."""

    path: Path  # the project file
    library: LibrarySpec
    entries: tuple[Entry, ...]
    includes: tuple[Path, ...] = ()  # Python modules whose KERNELS were appended
    n_static: int = 0  # entries[:n_static] come from the TOML file, the rest from the included modules
    build: BuildSpec = BuildSpec()

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def out(self) -> Path:
        return self.library.out if self.library.out.is_absolute() else self.root / self.library.out

    def archs_of(self, entry: Entry) -> tuple[str, ...]:
        """The archs an entry builds for: its own, else the library's (where its frontend builds for archs)."""
        fe = frontend_of(entry)
        if entry.archs or not fe.library_archs:
            return tuple(entry.archs or ())
        if not self.library.archs:
            raise ProjectError(f"{entry.frontend} entry {fe.label(entry, self.root) or '?'}: no archs "
                               f"(set [library] archs)")
        return self.library.archs


# ------------------------------------------------------------------------------------------------ loading


def find_project(where: str | os.PathLike[str] | None = None) -> Path:
    """The project file: ``where`` itself, or ``kernelpack.toml`` / ``kernelpack_project.py`` in that directory, or
    its ``pyproject.toml`` when that has a ``[tool.kernelpack]`` table."""
    p = Path(where) if where is not None else Path.cwd()
    if p.is_dir():
        for cand in ("kernelpack.toml", "kernelpack_project.py"):
            if (p / cand).is_file():
                return (p / cand).resolve()
        if (p / PYPROJECT).is_file() and _tool_table(read_toml(p / PYPROJECT), p / PYPROJECT) is not None:
            return (p / PYPROJECT).resolve()
        raise ProjectError(f"no kernelpack.toml or kernelpack_project.py in {p} (nor a pyproject.toml with a "
                           f"[tool.kernelpack] table)")
    if not p.is_file():
        raise ProjectError(f"project file {p} does not exist")
    return p.resolve()


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise ProjectError(f"cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ProjectError(f"{path}: invalid TOML: {e}") from None


def _tool_table(doc: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """``[tool.kernelpack]`` of a pyproject.toml (None when there is none)."""
    tool = doc.get("tool", {})
    table = tool.get("kernelpack") if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise ProjectError(f"{path}: tool.kernelpack must be a table ([tool.kernelpack.library], "
                           f"[[tool.kernelpack.cuda]], ...), got {fl.given(table)}")
    return table


def _read_project_toml(path: Path) -> dict[str, Any]:
    """The project tables of a kernelpack.toml, or of a pyproject.toml's [tool.kernelpack]."""
    doc = read_toml(path)
    if path.name != PYPROJECT:
        return doc
    table = _tool_table(doc, path)
    if table is None:
        raise ProjectError(f"{path}: no [tool.kernelpack] table (the project's [tool.kernelpack.library] and kernel "
                           f"entries)")
    pep621, lib = doc.get("project"), table.get("library", {})
    if isinstance(pep621, dict) and isinstance(lib, dict):  # [project] name and version stand in for the library's
        filled = {k: pep621[k] for k in ("name", "version") if k not in lib and isinstance(pep621.get(k), str)}
        if filled:
            table = {**table, "library": {**lib, **filled}}
    return table


def declared_library(where: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The ``[library]`` table as the project file writes it (no defaults filled in), for what must be given
    explicitly (a wheel's ``version``). A Python project's ``LIBRARY`` is read without running the module when it is
    a literal, else from the imported module."""
    path = find_project(where)
    if path.suffix != ".py":
        table = _read_project_toml(path).get("library", {})
        return dict(table) if isinstance(table, dict) else {}
    table = _static_library(path)
    if table is None:
        table = getattr(import_file(path), "LIBRARY", None)
    return dict(table) if isinstance(table, Mapping) else {}


def load_project(where: str | os.PathLike[str] | None = None, *, import_includes: bool = True,
                 check_files: bool = True) -> Project:
    """Read a project file. Python modules (a ``.py`` project, ``include``) are imported only when
    ``import_includes``; otherwise their entries are missing (enough to fingerprint the project statically).
    ``check_files``: every file an entry names must exist (else an error at its key and line), as a build needs;
    reading the project for its metadata alone needs not."""
    path = find_project(where)
    if path.suffix == ".py":
        raw: dict[str, Any] = {"library": None}
        includes = [path]
    else:
        raw = _read_project_toml(path)
        unknown = sorted(set(raw) - {"library", "build", *FRONTENDS})
        if unknown:
            tables = ["library", "build", *FRONTENDS]
            raise ProjectError(f"{path}: unknown table(s) {unknown}{_suggest(unknown, tables)}; expected [library], "
                               f"[build], " + ", ".join(f"[[{f}]]" for f in FRONTENDS))
        _check_layout(raw, path)
        includes = [rel(path.parent, p) for p in raw.get("library", {}).get("include", [])]
    entries: list[Entry] = []
    named: list[tuple[Entry, Callable[[str], str]]] = []  # each entry and where its keys are written
    for fe in FRONTENDS:  # a frontend's module is imported only when the project has entries of it
        for i, table in enumerate(raw.get(fe, [])):
            entry = _entry(FRONTENDS[fe].entry, table, path, fe, i)
            named.append((entry, _toml_where(path, fe, i)))
            entries.append(entry)
    lib_table = raw.get("library")
    if import_includes:
        for inc in includes:
            mod = import_file(inc)
            kernels = getattr(mod, "KERNELS", None)
            if kernels is None or isinstance(kernels, (str, bytes)) or not isinstance(kernels, Sequence):
                raise ProjectError(f"{inc}: a project module must define KERNELS, a list of kernelpack.project "
                                   f"entries ({', '.join(f.entry.__name__ for f in FRONTENDS.values())})")
            for k in kernels:
                if not isinstance(k, Entry):
                    raise ProjectError(f"{inc}: KERNELS holds {type(k).__name__}, not a kernelpack.project entry")
                named.append((k, _module_where(inc, k)))
                entries.append(k)
            if lib_table is None:
                lib_table = getattr(mod, "LIBRARY", None)
    if path.suffix == ".py" and lib_table is None:
        lib_table = _static_library(path)
        if lib_table is None:
            raise ProjectError(f"{path}: define LIBRARY = {{'name': ..., 'archs': [...]}} (a literal dict)")
    n_static = sum(len(raw.get(fe, [])) for fe in FRONTENDS)
    project = Project(path, _library(lib_table, path), tuple(entries), tuple(includes), n_static,
                      _build_spec(raw.get("build", {}), path))
    for entry, at in named if check_files else ():  # the files last: a malformed table is the first thing to say
        _check_files(entry, path, at)
    return project


def _check_layout(raw: dict[str, Any], path: Path) -> None:
    """[library] is a table, each frontend an array of tables, and [library] include a list of files."""
    lib = raw.get("library", {})
    if not isinstance(lib, dict):
        raise ProjectError(f"{path.name}: library must be a table ([library] with keys under it), got "
                           f"{fl.given(lib)}")
    problem = fl.check("include", lib.get("include", []), fl.STRINGS)
    if problem:
        raise ProjectError(f"{path.name}: [library] {problem}")
    for fe in FRONTENDS:
        v = raw.get(fe, [])
        if not isinstance(v, list) or not all(isinstance(t, dict) for t in v):
            raise ProjectError(f"{path.name}: {fe} must be an array of tables ([[{fe}]] above each entry's keys), "
                               f"got {fl.given(v)}")


def _static_library(path: Path) -> dict[str, Any] | None:
    """``LIBRARY = {...}`` read from the module's syntax tree, without running it."""
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "LIBRARY" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _check_table(table: Mapping[str, Any], schema: Mapping[str, fl.Check], name: str, path: Path,
                 expected: str) -> None:
    """Unknown keys and ill-typed values of a ``[name]`` table, as one ProjectError each."""
    unknown = sorted(set(table) - set(schema))
    if unknown:
        raise ProjectError(f"{tomlpos.where(path, name, None, unknown[0])}: [{name}]: unknown key(s) {unknown}"
                           f"{_suggest(unknown, schema)}; {expected} {sorted(schema)}")
    for key, value in table.items():
        problem = fl.check(key, value, schema[key])
        if problem:
            raise ProjectError(f"{tomlpos.where(path, name, None, key)}: [{name}] {problem}")


def _library(table: Any, path: Path) -> LibrarySpec:
    if not isinstance(table, Mapping) or "name" not in table:
        raise ProjectError(f"{path}: [library] with a name is required")
    _check_table(table, LIBRARY, "library", path, "expected")
    try:
        return LibrarySpec(table["name"], tuple(table.get("archs", ())), Path(table.get("out", "build")),
                           tuple(table.get("outputs", OUTPUTS)), table.get("version", "1.0.0"),
                           tuple(table.get("cflags", ())),
                           Path(table["tuning"]) if table.get("tuning") else None)
    except ProjectError as e:
        raise ProjectError(f"{path.name}: {e.message}") from None


def _build_spec(table: Any, path: Path) -> BuildSpec:
    if not isinstance(table, Mapping):
        raise ProjectError(f"{path.name}: build must be a table ([build] with keys under it), got {fl.given(table)}")
    _check_table(table, BUILD, "build", path, "expected some of")
    try:
        return BuildSpec(table.get("executor", "ray" if "address" in table else "local"), table.get("address"))
    except ProjectError as e:
        raise ProjectError(f"{path.name}: {e.message}") from None


def _entry(cls: type[Entry], table: Any, path: Path, fe: str, i: int) -> Entry:
    """The entry of the ``i``-th ``[[fe]]`` table; errors name the file, the line and the table."""

    def where(key: str | None = None) -> str:
        return f"{tomlpos.where(path, fe, i, key)}: [[{fe}]] #{i + 1}"

    if not isinstance(table, Mapping):
        raise ProjectError(f"{where()}: expected a table")
    names = set(entry_keys(cls))
    unknown = sorted(set(table) - names)
    if unknown:
        raise ProjectError(f"{where(unknown[0])}: unknown key(s) {unknown}{_suggest(unknown, names)}; expected some "
                           f"of {sorted(names)}")
    for key, value in table.items():
        problem = entry_problem(cls, {key: value})
        if problem:
            raise ProjectError(f"{where(key)}: {problem}")
    try:
        return cls(**dict(table))
    except (TypeError, ProjectError) as e:
        raise ProjectError(f"{where()}: {e}") from None


def _suggest(unknown: Sequence[str], names: Iterable[str]) -> str:
    """`` (did you mean 'signature'?)`` for each unknown key near a known one."""
    names = list(names)
    hints = [f"{k!r} -> {got[0]!r}" for k in unknown for got in [close(k, names)] if got]
    if not hints:
        return ""
    if len(unknown) == 1:
        return f" (did you mean {hints[0].split(' -> ')[1]}?)"
    return f" (did you mean: {', '.join(hints)}?)"


def _toml_where(path: Path, fe: str, i: int) -> Callable[[str], str]:
    """Where a key of the ``i``-th ``[[fe]]`` table is: ``kernelpack.toml:12: [[cuda]] #2``."""
    return lambda key: f"{tomlpos.where(path, fe, i, key)}: [[{fe}]] #{i + 1}"


def _module_where(module: Path, entry: Entry) -> Callable[[str], str]:
    """Where an entry of a project module's KERNELS is: ``kernels.py: KERNELS entry Cuda``."""
    return lambda key: f"{module.name}: KERNELS entry {type(entry).__name__}"


def _check_files(entry: Entry, path: Path, where: Callable[[str], str]) -> None:
    """Every file ``entry`` names exists (its frontend's :meth:`~kernelpack.frontends.base.Frontend.missing`):
    else a ProjectError at the key that names it, before any step runs."""
    for key, problem in frontend_of(entry).missing(entry, path.parent):
        raise ProjectError(f"{where(key)}: key {key!r}: {problem}")
