"""A ``.kpack`` bundle read for loading: checked whole at once, its kernels built family by family on first use.

``BundleIndex(data, source)`` checks what proves the file is the one written (header, size, the manifest's and every
blob's SHA-256, the padding) and groups the manifest's artifacts by family name; nothing else. ``family(name)``
builds that family's artifacts (expanding the blobs they use, once per blob) with their cubins' verification
deferred to each binary's first use (:func:`kernelpack.artifact.deferred_verification`): the build verified them,
and the hashes prove the bytes unchanged. So loading a bundle of 10,000 specializations costs what its manifest
costs to parse, and a binary that cannot be used fails when its kernel is first used, naming the kernel.
"""

from __future__ import annotations

import gc
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from . import bundle as bd
from .artifact import Binary, KernelArtifact, deferred_verification
from .bundle import _HEADER, FLAG_ZLIB_BLOBS, Bundle, _artifact, expand_blob, stored_blobs
from .errors import BundleError, KernelpackError
from .merge import set_origin

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused (as it was before, after): JSON parsing creates no cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Blobs(Sequence[tuple[bytes, "bytes | None"]]):
    """The bundle's blobs, each expanded on first access (under the index's lock)."""

    def __init__(self, stored: list[tuple[bytes, int | None]], source: str) -> None:
        self._stored = stored
        self._done: dict[int, tuple[bytes, bytes | None]] = {}
        self._source = source

    def __len__(self) -> int:
        return len(self._stored)

    def __getitem__(self, i: Any) -> Any:
        if not isinstance(i, int):
            raise TypeError("blob index must be an int")
        got = self._done.get(i)
        if got is None:
            blob, raw_size = self._stored[i]
            got = self._done[i] = expand_blob(i, blob, raw_size, self._source)
        return got


class BundleIndex:
    """The families of one bundle file, each built on first use (thread-safe); see the module's doc."""

    def __init__(self, data: bytes, source: str) -> None:
        self.source = source
        body = bd.manifest_bytes(data, source=source)
        split = bd.split_manifest(body, source)  # this writer's layout: artifacts parsed family by family, on first use
        groups: dict[str, list[dict[str, Any] | bytes]] = {}
        if split is not None:
            manifest, lines = split
            for name, text in lines:
                groups.setdefault(name, []).append(text)
            self._count = len(lines)
        else:
            with _gc_paused():  # parsing makes ~30 containers per artifact: collecting them midway only costs time
                manifest = bd.parse_manifest(body, source)
            for i, a in enumerate(manifest["artifacts"]):
                given = a.get("name") if isinstance(a, dict) else None
                if not isinstance(given, str) or not _IDENT.match(given):
                    raise BundleError(f"{source}: artifact {i} has no kernel name that is a C identifier "
                                      f"(name {given!r:.80})")
                groups.setdefault(given, []).append(a)
            self._count = len(manifest["artifacts"])
        zlib_blobs = bool(_HEADER.unpack_from(data)[2] & FLAG_ZLIB_BLOBS)
        self._blobs = _Blobs(stored_blobs(manifest, data, source, zlib_blobs=zlib_blobs), source)
        self._groups = dict(sorted(groups.items()))
        self._families: dict[str, tuple[KernelArtifact, ...]] = {}
        self._shared: dict[tuple[int, str, str], Binary] = {}  # one Binary per blob, across families
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Specializations (artifacts) in the bundle."""
        return self._count

    def names(self) -> list[str]:
        """The family names, sorted."""
        return list(self._groups)

    def family(self, name: str) -> tuple[KernelArtifact, ...]:
        """The artifacts of family ``name`` sorted by variant (KeyError for a name the bundle lacks); BundleError
        naming the bundle and kernel when an entry is malformed or a blob does not expand."""
        with self._lock:
            got = self._families.get(name)
            if got is None:
                got = self._families[name] = self._build(name, self._groups[name])
        return got

    def _build(self, name: str, entries: list[dict[str, Any] | bytes]) -> tuple[KernelArtifact, ...]:
        source = self.source
        try:
            parsed = [bd.artifact_entry(a, name, source) if isinstance(a, bytes) else a for a in entries]
            with deferred_verification():
                arts = [_artifact(a, self._blobs, self._shared) for a in parsed]
        except BundleError as e:
            raise BundleError(f"{source}: kernel {name}: {e.message.removeprefix(source + ': ')}") from None
        except KernelpackError as e:
            raise BundleError(f"{source}: {e.message}") from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError, RecursionError) as e:
            raise BundleError(f"{source}: kernel {name}: malformed manifest entry: {e!r:.300}") from None
        one = Bundle(tuple(set_origin(a, source) for a in arts), source=source)  # refuses duplicate variants
        return one.artifacts

    def bundle(self) -> Bundle:
        """Every family, as one Bundle (builds the families not built yet)."""
        return Bundle(tuple(a for n in self._groups for a in self.family(n)), source=self.source)

    def verify(self) -> None:
        """Build every family and verify every binary now (what ``kernelpack.load(..., verify=True)`` does)."""
        for n in self._groups:
            for a in self.family(n):
                try:
                    a.verify()
                except KernelpackError as e:
                    raise BundleError(f"{self.source}: {e.message}") from None
