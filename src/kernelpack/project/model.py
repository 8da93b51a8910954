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

``{ py = "dotted.name" }`` (or ``"file.py:attr"``) anywhere in ``init``/``variants``/``args`` is a Python object.
A Python project module exposes ``KERNELS`` (a list of :class:`Cuda`, :class:`Triton`, :class:`Cutile`,
:class:`Cute`, whose fields may hold the objects themselves) and optionally ``LIBRARY`` (the ``[library]`` table).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from ..arch import Arch
from ..errors import KernelpackError
from ..names import check_library_name, check_version
from . import fields as fl

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

OUTPUTS = ("library", "bundle")


class ProjectError(KernelpackError):
    """The project file is malformed or names something that does not exist."""


@dataclass(frozen=True)
class Entry:
    """Fields every frontend entry has."""

    frontend: ClassVar[str] = ""
    _: KW_ONLY
    archs: Sequence[str] | None = None  # default: the library's
    depends: Sequence[str] = ()  # extra files (globs, relative to the project) whose change rebuilds this entry

    def __post_init__(self) -> None:
        problem = entry_problem(type(self), {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_"})
        if problem:
            raise ProjectError(f"{type(self).__name__} entry: {problem}")


@dataclass(frozen=True)
class Cuda(Entry):
    """CUDA C++: ``kernelpack.cuda.compile(source, kernels, ...)``."""

    frontend: ClassVar[str] = "cuda"
    source: str | os.PathLike[str] = ""
    kernels: Sequence[str] | Mapping[str, str] = ()
    _: KW_ONLY
    options: Sequence[str] = ()
    defines: Mapping[str, str | int | None] = field(default_factory=dict)
    include_dirs: Sequence[str] = ()
    maxrregcount: int | None = None
    lineinfo: bool = False
    signatures: Mapping[str, str] | None = None
    compiler: str | None = None


@dataclass(frozen=True)
class Triton(Entry):
    """Triton: ``kernelpack.triton.compile(kernel, signature, ...)``; one build step per specialization."""

    frontend: ClassVar[str] = "triton"
    kernel: Any = None  # "file.py:attr" | "module:attr" | the @triton.jit function
    signature: Mapping[str, str] | Sequence[str] = field(default_factory=dict)
    _: KW_ONLY
    name: str | None = None
    constexprs: Mapping[str, Any] = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 3
    num_ctas: int = 1
    specializations: Sequence[Mapping[str, Any]] = ()
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Cutile(Entry):
    """cuTile: ``kernelpack.cutile.compile(kernel, signatures, ...)``; one build step per signature."""

    frontend: ClassVar[str] = "cutile"
    kernel: Any = None
    signatures: Any = None  # reference or object: list/dict of signatures, or a function returning one
    _: KW_ONLY
    name: str | None = None


@dataclass(frozen=True)
class Cute(Entry):
    """CuTe DSL: ``kernelpack.cute.compile`` (mode "kernel") or ``.export`` (mode "host"); one step per variant."""

    frontend: ClassVar[str] = "cute"
    function: Any = None  # reference or object; a class is instantiated with ``init``
    example_args: Any = None  # factory: called with the variant's args (a list) or kwargs (a table)
    _: KW_ONLY
    name: str | None = None
    variants: Mapping[str, Any] | None = None  # {variant: factory args}; None: one unnamed variant with ``args``
    args: Any = ()
    init: Mapping[str, Any] = field(default_factory=dict)
    mode: str = "kernel"
    options: str = ""
    zero_extent: str = "skip"


FRONTENDS: dict[str, type[Entry]] = {c.frontend: c for c in (Cuda, Triton, Cutile, Cute)}


@dataclass(frozen=True)
class LibrarySpec:
    name: str
    archs: tuple[str, ...] = ()
    out: Path = Path("build")
    outputs: tuple[str, ...] = OUTPUTS
    version: str = "1.0.0"
    cflags: tuple[str, ...] = ()

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
class Project:
    """A loaded project: where it lives, the library, the entries (TOML entries first, then included modules')."""

    path: Path  # the project file
    library: LibrarySpec
    entries: tuple[Entry, ...]
    includes: tuple[Path, ...] = ()  # Python modules whose KERNELS were appended
    n_static: int = 0  # entries[:n_static] come from the TOML file, the rest from the included modules

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def out(self) -> Path:
        return self.library.out if self.library.out.is_absolute() else self.root / self.library.out

    def archs_of(self, entry: Entry) -> tuple[str, ...]:
        archs = tuple(entry.archs) if entry.archs else self.library.archs
        if not archs:
            raise ProjectError(f"{entry.frontend} entry {describe_entry(entry)}: no archs (set [library] archs)")
        return archs


def entry_problem(cls: type[Entry], values: Mapping[str, Any]) -> str | None:
    """What is wrong with the types of an entry's values (the first problem), or None."""
    rules = {**fl.ENTRY, **fl.FIELDS.get(cls.frontend, {})}
    for key, value in values.items():
        problem = fl.check(key, value, rules[key]) if key in rules else None
        if problem:
            return problem
    return None


def describe_entry(e: Entry) -> str:
    for attr in ("name", "source", "kernel", "function"):
        v = getattr(e, attr, None)
        if v:
            return ref_name(v) if attr != "source" else str(v)
    return "?"


def ref_name(v: Any) -> str:
    """A short name for a reference string or an object (the attribute name)."""
    if isinstance(v, str):
        return v.rpartition(":")[2].split(".")[-1]
    return str(getattr(v, "__name__", None) or type(v).__name__)


# ------------------------------------------------------------------------------------------------ loading


def find_project(where: str | os.PathLike[str] | None = None) -> Path:
    """The project file: ``where`` itself, or ``kernelpack.toml`` / ``kernelpack_project.py`` in that directory."""
    p = Path(where) if where is not None else Path.cwd()
    if p.is_dir():
        for cand in ("kernelpack.toml", "kernelpack_project.py"):
            if (p / cand).is_file():
                return (p / cand).resolve()
        raise ProjectError(f"no kernelpack.toml or kernelpack_project.py in {p}")
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


def load_project(where: str | os.PathLike[str] | None = None, *, import_includes: bool = True) -> Project:
    """Read a project file. Python modules (a ``.py`` project, ``include``) are imported only when
    ``import_includes``; otherwise their entries are missing (enough to fingerprint the project statically)."""
    path = find_project(where)
    if path.suffix == ".py":
        raw: dict[str, Any] = {"library": None}
        includes = [path]
    else:
        raw = read_toml(path)
        unknown = sorted(set(raw) - {"library", *FRONTENDS})
        if unknown:
            raise ProjectError(f"{path}: unknown table(s) {unknown}; expected [library], "
                               + ", ".join(f"[[{f}]]" for f in FRONTENDS))
        _check_layout(raw, path)
        includes = [_rel(path.parent, p) for p in raw.get("library", {}).get("include", [])]
    entries: list[Entry] = []
    for fe, cls in FRONTENDS.items():
        for i, table in enumerate(raw.get(fe, [])):
            entries.append(_entry(cls, table, f"{path.name}: [[{fe}]] #{i + 1}"))
    lib_table = raw.get("library")
    if import_includes:
        for inc in includes:
            mod = import_file(inc)
            kernels = getattr(mod, "KERNELS", None)
            if kernels is None or isinstance(kernels, (str, bytes)) or not isinstance(kernels, Sequence):
                raise ProjectError(f"{inc}: a project module must define KERNELS, a list of kernelpack.project "
                                   f"entries (Cuda, Triton, Cutile, Cute)")
            for k in kernels:
                if not isinstance(k, Entry):
                    raise ProjectError(f"{inc}: KERNELS holds {type(k).__name__}, not a kernelpack.project entry")
                entries.append(k)
            if lib_table is None:
                lib_table = getattr(mod, "LIBRARY", None)
    if path.suffix == ".py" and lib_table is None:
        lib_table = _static_library(path)
        if lib_table is None:
            raise ProjectError(f"{path}: define LIBRARY = {{'name': ..., 'archs': [...]}} (a literal dict)")
    n_static = sum(len(raw.get(fe, [])) for fe in FRONTENDS)
    return Project(path, _library(lib_table, path), tuple(entries), tuple(includes), n_static)


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


def _library(table: Any, path: Path) -> LibrarySpec:
    if not isinstance(table, Mapping) or "name" not in table:
        raise ProjectError(f"{path}: [library] with a name is required")
    known = set(fl.LIBRARY)
    unknown = sorted(set(table) - known)
    if unknown:
        raise ProjectError(f"{path}: [library]: unknown key(s) {unknown}; expected {sorted(known)}")
    for key, value in table.items():
        problem = fl.check(key, value, fl.LIBRARY[key])
        if problem:
            raise ProjectError(f"{path.name}: [library] {problem}")
    try:
        return LibrarySpec(table["name"], tuple(table.get("archs", ())), Path(table.get("out", "build")),
                           tuple(table.get("outputs", OUTPUTS)), table.get("version", "1.0.0"),
                           tuple(table.get("cflags", ())))
    except ProjectError as e:
        raise ProjectError(f"{path.name}: {e.message}") from None


def _rel(root: Path, p: str) -> Path:
    q = Path(p)
    return (q if q.is_absolute() else root / q).resolve()


def _entry(cls: type[Entry], table: Any, where: str) -> Entry:
    if not isinstance(table, Mapping):
        raise ProjectError(f"{where}: expected a table")
    names = {f.name for f in fields(cls) if f.name != "_"}
    unknown = sorted(set(table) - names)
    if unknown:
        raise ProjectError(f"{where}: unknown key(s) {unknown}; expected some of {sorted(names)}")
    problem = entry_problem(cls, table)
    if problem:
        raise ProjectError(f"{where}: {problem}")
    try:
        return cls(**dict(table))
    except (TypeError, ProjectError) as e:
        raise ProjectError(f"{where}: {e}") from None


# ------------------------------------------------------------------------------------------------ references


def import_file(path: Path) -> Any:
    """Import a Python file once per process under a stable name (its directory goes on sys.path so siblings
    import); CuTe and Triton need kernels to live in real files, which these are."""
    path = path.resolve()
    stem = re.sub(r"\W", "_", path.stem)
    name = f"kp_project_{stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    if not path.is_file():
        raise ProjectError(f"Python module {path} does not exist")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if name in sys.modules and _IMPORTED.get(name) == digest:
        return sys.modules[name]  # (a changed file is executed again: long-lived processes build the new code)
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProjectError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)  # the user's own module, named in their project (never build state)
    except KernelpackError as e:
        del sys.modules[name]
        raise ProjectError(f"{path}: {e.message}", log=e.log) from e
    except Exception as e:
        del sys.modules[name]
        raise ProjectError(f"{path}: importing it raised {type(e).__name__}: {e}",
                           log=traceback.format_exc()) from e
    except BaseException:
        del sys.modules[name]
        raise
    _IMPORTED[name] = digest
    return mod


_IMPORTED: dict[str, str] = {}


def is_file_ref(ref: str) -> bool:
    mod = ref.partition(":")[0]
    return mod.endswith(".py") or "/" in mod or os.sep in mod


def ref_file(ref: Any, root: Path) -> Path | None:
    """The file a ``file.py:attr`` reference names (None for module references and objects)."""
    if isinstance(ref, str) and ":" in ref and is_file_ref(ref):
        return _rel(root, ref.partition(":")[0])
    return None


def resolve(ref: Any, root: Path, what: str) -> Any:
    """``file.py:attr.sub`` / ``package.module:attr`` -> the object; anything else is returned as is."""
    if not isinstance(ref, str):
        return ref
    mod_name, sep, attr = ref.partition(":")
    if not sep or not attr:
        raise ProjectError(f"{what}: {ref!r} is not a reference of the form 'file.py:name' or 'module:name'")
    try:
        if is_file_ref(ref):
            mod = import_file(_rel(root, mod_name))
        else:
            if str(root) not in sys.path:
                sys.path.insert(0, str(root))
            mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ProjectError(f"{what}: cannot import {mod_name!r}: {e}") from None
    obj = mod
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ProjectError(f"{what}: {mod_name!r} has no attribute {attr!r}") from None
    return obj


def resolve_values(v: Any, root: Path, what: str) -> Any:
    """Replace every ``{py = "..."}`` table in a TOML value by the Python object it names."""
    if isinstance(v, Mapping):
        if set(v) == {"py"} and isinstance(v["py"], str):
            ref = v["py"]
            if ":" in ref:
                return resolve(ref, root, what)
            mod, _, attr = ref.rpartition(".")
            return resolve(f"{mod}:{attr}", root, what) if mod else resolve(f"builtins:{attr}", root, what)
        return {k: resolve_values(x, root, what) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(resolve_values(x, root, what) for x in v)
    return v
