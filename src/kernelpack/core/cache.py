"""The compile cache: content-addressed entries, atomic writes, corrupt entries recompiled, never served; a cache
someone else could write is not used.

An entry is one file ``<root>/<key[:2]>/<key>``::

    b"KPCACHE1\\n" + JSON header line {"sha256", "size", "meta"} + b"\\n" + payload bytes
    b"KPCACHM1\\n" + hex HMAC-SHA256(team key, cache key + b"\\n" + header line) + b"\\n" + the same   (team cache)

It is written to a temp file in the same directory and renamed into place, so readers see either no
entry or a whole one, whatever other processes do (several compiling the same key just race to rename
identical content). A reader re-hashes the payload; anything that does not check out is deleted.

The header's hash detects corruption, not tampering: whoever can write the directory chooses what ``cuda.compile``
returns. So the root, each shard directory and each entry must be the user's and writable by nobody else
(:func:`kernelpack.core.trust.problem`); below the root nothing is reached through a link (directory descriptors,
``O_NOFOLLOW``), and entries are read bounded (:func:`kernelpack.core.files.read_opened`: a FIFO or a link to
``/dev/zero`` at an entry's path is refused, not waited on). A root that fails is bypassed with one warning naming it
and why, and the compile goes on uncached; a shard directory or an entry that fails is ignored the same way. With a
key (``KERNELPACK_CACHE_KEY_FILE``) the cache can be a team's: other owners and group write are allowed, and an entry
is served only when its MAC checks out under the key — bound to the entry's cache key, so an entry copied to
another key's path fails too.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import hmac
import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import config, files, trust
from .errors import KernelpackError

_MAGIC = b"KPCACHE1\n"
_MAGIC_MAC = b"KPCACHM1\n"  # same length as _MAGIC
_MAC_HEX = 64
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_ENTRY = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def cache_key(**parts: Any) -> str:
    """SHA-256 of the canonical JSON of the parts (source hash, frontend + version, arch, options...) and of
    kernelpack's own code (:func:`code_digest`), so an entry made by other kernelpack code is never served."""
    blob = json.dumps({**parts, "kernelpack_code": code_digest()}, sort_keys=True, separators=(",", ":"),
                      default=str).encode()
    return hashlib.sha256(blob).hexdigest()


_CODE_SUFFIXES = (".py", ".c", ".h", ".cpp", ".cu", ".cuh")


@functools.cache
def code_digest() -> str:
    """SHA-256 over kernelpack's own source files (path and bytes, sorted): what derives an artifact from a compile
    (ABI derivation, dtype tables, launch facts) changes without the version number changing, between releases and
    in a checkout; a cached artifact must come from the same code. Computed once per process (a few ms)."""
    root = Path(__file__).resolve().parents[1]  # the kernelpack package
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in _CODE_SUFFIXES and "__pycache__" not in p.parts):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    meta: dict[str, Any]
    data: bytes


@dataclass(frozen=True)
class _Shard:
    fd: int  # the shard directory, open (the caller closes it)
    path: str  # for messages
    mac_key: bytes | None
    root_mode: int


class CompileCache:
    """A directory of entries; ``root=None`` is a disabled cache that stores nothing. ``key``: the team key (default:
    the ``KERNELPACK_CACHE_KEY_FILE`` knob's, read at first use)."""

    def __init__(self, root: Path | None, *, key: bytes | None = None) -> None:
        self.root = root
        self._mac_key = key
        self._settled = False  # the key file and the size limit read (once: knobs() parses the environment)
        self._limit = 0
        self._bypassed = False

    @classmethod
    def default(cls) -> CompileCache:
        return cls(config.knobs().cache_dir)

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def get(self, key: str) -> CacheEntry | None:
        shard = self._shard(key, create=False)
        if shard is None:
            return None
        try:
            raw = self._read(shard, key)
            entry = None if raw is None else _decode(raw, key, shard.mac_key)
            if entry is None and raw is not None:
                _unlink(shard.fd, key)  # corrupt, partial, or without a valid MAC: recompile instead of serving it
            return entry
        finally:
            os.close(shard.fd)

    def put(self, key: str, meta: dict[str, Any], data: bytes) -> None:
        """Store an entry; an unwritable or untrusted cache is skipped (caching is an optimization)."""
        header = json.dumps({"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "meta": meta},
                            sort_keys=True, separators=(",", ":")).encode()
        shard = self._shard(key, create=True)
        if shard is None:
            return
        tmp = f".{key[:8]}.{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(tmp, _NEW, 0o600, dir_fd=shard.fd)
        except OSError:
            os.close(shard.fd)
            return
        try:
            with os.fdopen(fd, "wb") as f:
                if shard.mac_key is not None:  # team members read it through the group, as the root allows
                    os.fchmod(f.fileno(), 0o600 | (shard.root_mode & 0o040))
                f.write(_encode(key, header, data, shard.mac_key))
            os.replace(tmp, key, src_dir_fd=shard.fd, dst_dir_fd=shard.fd)
        except OSError:
            _unlink(shard.fd, tmp)
        finally:
            os.close(shard.fd)

    def _read(self, shard: _Shard, key: str) -> bytes | None:
        """The entry's bytes; None when absent, or when it is no regular file of a writer the cache trusts (then it is
        removed, and warned about once)."""
        path = f"{shard.path}{os.sep}{key}"
        try:
            fd = os.open(key, _ENTRY, dir_fd=shard.fd)
        except FileNotFoundError:
            return None
        except OSError as e:
            why = "a symbolic link" if e.errno == errno.ELOOP else e.strerror
        else:
            try:
                st = os.fstat(fd)
                why = "not a regular file" if not stat.S_ISREG(st.st_mode) else trust.problem(
                    st, shared=shard.mac_key is not None)
                if why is None:
                    return files.read_opened(fd, path, "compile cache entry", self._limit)
            except KernelpackError as e:
                why = e.message
            finally:
                os.close(fd)
        trust.warn_once(f"cache-entry:{self.root}:{why}",
                        f"kernelpack: ignored and removed the compile cache entry {path}: it is {why} (the kernel is "
                        f"compiled again)")
        _unlink(shard.fd, key)
        return None

    def usable(self) -> bool:
        """Whether the cache is on and not bypassed for its key file or its root (when that exists), warning once if
        it is: a build asks this in the driver, whose workers are then given no cache rather than each warning."""
        opened = self._open_root(create=False)
        if opened is not None:
            os.close(opened[0])
        return self.root is not None and not self._bypassed

    def _open_root(self, create: bool) -> tuple[int, os.stat_result] | None:
        """The root directory, open (the caller closes it) and trusted, with its status; None when the cache is off,
        bypassed (now, warned once, or before) or absent."""
        if self.root is None or self._bypassed:
            return None
        shared = self._settle() is not None
        if self._bypassed:
            return None
        try:
            if create:
                os.makedirs(self.root, mode=0o700, exist_ok=True)
            rfd = os.open(self.root, _DIR)  # the root may be a link (to another disk): what it names is checked
        except OSError:
            return None
        st = os.fstat(rfd)
        why = trust.problem(st, shared=shared)
        if why is None:
            return rfd, st
        os.close(rfd)
        self._bypass(f"it is {why}, so someone else could place compiled code in it",
                     "Use a directory that only you can write (KERNELPACK_CACHE_DIR; chmod go-w for one of yours), or "
                     "give a team's cache a key (KERNELPACK_CACHE_KEY_FILE, docs/reliability.md)")
        return None

    def _shard(self, key: str, *, create: bool) -> _Shard | None:
        """The shard directory of ``key``, open, when the cache is usable and the directory trusted; None when the cache
        is off, bypassed, the directory absent (and not ``create``) or not trusted (warned once)."""
        opened = self._open_root(create)
        if opened is None:
            return None
        rfd, root_st = opened
        mac_key = self._mac_key
        try:
            sfd = _open_shard(rfd, key[:2], create, root_st.st_mode if mac_key is not None else None)
        finally:
            os.close(rfd)
        if sfd is None:
            return None
        where = f"{self.root}{os.sep}{key[:2]}"
        why = _dir_problem(os.fstat(sfd), mac_key is not None)
        if why is not None:
            os.close(sfd)
            trust.warn_once(f"cache-shard:{where}:{why}",
                            f"kernelpack: not using the compile cache directory {where}: it is {why}; its entries are "
                            f"compiled again, not stored, until it is fixed (chmod go-w, or remove it: kernelpack "
                            f"makes it again)")
            return None
        return _Shard(sfd, where, mac_key, root_st.st_mode)

    def _settle(self) -> bytes | None:
        """The team key (None: a cache of the user's own), the knobs read at this cache's first use."""
        if not self._settled:
            self._settled = True
            k = config.knobs()
            self._limit, path = k.max_file_bytes, k.cache_key_file
            if path is not None and self._mac_key is None:
                try:
                    self._mac_key = trust.read_key_file(path)
                except KernelpackError as e:
                    self._bypass(f"KERNELPACK_CACHE_KEY_FILE is set but unusable: {e.message}",
                                 "Fix the key file, or unset KERNELPACK_CACHE_KEY_FILE for a cache of your own")
        return self._mac_key

    def _bypass(self, why: str, fix: str) -> None:
        """Do without this cache from now on, saying so once per process."""
        self._bypassed = True
        trust.warn_once(f"cache:{self.root}:{why}",
                        f"kernelpack: not using the compile cache {self.root}: {why}; compiling without it. {fix}")


def _open_shard(rfd: int, name: str, create: bool, shared_mode: int | None) -> int | None:
    """Shard directory ``name`` of the root open at ``rfd``, not through a link; made when ``create`` (in a team cache
    with the root's group permissions and set-group-id bit, whatever the umask)."""
    made = False
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=rfd)
            made = True
        except FileExistsError:
            pass
        except OSError:
            return None
    try:
        sfd = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=rfd)
    except OSError:  # absent, a link (ELOOP) or not a directory: no entries from it; put's mkdir left it alone
        return None
    if made and shared_mode is not None:
        try:
            os.fchmod(sfd, 0o700 | (shared_mode & (0o070 | stat.S_ISGID)))
        except OSError:
            pass
    return sfd


def _dir_problem(st: os.stat_result, shared: bool) -> str | None:
    return "not a directory" if not stat.S_ISDIR(st.st_mode) else trust.problem(st, shared=shared)


def _unlink(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def _mac(mac_key: bytes, key: str, header: bytes) -> bytes:
    return hmac.new(mac_key, key.encode() + b"\n" + header, hashlib.sha256).hexdigest().encode()


def _encode(key: str, header: bytes, data: bytes, mac_key: bytes | None) -> bytes:
    if mac_key is None:
        return _MAGIC + header + b"\n" + data
    return _MAGIC_MAC + _mac(mac_key, key, header) + b"\n" + header + b"\n" + data


def _decode(raw: bytes, key: str, mac_key: bytes | None) -> CacheEntry | None:
    """The entry in ``raw`` (stored under cache key ``key``); None when it does not check out — with a team key, also
    when it carries no MAC or another one."""
    start = len(_MAGIC)
    if raw.startswith(_MAGIC_MAC) and raw[start + _MAC_HEX:start + _MAC_HEX + 1] == b"\n":
        mac, start = raw[start:start + _MAC_HEX], start + _MAC_HEX + 1
    elif raw.startswith(_MAGIC):
        mac = None
    else:
        return None
    end = raw.find(b"\n", start)
    if end < 0:
        return None
    if mac_key is not None and (mac is None or not hmac.compare_digest(mac, _mac(mac_key, key, raw[start:end]))):
        return None
    try:
        header = json.loads(raw[start:end])
        digest, size, meta = header["sha256"], int(header["size"]), header["meta"]
    except (ValueError, KeyError, TypeError):
        return None
    data = raw[end + 1:]
    if len(data) != size or hashlib.sha256(data).hexdigest() != digest or not isinstance(meta, dict):
        return None
    return CacheEntry(meta, data)
