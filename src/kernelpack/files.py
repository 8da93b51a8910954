"""Reading the files kernelpack is handed (bundles, built libraries, cubins) without hanging or swallowing memory.

A path can name a FIFO (``open`` would wait for a writer forever), a device (``/dev/zero`` never ends), or a
sparse file claiming terabytes. :func:`read_bounded` opens without blocking, looks at what it opened (``fstat`` of
that descriptor, so the check and the read concern the same file), refuses anything but a regular file of at most
``KERNELPACK_MAX_FILE_BYTES`` (:mod:`kernelpack.config`) before reading a byte, and reads exactly the size it was
told, refusing a file that changes size meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator

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
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced since the stat above
            raise _not_regular(path, what, st.st_mode, error)
        if st.st_size > limit:
            raise error(f"{what} {path} is {human(st.st_size)}, above the limit of {human(limit)} per file; set "
                        f"KERNELPACK_MAX_FILE_BYTES (e.g. 8G) to read larger files")
        yield fd, st.st_size
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror}") from None
    finally:
        os.close(fd)


def _not_regular(path: str | os.PathLike[str], what: str, mode: int, error: type[KernelpackError]) -> KernelpackError:
    return error(f"{what} {path} is {_kind(mode)}, not a regular file; kernelpack reads bundles, libraries and "
                 f"cubins only from regular files")


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

