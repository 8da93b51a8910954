"""Every environment variable kernelpack reads, in one typed place, with scoped overrides for tests.

``KERNELPACK_CACHE_DIR``      compile cache directory (default ``~/.cache/kernelpack``); ``off`` disables it. It must be
                              the user's own and writable by nobody else, else it is bypassed with one warning
                              (:mod:`kernelpack.core.cache`, :mod:`kernelpack.core.trust`)
``KERNELPACK_CACHE_KEY_FILE`` a file holding a secret key (at least 16 bytes, not readable by others) that makes the
                              cache a team cache: every entry carries an HMAC-SHA256 under the key, entries without
                              a valid one are ignored, and a directory writable by its group is allowed
``KERNELPACK_CUDA_COMPILER``  ``auto`` (NVRTC when importable, else nvcc), ``nvrtc`` or ``nvcc``
``KERNELPACK_NVCC``           path of nvcc (default: ``$CUDA_HOME/bin/nvcc``, then ``nvcc`` on PATH)
``CUDA_HOME``/``CUDA_PATH``   toolkit root, for nvcc and the CUDA headers
``CC``/``AR``                 the C compiler and archiver that build libraries (default ``cc``, ``ar``)
``KERNELPACK_MAX_FILE_BYTES`` the largest bundle, library or cubin file kernelpack reads (``kernelpack.load``,
                              ``Bundle.read``, ``kernelpack inspect``), in bytes or with a K/M/G/T (binary) suffix;
                              default 4G. A file is read whole into memory, so this bounds what one read can take;
                              4 GiB is the format's own ceiling (the C library's blob table holds 32-bit offsets, so
                              no bundle a library carries is larger). Files that are not regular files (FIFOs,
                              devices, directories) are refused whatever the limit.
``SOURCE_DATE_EPOCH``         the timestamp (seconds since 1970) written into wheels and sdists (``kernelpack
                              wheel``, ``kernelpack.build_meta``); default 1980-01-01, the earliest a zip can hold
``KERNELPACK_DRIVER``         the CUDA driver library the runtime opens instead of ``libcuda.so.1``: a path, or
                              ``dryrun`` for kernelpack's dry-run driver (docs/testing.md); the C library reads it
                              too (a path only)
``KERNELPACK_DRYRUN_*``       the dry-run driver's settings (``DEVICES``, ``SMS``, ``VERSION``, ``RECORD``), read by
                              that driver itself (runtime/_dryrun.c)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path

from .errors import KernelpackError
from .records import record

CUDA_COMPILERS = ("auto", "nvrtc", "nvcc")
DEFAULT_MAX_FILE_BYTES = 4 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


@record(frozen=True)
class Knobs:
    """The settings read from the environment (:func:`knobs`)."""

    cache_dir: Path | None
    cuda_compiler: str
    nvcc: str | None
    cuda_home: Path | None
    cc: str = "cc"
    ar: str = "ar"
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    source_date_epoch: str | None = None  # as given; kernelpack.wheel.archive checks it where it is used
    cache_key_file: Path | None = None
    driver: str | None = None  # KERNELPACK_DRIVER: a driver library's path, "dryrun", or None (libcuda.so.1)


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
                 os.environ.get("CC") or "cc", os.environ.get("AR") or "ar",
                 max_file_bytes=_byte_count("KERNELPACK_MAX_FILE_BYTES", DEFAULT_MAX_FILE_BYTES),
                 source_date_epoch=os.environ.get("SOURCE_DATE_EPOCH", "").strip() or None,
                 cache_key_file=_path("KERNELPACK_CACHE_KEY_FILE"),
                 driver=os.environ.get("KERNELPACK_DRIVER", "").strip() or None)


def _path(name: str) -> Path | None:
    raw = os.environ.get(name, "").strip()
    return Path(raw).expanduser() if raw else None


def _byte_count(name: str, default: int) -> int:
    """A positive number of bytes from the environment: ``1048576``, ``512M``, ``4G``, ``4GiB`` (binary units)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    text = raw.upper().removesuffix("IB").removesuffix("B")
    digits, unit = (text[:-1], text[-1]) if text[-1:] in _UNITS else (text, "")
    if not (digits.isascii() and digits.isdigit()) or int(digits) < 1:
        raise KernelpackError(f"{name}={raw!r}: expected a positive number of bytes, optionally with a K, M, G or T "
                              f"suffix (binary units), e.g. 4G")
    return int(digits) * _UNITS[unit]


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
