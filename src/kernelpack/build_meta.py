"""A PEP 517 build backend: ``pip install .`` / ``python -m build`` of a project whose ``pyproject.toml`` has a
``[tool.kernelpack]`` table compiles its kernels at build time and produces the wheel ``kernelpack wheel`` makes::

    [build-system]
    requires = ["kernelpack[triton]"]          # kernelpack and the DSLs (or compiler) the kernels need
    build-backend = "kernelpack.build_meta"

    [project]                                  # optional: name and version may live in [tool.kernelpack.library]
    name = "mykernels"
    version = "1.0.0"

    [tool.kernelpack.library]                  # the same tables as kernelpack.toml, under tool.kernelpack
    archs = ["sm_80", "sm_90a"]

    [[tool.kernelpack.triton]]
    kernel = "kernels.py:add_kernel"
    ...

``config_settings`` (``pip install . -C with-library=true``, ``python -m build -C platform=aarch64``):
``with-library`` (carry the C library), ``platform`` (the loading machines' CPU), ``jobs`` (compile processes).
The sdist carries the project file, the sources every entry reads and the readme and license files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .wheel.meta import WheelError

SETTINGS = ("with-library", "platform", "jobs")
__all__ = ["build_sdist", "build_wheel", "get_requires_for_build_sdist", "get_requires_for_build_wheel"]


def get_requires_for_build_wheel(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    """Nothing beyond ``[build-system] requires``: the project names its DSLs there."""
    _settings(config_settings)
    return []


def get_requires_for_build_sdist(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Mapping[str, Any] | None = None,
                metadata_directory: str | None = None) -> str:
    """Build the project in the current directory and write its wheel into ``wheel_directory``; returns its file
    name. Only the bundle (and with ``with-library`` the C library) is built, in the project's output folder."""
    from .wheel import build_wheel as build

    s = _settings(config_settings)
    result = build(Path.cwd(), wheel_directory, with_library=s["with-library"], platform=s["platform"],
                   jobs=s["jobs"], overwrite=True, exact_outputs=True)
    return result.path.name


def build_sdist(sdist_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    """Write ``NAME-VERSION.tar.gz`` of the project's sources into ``sdist_directory``; returns its file name."""
    from .wheel import build_sdist as build

    _settings(config_settings)
    return build(Path.cwd(), sdist_directory).name


def _settings(given: Mapping[str, Any] | None) -> dict[str, Any]:
    raw = dict(given or {})
    unknown = sorted(set(raw) - set(SETTINGS))
    if unknown:
        raise WheelError(f"kernelpack.build_meta: unknown config setting(s) {unknown}; known: {', '.join(SETTINGS)}")
    lib = str(raw.get("with-library", "false")).lower()
    if lib not in ("true", "false", "1", "0", "yes", "no", ""):
        raise WheelError(f"kernelpack.build_meta: with-library={raw['with-library']!r}: expected true or false")
    jobs = raw.get("jobs")
    if jobs is not None and not (str(jobs).isdigit() and int(jobs) > 0):
        raise WheelError(f"kernelpack.build_meta: jobs={jobs!r}: expected a positive number")
    platform = raw.get("platform")
    return {"with-library": lib in ("true", "1", "yes"), "platform": str(platform) if platform else None,
            "jobs": int(jobs) if jobs is not None else min(os.cpu_count() or 1, 8)}
