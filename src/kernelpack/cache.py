"""The compile cache: content-addressed entries, atomic writes, corrupt entries recompiled, never served.

An entry is one file ``<root>/<key[:2]>/<key>``::

    b"KPCACHE1\\n" + JSON header line {"sha256", "size", "meta"} + b"\\n" + payload bytes

It is written to a temp file in the same directory and renamed into place, so readers see either no
entry or a whole one, whatever other processes do (several compiling the same key just race to rename
identical content). A reader re-hashes the payload; anything that does not check out is deleted.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import config

_MAGIC = b"KPCACHE1\n"


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
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in _CODE_SUFFIXES and "__pycache__" not in p.parts):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    meta: dict[str, Any]
    data: bytes


class CompileCache:
    """A directory of entries; ``root=None`` is a disabled cache that stores nothing."""

    def __init__(self, root: Path | None) -> None:
        self.root = root

    @classmethod
    def default(cls) -> CompileCache:
        return cls(config.knobs().cache_dir)

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / key

    def get(self, key: str) -> CacheEntry | None:
        if self.root is None:
            return None
        path = self._path(key)
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        entry = _decode(raw)
        if entry is None:
            path.unlink(missing_ok=True)  # corrupt or partial: recompile instead of serving it
        return entry

    def put(self, key: str, meta: dict[str, Any], data: bytes) -> None:
        """Store an entry; an unwritable cache is skipped silently (caching is an optimization)."""
        if self.root is None:
            return
        path = self._path(key)
        header = json.dumps({"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "meta": meta},
                            sort_keys=True, separators=(",", ":")).encode()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:8]}.", suffix=".tmp")
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + header + b"\n" + data)
            os.replace(tmp, path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)


def _decode(raw: bytes) -> CacheEntry | None:
    if not raw.startswith(_MAGIC):
        return None
    end = raw.find(b"\n", len(_MAGIC))
    if end < 0:
        return None
    try:
        header = json.loads(raw[len(_MAGIC):end])
        digest, size, meta = header["sha256"], int(header["size"]), header["meta"]
    except (ValueError, KeyError, TypeError):
        return None
    data = raw[end + 1:]
    if len(data) != size or hashlib.sha256(data).hexdigest() != digest or not isinstance(meta, dict):
        return None
    return CacheEntry(meta, data)
