"""Build steps: a project's entries expanded into jobs (one per variant of an entry), their fingerprints, and
running one.

A job is the smallest unit that compiles independently; its entry's frontend says what that is (a CUDA source with
all its kernels, a Triton specialization, a cuTile signature, a CuTe variant, a set of prebuilt binaries: see
:mod:`kernelpack.frontends`). Jobs run in worker processes (the DSLs are not thread-safe) and return bytes: a
``.kpack`` bundle, or a CuTe ``HostProgram`` as JSON (``HostProgram.to_bytes``).

The fingerprint of a job hashes what it is built from without compiling it: the entry's settings, the files it
reads (the frontend says which: a source and its local headers, the Python modules it imports, binaries), the
frontend's package versions and kernelpack's.
Equal fingerprint -> the previous output is reused; otherwise the frontend runs, and its own compile cache
(precise keys) still skips whatever did not change underneath.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.cache import CompileCache
from ..core.deps import digest_files
from ..core.errors import KernelpackError
from ..frontends.base import OUTPUT_KINDS, Entry, Output, Step
from ..frontends.registry import frontend_of
from .model import Project, ProjectError


@dataclass(frozen=True)
class Job:
    id: str  # stable across builds: "triton:add[f32]"
    entry: int  # index into Project.entries
    key: str  # the variant (Triton specialization name, cuTile signature name, CuTe variant); "" if none
    index: int  # position of that variant in the entry
    frontend: str
    archs: tuple[str, ...]


Dropped = tuple[str, str, str, str]  # ConfigDropped as plain data: (kernel, config label, arch, reason)


@dataclass(frozen=True)
class Outcome:
    """What a worker sends back (plain data: exceptions do not always pickle)."""

    job: str
    ok: bool
    kind: str = "bundle"  # "bundle" (.kpack bytes) | "host" (HostProgram.to_bytes())
    data: bytes = b""
    seconds: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    error: str = ""
    log: str = ""
    inputs: str = ""  # a Ray worker's: the digest of the project files it compiled from (Snapshot.digest's recipe)
    dropped: tuple[Dropped, ...] = ()  # (kernel, config label, arch, why): configs it left out for an arch

    @property
    def status(self) -> str:
        if not self.ok:
            return "failed"
        return "cached" if self.cache_hits and not self.cache_misses else "compiled"


class CountingCache(CompileCache):
    """The compile cache, counting hits and misses so the progress display can say "cached"."""

    def __init__(self, root: Path | None) -> None:
        super().__init__(root)
        self.hits = self.misses = 0

    def get(self, key: str):  # type: ignore[no-untyped-def]
        entry = super().get(key)
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry


# ------------------------------------------------------------------------------------------------ planning


def plan(project: Project) -> list[Job]:
    """Every job of the project, in entry order; ids are unique."""
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    for i, e in enumerate(project.entries):
        archs = project.archs_of(e)
        fe = frontend_of(e)
        for n, key in enumerate(fe.variants(e, project.root)):
            base = f"{fe.kind(e)}:{fe.label(e, project.root)}" + (f"[{key}]" if key else "")
            seen[base] = seen.get(base, 0) + 1
            jid = base if seen[base] == 1 else f"{base}#{seen[base]}"
            jobs.append(Job(jid, i, key, n, e.frontend, archs))
    return jobs


# ------------------------------------------------------------------------------------------------ fingerprints


def static_files(e: Entry, root: Path) -> list[Path]:
    """Files an entry reads, found without importing the project's modules (its frontend's, and ``depends``)."""
    files: list[Path] = [p for pat in e.depends for p in sorted(root.glob(pat))]
    return files + frontend_of(e).files(e, root)


def fingerprint(project: Project, job: Job, files: Sequence[Path]) -> str:
    """``files``: what the job reads (``static_files`` of its entry, plus the defining modules of Python entries)."""
    e = project.entries[job.entry]
    blob = {"job": job.id, "key": job.key, "archs": job.archs, "entry": _settings(e),
            "files": digest_files(files), "versions": frontend_of(e).versions()}
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()


def _settings(e: Entry) -> dict[str, Any]:
    out = {"frontend": e.frontend}
    for f in dataclasses.fields(e):
        if f.name != "_":
            out[f.name] = _stable(getattr(e, f.name))
    return out


def _stable(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, Mapping):
        return {str(k): _stable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_stable(x) for x in v]
    mod, qual = getattr(v, "__module__", None), getattr(v, "__qualname__", None)
    if mod and qual:
        return f"<{mod}:{qual}>"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(v))  # its defining file's hash covers the value


# ------------------------------------------------------------------------------------------------ running


def run(project: Project, job: Job, cache_dir: str | None) -> Outcome:
    """Compile one job; never raises (errors come back in the Outcome)."""
    cache = CountingCache(Path(cache_dir) if cache_dir else None)
    t0 = time.perf_counter()
    try:
        out = _compile(project, job, cache)
    except KernelpackError as err:
        return Outcome(job.id, False, seconds=time.perf_counter() - t0, error=err.message, log=err.log or "")
    except Exception as err:  # a user's kernel module can raise anything
        return Outcome(job.id, False, seconds=time.perf_counter() - t0, error=f"{type(err).__name__}: {err}",
                       log=traceback.format_exc())
    dropped = tuple((d.kernel, d.label, d.arch, d.reason) for d in out.dropped)
    return Outcome(job.id, True, out.kind, out.data, time.perf_counter() - t0, cache.hits, cache.misses,
                   dropped=dropped)


def _compile(project: Project, job: Job, cache: CompileCache) -> Output:
    e = project.entries[job.entry]
    out = frontend_of(e).build(e, Step(project.root, job.key, job.index, job.archs, cache))
    if out.kind not in OUTPUT_KINDS or not isinstance(out.data, bytes):
        raise ProjectError(f"{job.id}: the {e.frontend} frontend returned a {out.kind!r} output; expected one of "
                           f"{OUTPUT_KINDS}")
    return out


_LOADED: dict[str, tuple[float, Project, dict[str, Job]]] = {}


def execute(project_file: str, job_id: str, cache_dir: str | None) -> Outcome:
    """Worker entry point: load the project once per process, then run one job."""
    from .model import load_project

    mtime = Path(project_file).stat().st_mtime
    hit = _LOADED.get(project_file)
    if hit is None or hit[0] != mtime:
        try:
            project = load_project(project_file)
            hit = (mtime, project, {j.id: j for j in plan(project)})
        except Exception as err:
            return Outcome(job_id, False, error=f"loading {project_file}: {type(err).__name__}: {err}",
                           log=traceback.format_exc())
        _LOADED[project_file] = hit
    job = hit[2].get(job_id)
    if job is None:
        return Outcome(job_id, False, error=f"job {job_id} is no longer in {project_file}")
    return run(hit[1], job, cache_dir)
