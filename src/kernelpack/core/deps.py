"""What a build step depends on, found without importing or compiling anything: files and package versions.

* CUDA sources: ``#include "..."``/``<...>`` lines resolved against the including file's directory and the include
  directories, recursively; headers found nowhere there (the toolkit's, the system's) are left out.
* Python modules: ``import``/``from ... import`` statements resolved to ``.py`` files under the given roots (the
  module's own directory, the project directory), recursively; installed packages are covered by their versions.
* Package versions from their metadata (no import): the DSL packages, the compilers bundled with them, kernelpack.

Frontends (their ``files`` and ``versions``, the CUDA compile-cache key: a changed header recompiles) and
``kernelpack build`` (its fingerprints) both read these; neither owns them.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from .errors import KernelpackError
from .files import read_bounded

_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes; ``"missing"`` when it cannot be read (a later build sees it appear), also when it
    is no regular file or above ``KERNELPACK_MAX_FILE_BYTES`` (a FIFO, a device: the reader that needs it refuses
    it, naming it; hashing must neither hang nor fill memory first)."""
    try:
        return hashlib.sha256(read_bounded(path, "file")).hexdigest()
    except KernelpackError:
        return "missing"


def digest_files(paths: Iterable[Path]) -> dict[str, str]:
    return {str(p): file_digest(p) for p in sorted(set(paths), key=str)}


def cuda_includes(source: Path | None, text: str, include_dirs: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Local headers a CUDA source includes, transitively (the source itself not included)."""
    dirs = [Path(d) for d in include_dirs]
    seen: dict[Path, None] = {}
    todo = [(source.parent if source else None, text)]
    while todo:
        here, body = todo.pop()
        for name in _INCLUDE.findall(body):
            for d in ([here] if here else []) + dirs:
                cand = (d / name).resolve()
                if cand.is_file():
                    if cand not in seen and cand != (source.resolve() if source else None):
                        seen[cand] = None
                        try:
                            todo.append((cand.parent, cand.read_text(errors="replace")))
                        except OSError:
                            pass
                    break
    return list(seen)


def include_digest(source: Path | None, text: str, include_dirs: Sequence[str | os.PathLike[str]]) -> str:
    """One hash over the local headers a CUDA source includes (name and bytes), for compile-cache keys."""
    h = hashlib.sha256()
    for p in sorted(cuda_includes(source, text, include_dirs), key=str):
        h.update(str(p).encode() + b"\0" + file_digest(p).encode() + b"\0")
    return h.hexdigest()


def python_deps(path: Path, roots: Sequence[Path] = ()) -> list[Path]:
    """``path`` and the local ``.py`` files it imports, transitively. Roots: where absolute imports may resolve
    (the file's own directory is always one)."""
    out: dict[Path, None] = {}
    todo = [path.resolve()]
    while todo:
        p = todo.pop()
        if p in out:
            continue
        out[p] = None
        todo += [d for d in _imports(p, tuple(r.resolve() for r in roots)) if d not in out]
    return list(out)


@functools.lru_cache(maxsize=512)
def _parse(path: Path, mtime_ns: int) -> ast.Module | None:
    try:
        return ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def _imports(path: Path, roots: tuple[Path, ...]) -> list[Path]:
    try:
        tree = _parse(path, path.stat().st_mtime_ns)
    except OSError:
        return []
    if tree is None:
        return []
    bases = [path.parent, *roots]
    found: list[Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found += _module_files(alias.name, bases)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
                mod = node.module or ""
                found += _module_files(mod, [base]) if mod else []
                found += [f for a in node.names for f in _module_files(f"{mod}.{a.name}".strip("."), [base])]
            elif node.module:
                found += _module_files(node.module, bases)
                found += [f for a in node.names for f in _module_files(f"{node.module}.{a.name}", bases)]
    return found


def _module_files(dotted: str, bases: Sequence[Path]) -> list[Path]:
    """Files of a module and its parent packages, under the first base that has the top-level name."""
    parts = [p for p in dotted.split(".") if p]
    for base in bases:
        out = []
        for i in range(1, len(parts) + 1):
            stem = base.joinpath(*parts[:i])
            for cand in (stem.with_suffix(".py"), stem / "__init__.py"):
                if cand.is_file():
                    out.append(cand.resolve())
        if out:
            return out
    return []


@functools.cache
def dist_versions(packages: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``(distribution, version)`` of kernelpack and of each installed one of ``packages`` (metadata only: nothing
    is imported; packages that are not installed are left out)."""
    from importlib.metadata import PackageNotFoundError, version

    from .version import __version__

    out = [("kernelpack", __version__)]
    for dist in packages:
        try:
            out.append((dist, version(dist)))
        except PackageNotFoundError:
            continue
    return tuple(out)


def file_stamp(path: str) -> str:
    """``path:size:mtime`` of a tool binary, or ``"none"`` (an updated compiler changes it without a version bump)."""
    try:
        st = os.stat(path) if path else None
    except OSError:
        return "none"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}" if st else "none"
