"""Who could have written a directory or file that kernelpack takes compiled code or sources from.

The compile cache (:mod:`kernelpack.core.cache`) serves cubins and objects; a Ray worker (:mod:`.project.distributed`)
compiles the project files it wrote into a directory. Whoever can write there chooses the code kernelpack ships, and
a hash stored beside the bytes detects corruption, not tampering. :func:`problem` says why a directory or file (its
``lstat``/``fstat``) could have been written by someone other than this user, or None; the caller then does without
it, warned once (:func:`warn_once`). The rule is OpenSSH's ``StrictModes`` with Debian's user-private-group allowance:
owned by the user (or root), not writable by others, writable by its group only when that group is the user's own.
"""

from __future__ import annotations

import functools
import grp
import os
import pwd
import stat
import warnings
from pathlib import Path

from . import files
from .errors import KernelpackError

MIN_KEY_BYTES = 16
_MAX_KEY_FILE_BYTES = 4096
_warned: set[str] = set()


class UnsafeDirectoryWarning(UserWarning):
    """A directory (or a file in it) could be written by someone else; kernelpack did without it."""


def uid() -> int:
    """This process's user (one place, so that tests can act as another user)."""
    return os.getuid()


def problem(st: os.stat_result, *, shared: bool = False) -> str | None:
    """Why the file or directory of status ``st`` could have been written by someone other than this user, or None.

    ``shared`` (a team cache, whose entries each prove themselves with a key): other owners and group write are
    allowed; write by every user is not."""
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if mode & stat.S_IWOTH:
        return f"writable by every user (mode {mode:04o})"
    if shared:
        return None
    me = uid()
    if st.st_uid not in (me, 0):
        return f"owned by uid {st.st_uid}, not by this user (uid {me})"
    if mode & stat.S_IWGRP and not private_group(st.st_gid, me):
        return f"writable by group {_group_name(st.st_gid)} (mode {mode:04o}), which is not this user's private group"
    return None


@functools.cache
def private_group(gid: int, me: int) -> bool:
    """Whether group ``gid`` has user ``me`` as its only member (primary or listed): with user-private groups and
    umask 002, every directory a user makes is group-writable, and harmlessly so (Debian's OpenSSH accepts it)."""
    try:
        name = pwd.getpwuid(me).pw_name
        listed = set(grp.getgrgid(gid).gr_mem)
    except KeyError:
        return False
    primary = {p.pw_uid for p in pwd.getpwall() if p.pw_gid == gid}
    return listed <= {name} and primary <= {me} and bool(listed or primary)


def _group_name(gid: int) -> str:
    try:
        return f"{grp.getgrgid(gid).gr_name!r} (gid {gid})"
    except KeyError:
        return f"gid {gid}"


def warn_once(topic: str, message: str) -> None:
    """Warn ``message`` (an :class:`UnsafeDirectoryWarning`) the first time this process meets ``topic``."""
    if topic not in _warned:
        _warned.add(topic)
        warnings.warn(message, UnsafeDirectoryWarning, stacklevel=3)


def read_key_file(path: Path) -> bytes:
    """The secret key in ``path`` (surrounding whitespace stripped): a regular file of at most 4 KiB that every user
    cannot read or write, holding at least :data:`MIN_KEY_BYTES` bytes; KernelpackError naming the file otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise KernelpackError(f"cannot read the cache key file {path}: {e.strerror}") from None
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o007:
            raise KernelpackError(f"cache key file {path} is readable or writable by every user (mode {mode:04o}); "
                                  f"the key must be secret: chmod o-rwx {path}")
        key = files.read_opened(fd, path, "cache key file", _MAX_KEY_FILE_BYTES).strip()
    finally:
        os.close(fd)
    if len(key) < MIN_KEY_BYTES:
        raise KernelpackError(f"cache key file {path} holds {len(key)} bytes; expected at least {MIN_KEY_BYTES} "
                              f"(e.g. openssl rand -hex 32 > {path})")
    return key
