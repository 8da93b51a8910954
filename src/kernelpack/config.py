"""Every environment variable kernelpack reads, in one typed place, with scoped overrides for tests.

``KERNELPACK_CACHE_DIR``      compile cache directory (default ``~/.cache/kernelpack``); ``off`` disables it
``KERNELPACK_CUDA_COMPILER``  ``auto`` (NVRTC when importable, else nvcc), ``nvrtc`` or ``nvcc``
``KERNELPACK_NVCC``           path of nvcc (default: ``$CUDA_HOME/bin/nvcc``, then ``nvcc`` on PATH)
``CUDA_HOME``/``CUDA_PATH``   toolkit root, for nvcc and the CUDA headers
``CC``/``AR``                 the C compiler and archiver that build libraries (default ``cc``, ``ar``)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from pathlib import Path

from .errors import KernelpackError

CUDA_COMPILERS = ("auto", "nvrtc", "nvcc")


@dataclass(frozen=True)
class Knobs:
    cache_dir: Path | None
    cuda_compiler: str
    nvcc: str | None
    cuda_home: Path | None
    cc: str = "cc"
    ar: str = "ar"


_overrides: dict[str, object] = {}


def _from_env() -> Knobs:
    raw_cache = os.environ.get("KERNELPACK_CACHE_DIR", "").strip()
    if raw_cache.lower() == "off":
        cache_dir = None
    elif raw_cache:
        cache_dir = Path(raw_cache).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        cache_dir = Path(base) / "kernelpack"
    compiler = os.environ.get("KERNELPACK_CUDA_COMPILER", "auto").strip().lower() or "auto"
    if compiler not in CUDA_COMPILERS:
        raise KernelpackError(f"KERNELPACK_CUDA_COMPILER={compiler!r}: expected one of {', '.join(CUDA_COMPILERS)}")
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    cuda_home = Path(home) if home else (Path("/usr/local/cuda") if Path("/usr/local/cuda").is_dir() else None)
    return Knobs(cache_dir, compiler, os.environ.get("KERNELPACK_NVCC") or None, cuda_home,
                 os.environ.get("CC") or "cc", os.environ.get("AR") or "ar")


def knobs() -> Knobs:
    """The settings in force now: the environment, then any active :func:`override`."""
    k = _from_env()
    return replace(k, **_overrides) if _overrides else k  # type: ignore[arg-type]


@contextlib.contextmanager
def override(**values: object) -> Iterator[None]:
    """Temporarily override knobs by field name (``with override(cache_dir=tmp): ...``)."""
    names = {f.name for f in fields(Knobs)}
    unknown = set(values) - names
    if unknown:
        raise KernelpackError(f"unknown knob(s) {sorted(unknown)}; known: {sorted(names)}")
    saved = dict(_overrides)
    _overrides.update(values)
    try:
        yield
    finally:
        _overrides.clear()
        _overrides.update(saved)
