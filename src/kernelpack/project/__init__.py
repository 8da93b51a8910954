"""Projects: ``kernelpack build`` from a ``kernelpack.toml`` (or a Python module with ``KERNELS``).

    from kernelpack.project import Cuda, Triton, Cutile, Cute      # entries for a Python project module
    report = kernelpack.project.build("kernelpack.toml", jobs=2)     # what the CLI runs

See :mod:`kernelpack.project.model` for the file format and :mod:`kernelpack.project.runner` for how rebuilds
are kept incremental.
"""

from __future__ import annotations

from .model import Cuda, Cute, Cutile, Entry, LibrarySpec, Project, ProjectError, Triton, find_project, load_project
from .runner import BuildFailed, BuildReport, Events, build

__all__ = ["BuildFailed", "BuildReport", "Cuda", "Cute", "Cutile", "Entry", "Events", "LibrarySpec", "Project",
           "ProjectError", "Triton", "build", "find_project", "load_project"]
