"""Reading the files kernelpack is handed (bundles, built libraries, cubins, tuning tables, a wheel's readme) without
hanging or swallowing memory.

A path can name a FIFO (``open`` would wait for a writer forever), a device (``/dev/zero`` never ends), or a
sparse file claiming terabytes. :func:`read_bounded` opens without blocking, looks at what it opened (``fstat`` of
that descriptor, so the check and the read concern the same file), refuses anything but a regular file of at most
``KERNELPACK_MAX_FILE_BYTES`` (:mod:`kernelpack.core.config`) before reading a byte, and reads exactly the size it was
told, refusing a file that changes size meanwhile.

JSON from such files (a bundle's manifest, a tuning table) is parsed by one strict decoder (:func:`json_loads`):
UTF-8 only, ``NaN``/``Infinity`` refused, nesting deeper than the interpreter's recursion limit refused as
``RecursionError``, integers of more than 4300 digits refused (Python's own limit). :func:`read_json` is the two
together.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from collections.abc import Callable, Iterator
from typing import Any

from . import config
from .errors import KernelpackError

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"))
_CHUNK = 1 << 30  # per read(): Linux returns at most ~2 GiB from one call


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def human(n: int) -> str:
    """``n`` bytes for messages: ``10.0 GiB (10737418240 bytes)``."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit} ({n} bytes)"
    return f"{n} bytes"


def read_bounded(path: str | os.PathLike[str], what: str, limit: int | None = None, *,
                 error: type[KernelpackError] = KernelpackError,
                 check_head: Callable[[bytes, int], object] | None = None, head_size: int = 64) -> bytes:
    """The bytes of regular file ``path``; ``error`` (naming ``what``, e.g. "bundle") when it cannot be read, is not
    a regular file, or is larger than ``limit`` bytes (default: the ``max_file_bytes`` knob).
    ``check_head(first head_size bytes, file size)`` may refuse the file (by raising) before the rest is read: a
    format whose header states its size is checked against the file's before gigabytes are read."""
    with _opened(path, what, limit, error) as (fd, size):
        if check_head is not None:
            check_head(os.pread(fd, min(head_size, size), 0), size)
        return _read_exactly(fd, size, path, what, error)


def read_head(path: str | os.PathLike[str], n: int, what: str, limit: int | None = None, *,
              error: type[KernelpackError] = KernelpackError) -> bytes:
    """The first ``n`` bytes (fewer in a shorter file) of a file :func:`read_bounded` would read; the same refusals."""
    with _opened(path, what, limit, error) as (fd, size):
        return os.pread(fd, min(n, size), 0)


@contextlib.contextmanager
def _opened(path: str | os.PathLike[str], what: str, limit: int | None,
            error: type[KernelpackError]) -> Iterator[tuple[int, int]]:
    """(descriptor, size) of regular file ``path`` within the limit, opened without blocking."""
    limit = config.knobs().max_file_bytes if limit is None else limit
    try:
        pre = os.stat(path)  # not the check (see fstat below): opening a device can itself do something
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror}") from None
    if not stat.S_ISREG(pre.st_mode):
        raise _not_regular(path, what, pre.st_mode, error)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror}") from None
    try:
        yield fd, _size(fd, path, what, limit, error)  # fstat again: the path may have been replaced since
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror}") from None
    finally:
        os.close(fd)


def read_opened(fd: int, path: str | os.PathLike[str], what: str, limit: int | None = None, *,
                error: type[KernelpackError] = KernelpackError) -> bytes:
    """The bytes of the file open at ``fd`` (opened by the caller, e.g. relative to a directory descriptor with
    ``O_NOFOLLOW | O_NONBLOCK``), with :func:`read_bounded`'s refusals; ``path`` names it in errors. ``fd`` stays
    open."""
    limit = config.knobs().max_file_bytes if limit is None else limit
    try:
        return _read_exactly(fd, _size(fd, path, what, limit, error), path, what, error)
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror}") from None


def _size(fd: int, path: str | os.PathLike[str], what: str, limit: int, error: type[KernelpackError]) -> int:
    """The size of the regular file open at ``fd``, at most ``limit``; ``error`` otherwise."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, what, st.st_mode, error)
    if st.st_size > limit:
        raise error(f"{what} {path} is {human(st.st_size)}, above the limit of {human(limit)} per file; set "
                    f"KERNELPACK_MAX_FILE_BYTES (e.g. 8G) to read larger files")
    return st.st_size


def _not_regular(path: str | os.PathLike[str], what: str, mode: int, error: type[KernelpackError]) -> KernelpackError:
    return error(f"{what} {path} is {_kind(mode)}, not a regular file; kernelpack reads its inputs only from "
                 f"regular files")


def _read_exactly(fd: int, size: int, path: str | os.PathLike[str], what: str,
                  error: type[KernelpackError]) -> bytes:
    parts, total = [], 0
    while total < size:
        chunk = os.read(fd, min(size - total, _CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    if total != size or os.read(fd, 1):
        raise error(f"{what} {path} changed size while being read (it had {size} bytes when opened); read it again "
                    f"once it is complete")
    return parts[0] if len(parts) == 1 else b"".join(parts)


# ------------------------------------------------------------------ strict JSON

_JSON_STARTS = frozenset(b'{["-0123456789tfn')  # the first byte of any JSON value
_JSON_SPACE = b" \t\r\n"


def json_loads(text: bytes) -> Any:
    """JSON text (UTF-8) parsed strictly: NaN and Infinity refused (one decoder, made once). ValueError for bad
    JSON, bad UTF-8, those constants and too many digits; RecursionError for nesting too deep."""
    global _DECODER
    if _DECODER is None:
        _DECODER = json.JSONDecoder(parse_constant=no_json_constant)
    return _DECODER.decode(text.decode())


_DECODER: json.JSONDecoder | None = None


def no_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_json(path: str | os.PathLike[str], what: str, limit: int | None = None, *,
              error: type[KernelpackError] = KernelpackError) -> Any:
    """The JSON value in regular file ``path`` (:func:`read_bounded`, then :func:`json_loads`); ``error`` naming
    ``what`` and the path when it cannot be read or parsed. A file whose first bytes cannot start JSON (a sparse
    file's zeros) is refused before the rest is read."""

    def head(first: bytes, size: int) -> None:
        start = first.lstrip(_JSON_SPACE)[:1]
        if start and start[0] not in _JSON_STARTS:
            raise error(f"{what} {path}: cannot read it as JSON: it starts with {first[:16]!r}")

    data = read_bounded(path, what, limit, error=error, check_head=head)
    try:
        return json_loads(data)
    except RecursionError:
        raise error(f"{what} {path}: cannot read it as JSON: arrays or objects nested deeper than Python's "
                    f"recursion limit ({sys.getrecursionlimit()})") from None
    except ValueError as e:  # bad JSON, bad UTF-8, NaN/Infinity, too many digits
        raise error(f"{what} {path}: cannot read it as JSON: {e!s:.300}") from None
