"""A memo of a library's generated text, so a rebuild whose kernels changed only in their binaries' bytes does not
regenerate NAME.c, NAME.h and NAME.hpp for every kernel.

What the generator writes depends on two things:

* the bundle's *structure*: its manifest's artifact entries (names, ABIs, launch specs, archs, constraints, which
  blob each binary is; everything an artifact is rebuilt from except the blobs' bytes and its provenance) -- NAME.c,
  NAME.hpp and most of NAME.h, and the layout of NAME_data.s;
* a few *facts* each cubin records for its kernel (REQNTID, compile-time cluster, ``__launch_bounds__``, static
  shared memory) -- the tables of NAME_data.s, and (REQNTID, explicit cluster) in NAME.h's comments.

The memo is one compile-cache entry per structure (key: library name, the structure's digest and kernelpack's own
code, :func:`kernelpack.core.cache.cache_key`) holding the three texts and the facts of every cubin they were generated
from, by blob SHA-256 and kernel entry. A later build with the same structure reads the facts of unchanged blobs
from it (no cubin parsed), parses only the changed ones, and reuses the texts when NAME.h's facts are the same;
NAME_data.s is always rewritten from the facts (it is small: one row per binary and blob). Anything else -- another
structure, a NAME.h fact that changed, a corrupt or missing entry -- generates everything as a clean build does, so
the outputs are the bytes a clean build writes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from ..bundle.artifact import KernelArtifact
from ..bundle.kpack import _canonical_json
from ..core.binary import Binary
from ..core.cache import CompileCache, cache_key
from ..launch.facts import enforced_cluster, launch_bounds_threads

KIND = "clib-sources"


@dataclass(frozen=True)
class CubinFacts:
    """What the generated library reads from one cubin for one kernel."""

    reqntid: tuple[int, int, int] | None
    max_threads: int  # product of __launch_bounds__' threads (0: none)
    cluster_dims: tuple[int, int, int] | None
    explicit_cluster: bool
    static_smem: int

    @property
    def cluster(self) -> tuple[int, int, int] | None:
        """The cluster the driver enforces (the launch model's rule)."""
        return enforced_cluster(self.cluster_dims, self.explicit_cluster)

    @property
    def header_view(self) -> tuple[object, ...]:
        """What NAME.h prints of these facts (clib/headers.py ``_facts``)."""
        return (self.reqntid, self.cluster_dims if self.explicit_cluster else None)

    def to_json(self) -> list[Any]:
        return [list(self.reqntid) if self.reqntid else None, self.max_threads,
                list(self.cluster_dims) if self.cluster_dims else None, self.explicit_cluster, self.static_smem]

    @classmethod
    def from_json(cls, v: Any) -> CubinFacts:
        r, mt, cd, ex, smem = v
        return cls(_dim3(r), int(mt), _dim3(cd), bool(ex), int(smem))

    @classmethod
    def read(cls, a: KernelArtifact, b: Binary) -> CubinFacts:
        """Parse them from the cubin (verifying it first where its artifact deferred that)."""
        ck = b.cubin.kernel(a.entry)  # as kernelpack.launch.facts.facts reads it
        return cls(ck.reqntid, launch_bounds_threads(ck.max_threads), ck.cluster_dims, ck.explicit_cluster,
                   ck.static_smem)


def _dim3(v: Any) -> tuple[int, int, int] | None:
    if v is None:
        return None
    x, y, z = (int(d) for d in v)
    return (x, y, z)


def structure_digest(manifest: dict[str, Any]) -> str:
    """SHA-256 of the manifest's artifact entries less their provenance (which compiler, which source text: the
    generated code never reads it; it is in the embedded bundle, NAME_data.s's ``.incbin``)."""
    arts = [{k: v for k, v in a.items() if k != "provenance"} for a in manifest["artifacts"]]
    return hashlib.sha256(_canonical_json(arts)).hexdigest()


@dataclass
class Memo:
    """The texts generated for one structure and the cubin facts they came from."""

    tu: str
    header: str
    cpp_header: str
    facts: dict[str, CubinFacts]  # "<blob sha256>:<entry>" -> facts
    header_views: list[Any]  # the header view of every cubin binary, in table order

    def to_bytes(self) -> bytes:
        texts = [self.tu.encode(), self.header.encode(), self.cpp_header.encode()]
        head = json.dumps({"sizes": [len(t) for t in texts], "facts": {k: f.to_json() for k, f in self.facts.items()},
                           "header_views": self.header_views}, sort_keys=True, separators=(",", ":")).encode()
        return head + b"\n" + b"".join(texts)

    @classmethod
    def from_bytes(cls, data: bytes) -> Memo | None:
        """None unless ``data`` is a whole memo (an unreadable entry is regenerated, never served)."""
        try:
            end = data.index(b"\n")
            head = json.loads(data[:end])
            sizes = [int(s) for s in head["sizes"]]
            body = data[end + 1:]
            if len(sizes) != 3 or sum(sizes) != len(body):
                return None
            tu, header, hpp = (body[o:o + s].decode() for o, s in zip((0, sizes[0], sizes[0] + sizes[1]), sizes))
            facts = {str(k): CubinFacts.from_json(v) for k, v in head["facts"].items()}
            return cls(tu, header, hpp, facts, _views(head["header_views"]))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None


def _views(v: Any) -> list[Any]:
    """Header views read back from JSON, as :attr:`CubinFacts.header_view` makes them (tuples, not lists)."""
    return [(_dim3(r), _dim3(c)) for r, c in v]


def key(lib: str, structure: str) -> str:
    return cache_key(kind=KIND, library=lib, structure=structure)


def load(cache: CompileCache, lib: str, structure: str) -> Memo | None:
    entry = cache.get(key(lib, structure))
    return None if entry is None else Memo.from_bytes(entry.data)


def store(cache: CompileCache, lib: str, structure: str, memo: Memo) -> None:
    cache.put(key(lib, structure), {"kind": KIND, "library": lib}, memo.to_bytes())
