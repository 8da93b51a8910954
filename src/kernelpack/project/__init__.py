"""Projects: ``kernelpack build`` from a ``kernelpack.toml`` (or a Python module with ``KERNELS``).

    from kernelpack.project import Cuda, Triton, Cutile, Cute, Cubin   # entries for a Python project module
    report = kernelpack.project.build("kernelpack.toml", jobs=2)        # what the CLI runs

See :mod:`kernelpack.project.model` for the file format and :mod:`kernelpack.project.runner` for how rebuilds
are kept incremental. The entry classes are the registered frontends' (:mod:`kernelpack.frontends.registry`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..frontends.registry import __all__ as _entries
from ..frontends.registry import entry_class
from .model import Entry, LibrarySpec, Project, ProjectError, find_project, load_project
from .runner import BuildFailed, BuildReport, Events, build

if TYPE_CHECKING:  # the entry class of every registered frontend, imported on first use (__getattr__ below)
    from ..frontends.registry import *  # noqa: F403

__all__ = [*_entries, "BuildFailed", "BuildReport", "Entry", "Events", "LibrarySpec", "Project", "ProjectError",
           "build", "find_project", "load_project"]


def __getattr__(name: str) -> Any:  # PEP 562: the entry classes, each frontend's module imported on first use
    if name in _entries:
        return entry_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
