"""References from a project to Python objects: ``"file.py:name"`` / ``"package.module:name"`` / ``{py = "..."}``.

Frontends whose kernels are Python objects (Triton, cuTile, CuTe) resolve their entries' references here; the
project imports its ``include`` modules here too. Nothing here knows a frontend.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import re
import sys
import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..core.deps import python_deps
from ..core.errors import KernelpackError, ProjectError


def rel(root: Path, p: str | os.PathLike[str]) -> Path:
    """``p`` resolved against ``root`` (absolute paths are kept)."""
    q = Path(p)
    return (q if q.is_absolute() else root / q).resolve()


CODE_ROOTS: dict[str, str] = {}  # a directory -> the one its modules' code names as theirs (see rename_code)


def rename_code(root: str, origin: str) -> None:
    """Modules under ``root`` are compiled as if they were under ``origin``: a Ray worker runs a build step on a
    copy of the project, and compilers that record a kernel's source path (Triton's line info, from ``co_filename``)
    must write the bytes a local build writes."""
    CODE_ROOTS.clear()  # one project copy at a time per worker
    if root != origin:
        CODE_ROOTS[root] = origin
        if _RenamingFinder not in sys.meta_path:
            sys.meta_path.insert(0, _RenamingFinder)  # type: ignore[arg-type]


def code_path(path: str) -> str:
    for root, origin in CODE_ROOTS.items():
        if path.startswith(root + os.sep):
            return origin + path[len(root):]
    return path


class _RenamedSource(importlib.machinery.SourceFileLoader):
    """Compiles the module's source under its ``code_path`` (never from bytecode: a .pyc's path is rewritten)."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        return compile(self.get_data(path), code_path(path), "exec", dont_inherit=True)


class _RenamingFinder:
    """Plain imports of modules under a renamed root (a kernel module's siblings) get the renaming loader too."""

    @classmethod
    def find_spec(cls, name: str, path: Any = None, target: Any = None) -> Any:
        if not CODE_ROOTS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or not spec.origin or code_path(spec.origin) == spec.origin \
                or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        spec.loader = _RenamedSource(name, spec.origin)
        return spec


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
    renamed = code_path(str(path)) != str(path)
    spec = importlib.util.spec_from_file_location(name, path, loader=_RenamedSource(name, str(path)) if renamed
                                                  else None)
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
        return rel(root, ref.partition(":")[0])
    return None


def ref_name(v: Any) -> str:
    """A short name for a reference string or an object (the attribute name)."""
    if isinstance(v, str):
        return v.rpartition(":")[2].split(".")[-1]
    return str(getattr(v, "__name__", None) or type(v).__name__)


def resolve(ref: Any, root: Path, what: str) -> Any:
    """``file.py:attr.sub`` / ``package.module:attr`` -> the object; anything else is returned as is."""
    if not isinstance(ref, str):
        return ref
    mod_name, sep, attr = ref.partition(":")
    if not sep or not attr:
        raise ProjectError(f"{what}: {ref!r} is not a reference of the form 'file.py:name' or 'module:name'")
    try:
        if is_file_ref(ref):
            mod = import_file(rel(root, mod_name))
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


def python_ref_files(refs: Iterable[Any], root: Path) -> list[Path]:
    """The Python files behind references or objects and the local modules they import, found without importing
    the references themselves (a module reference's parent packages may be imported to find it)."""
    files: list[Path] = []
    for v in refs:
        f = ref_file(v, root) if isinstance(v, str) else _object_file(v)
        if f is None and isinstance(v, str) and ":" in v:
            f = _module_file(v.partition(":")[0], root)
        if f is not None:
            files += python_deps(f, [root])
    return files


def _object_file(obj: Any) -> Path | None:
    if obj is None:
        return None
    for target in (obj, getattr(obj, "fn", None), type(obj)):
        try:
            f = inspect.getsourcefile(target)  # type: ignore[arg-type]
        except TypeError:
            continue
        if f:
            return Path(f)
    return None


def _module_file(name: str, root: Path) -> Path | None:
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        spec = importlib.util.find_spec(name)  # imports the parent packages: the user's code, which may raise anything
    except Exception:  # the job's own import reports it, with the traceback
        return None
    return Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None
