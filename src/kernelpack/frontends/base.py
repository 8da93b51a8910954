"""The one interface every frontend implements, and the fields every project entry has.

A frontend is one module of this package: its project entry (a frozen dataclass: the ``[[name]]`` tables of
``kernelpack.toml`` and the objects a Python project module lists in ``KERNELS``, with the type rule of each key)
and a :class:`Frontend` telling ``kernelpack build`` what such an entry becomes: its build steps (one per variant),
the files and package versions its output depends on, and how to build one step. Its user-facing verb is
``compile(...) -> Bundle`` (keyword-only options, ``arch=``) in its public module, :attr:`Frontend.api`.
:mod:`kernelpack.frontends.registry` lists them all; nothing else names a frontend. Frontends never import
:mod:`kernelpack.project` or a back end (``clib``, ``runtime``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from ..core.cache import CompileCache
from ..core.deps import dist_versions
from ..core.errors import ConfigDropped, ProjectError
from . import fields as fl
from .refs import ref_file, rel

OUTPUT_KINDS = ("bundle", "host")  # Bundle.to_bytes() | HostProgram.to_bytes() (CuTe host programs)


@dataclass(frozen=True)
class Entry:
    """Fields every frontend entry has. A subclass sets ``frontend`` (its table name) and ``rules`` (the type rule
    of each of its own keys); values are checked on construction, for TOML tables and Python entries alike."""

    frontend: ClassVar[str] = ""
    rules: ClassVar[Mapping[str, fl.Check]] = {}
    _: KW_ONLY
    archs: Sequence[str] | None = None  # default: the library's
    depends: Sequence[str] = ()  # extra files (globs, relative to the project) whose change rebuilds this entry

    def __post_init__(self) -> None:
        problem = entry_problem(type(self), {k: getattr(self, k) for k in entry_keys(type(self))})
        if problem:
            raise ProjectError(f"{type(self).__name__} entry: {problem}")


ENTRY_RULES: dict[str, fl.Check] = {"archs": fl.optional(fl.ARCHS), "depends": fl.STRINGS}


def entry_keys(cls: type[Entry]) -> list[str]:
    """The keys an entry of ``cls`` may have (its dataclass fields)."""
    return [f.name for f in fields(cls) if f.name != "_"]


def entry_problem(cls: type[Entry], values: Mapping[str, Any]) -> str | None:
    """What is wrong with the types of an entry's values (the first problem), or None."""
    rules = {**ENTRY_RULES, **cls.rules}
    for key, value in values.items():
        problem = fl.check(key, value, rules[key]) if key in rules else None
        if problem:
            return problem
    return None


@dataclass(frozen=True)
class Step:
    """One build step of an entry, as the project hands it to the entry's frontend."""

    root: Path  # the project directory: relative paths and references resolve against it
    variant: str  # the variant key ("" when the entry has a single step)
    index: int  # its position in Frontend.variants(entry)
    archs: tuple[str, ...]  # the entry's archs, else the library's (empty where the frontend takes none)
    cache: CompileCache | None = None  # the compile cache to use (None: the default one)


@dataclass(frozen=True)
class Output:
    """What one step built: ``kind`` is one of :data:`OUTPUT_KINDS`, ``data`` its bytes; ``dropped``: the
    (config, arch) pairs of a tuned family it left out because they exceed the arch's limits (the build checks that
    the whole family still covers each arch, and shows each in its summary)."""

    kind: str
    data: bytes
    dropped: tuple[ConfigDropped, ...] = ()


E = TypeVar("E", bound=Entry)


class Frontend(Generic[E]):
    """What ``kernelpack build`` needs to know about one frontend (an instance is registered per frontend)."""

    name: ClassVar[str]  # the TOML table: [[name]]
    title: ClassVar[str]  # for people: "CUDA C++"
    entry: ClassVar[type[Entry]]  # the entry class (its fields and rules are the table's schema)
    api: ClassVar[str]  # the public module whose compile(...) -> Bundle this frontend builds with
    packages: ClassVar[tuple[str, ...]] = ()  # distributions whose versions are part of every fingerprint
    library_archs: ClassVar[bool] = True  # an entry without archs builds for [library] archs (else: none needed)

    def label(self, entry: E, root: Path) -> str:
        """The entry's name in job ids and messages, found without importing anything."""
        return str(getattr(entry, "name", None) or "")

    def kind(self, entry: E) -> str:
        """The first part of the entry's job ids (``cuda`` in ``cuda:k.cu``)."""
        return self.name

    def variants(self, entry: E, root: Path) -> list[str]:
        """The variant keys of the entry, one build step each (``[""]``: one unnamed step)."""
        return [""]

    def files(self, entry: E, root: Path) -> list[Path]:
        """Files the entry's steps read, found without importing the project's modules (``depends`` is added by
        the project)."""
        return []

    def missing(self, entry: E, root: Path) -> list[tuple[str, str]]:
        """``(key, problem)`` for each file the entry names that is not there -- a path key (``source``) or a
        ``file.py:name`` reference -- checked when the project is read, so the error names the key (and its line)
        before any step runs."""
        out = []
        rules = {**ENTRY_RULES, **type(entry).rules}
        for key in entry_keys(type(entry)):
            v = getattr(entry, key, None)
            if rules.get(key) is fl.PATH and isinstance(v, (str, os.PathLike)) and str(v):
                f = rel(root, v)
            elif isinstance(v, str) and ":" in v:
                f = ref_file(v, root)  # type: ignore[assignment]
            else:
                continue
            if f is not None and not f.is_file():
                what = "a directory, not a file" if f.is_dir() else "no such file"
                out.append((key, f"{what}: {f}"))
        return out

    def versions(self) -> dict[str, str]:
        """Versions of what this frontend builds with (metadata only), for fingerprints."""
        return dict(dist_versions(self.packages))

    def build(self, entry: E, step: Step) -> Output:
        """Build one step (in a worker process; the DSLs are neither thread- nor fork-safe)."""
        raise NotImplementedError


def prebuilt_output(path: Path, what: str) -> Output:
    """A file kernelpack built before (``prebuilt = ...`` of a ``[[cute]]`` or ``[[cutile]]`` entry: what
    ``kernelpack capture`` compiled while the kernel's Python objects lived): a ``.kpack`` bundle or a serialized CuTe
    host program, read and checked."""
    from ..bundle.host_program import HostProgram
    from ..bundle.kpack import MAGIC, Bundle
    from ..core.files import read_bounded

    data = read_bounded(path, f"prebuilt {what} output", error=ProjectError)
    if data.startswith(MAGIC):
        return Output("bundle", Bundle.from_bytes(data, source=str(path)).to_bytes())
    if data[:1] == b"{":
        return Output("host", HostProgram.from_bytes(data, source=str(path)).to_bytes())
    raise ProjectError(f"{what} entry: {path} is neither a .kpack bundle nor a kernelpack host program")
