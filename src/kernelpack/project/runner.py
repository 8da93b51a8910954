"""``kernelpack build``: run a project's jobs in parallel processes, reuse what did not change, link the library.

Three levels of "nothing changed", cheapest first:

1. **project digest** (no import, no compile): the project file, every file its entries read, the Python modules
   it includes, tool versions. Equal to the last build's and every output still in place -> done.
2. **job fingerprints**: per job (one CUDA source, one Triton specialization...) -> the previous output is reused.
3. **library stamp**: a hash of the merged bundle bytes and link settings -> the library is not relinked.

Under that, each frontend's compile cache skips compilations whose precise inputs did not change. State lives in
``<out>/.kernelpack-build/`` (``state.json``, one output file per job, ``report.json``).
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import hashlib
import json
import multiprocessing
import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import config
from ..bundle import Bundle, write_atomic
from ..errors import BundleError, KernelpackError
from .deps import FRONTENDS_ALL, digest_files, python_deps, tool_versions
from .jobs import Job, Outcome, execute, fingerprint, plan, run, static_files
from .model import Project, load_project
from .report import Row, rows

STATE_VERSION = 1
STATE_DIR = ".kernelpack-build"


class BuildFailed(KernelpackError):
    """One or more jobs failed; the message lists them with their errors."""


@dataclass
class BuildReport:
    """What a build did (``to_json`` is the ``--json`` output)."""

    project: Path
    out: Path
    up_to_date: bool = False
    jobs: dict[str, str] = field(default_factory=dict)  # job id -> reused | compiled | cached | failed
    job_seconds: dict[str, float] = field(default_factory=dict)
    linked: bool = False
    link_seconds: float = 0.0  # writing the bundle and linking the library (when it was relinked)
    rows: list[Row] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for s in self.jobs.values() if s == status)

    def to_json(self) -> dict[str, Any]:
        return {"project": str(self.project), "out": str(self.out), "up_to_date": self.up_to_date, "jobs": self.jobs,
                "job_seconds": self.job_seconds, "linked": self.linked, "link_seconds": self.link_seconds,
                "outputs": self.outputs,
                "seconds": round(self.seconds, 3), "kernels": [r.to_json() for r in self.rows]}


class Events:
    """What the runner reports while it builds (the default reports nowhere)."""

    def planned(self, stale: list[Job], reused: int) -> None:
        """The jobs that will run, and how many were reused."""

    def start(self, job: Job) -> None:
        """A job started (it is running in a worker now)."""

    def done(self, job: Job, outcome: Outcome) -> None:
        """A job finished (see ``outcome.ok``)."""


def build(where: str | os.PathLike[str] | None = None, *, jobs: int | None = None, force: bool = False,
          out: str | os.PathLike[str] | None = None, events: Events | None = None) -> BuildReport:
    """Build the project at ``where`` (a project file or a directory holding one). ``jobs``: worker processes
    (default: CPU count). ``force``: ignore fingerprints and stamps (the compile cache is still used). ``out``:
    output directory instead of the project's ``[library] out``."""
    t0 = time.perf_counter()
    static = _load(where, out, import_includes=False)
    state_dir = static.out / STATE_DIR
    state = _read_state(state_dir)
    digest = project_digest(static)
    report = BuildReport(static.path, static.out)
    if not force and state.get("digest") == digest and _outputs_intact(state):
        report.up_to_date = True
        report.jobs = {j: "reused" for j in state.get("jobs", {})}
        report.outputs = dict(state.get("outputs_paths", {}))
        report.rows = [Row(**{**r, "status": "reused"}) for r in state.get("rows", [])]
        report.seconds = time.perf_counter() - t0
        return report

    project = _load(where, out, import_includes=True) if static.includes else static
    all_jobs = plan(project)
    files: dict[int, list[Path]] = {}  # per entry: its jobs read the same files
    for j in all_jobs:
        if j.entry not in files:
            files[j.entry] = static_files(project.entries[j.entry], project.root) + _include_files(project, j)
    prints = {j.id: fingerprint(project, j, files[j.entry]) for j in all_jobs}
    old = state.get("jobs", {})
    outcomes: dict[str, Outcome] = {}
    stale = []
    for j in all_jobs:
        prev = old.get(j.id)
        path = state_dir / "jobs" / prev["file"] if prev else None
        if not force and prev and prev.get("fingerprint") == prints[j.id] and path is not None and path.is_file():
            outcomes[j.id] = Outcome(j.id, True, prev["kind"], path.read_bytes(), prev.get("seconds", 0.0))
            report.jobs[j.id] = "reused"
        else:
            stale.append(j)
    cache_dir = config.knobs().cache_dir
    (events or Events()).planned(stale, len(all_jobs) - len(stale))
    for o in _run_all(project, stale, jobs or os.cpu_count() or 1, str(cache_dir) if cache_dir else None, events):
        outcomes[o.job] = o
        report.jobs[o.job] = o.status
        report.job_seconds[o.job] = round(o.seconds, 3)
    failed = [o for o in outcomes.values() if not o.ok]
    new_jobs = _save_jobs(state_dir, all_jobs, prints, outcomes, old)
    if failed:
        _write_state(state_dir, {**state, "version": STATE_VERSION, "digest": None, "jobs": new_jobs})
        lines = "\n".join(f"  {o.job}: {o.error}" for o in failed)
        raise BuildFailed(f"{len(failed)} of {len(all_jobs)} build step(s) failed:\n{lines}",
                          log="\n\n".join(f"== {o.job}\n{o.log}" for o in failed if o.log))

    bundle, programs, status = _merge(all_jobs, outcomes, report.jobs)
    t_link = time.perf_counter()
    outputs, report.linked = _write_outputs(project, bundle, programs, state, force)
    report.link_seconds = round(time.perf_counter() - t_link, 3)
    report.outputs = {k: str(v) for k, v in outputs.items()}
    report.rows = rows(bundle, project.library.archs, status)
    report.rows += _host_rows(programs, project.library.archs)
    _write_state(state_dir, {
        "version": STATE_VERSION, "digest": digest, "jobs": new_jobs,
        "library_stamp": _stamp(project, bundle, programs),
        "outputs": {str(p): _stat(p) for p in outputs.values()}, "outputs_paths": report.outputs,
        "rows": [r.to_json() for r in report.rows],
    })
    report.seconds = time.perf_counter() - t0
    return report


def _load(where: str | os.PathLike[str] | None, out: str | os.PathLike[str] | None, *,
          import_includes: bool) -> Project:
    project = load_project(where, import_includes=import_includes)
    if out is None:
        return project
    return dataclasses.replace(project, library=dataclasses.replace(project.library, out=Path(out).resolve()))


# ------------------------------------------------------------------------------------------------ digests


def project_digest(project: Project) -> str:
    """Everything a build reads that can be found without importing the project's Python modules."""
    files: list[Path] = [project.path]
    for inc in project.includes:
        files += python_deps(inc, [project.root])
    for e in project.entries:
        files += static_files(e, project.root)
    frontends = FRONTENDS_ALL if project.includes else sorted({e.frontend for e in project.entries})
    blob = {"files": digest_files(files), "versions": {f: tool_versions(f) for f in frontends},
            "library": repr(project.library), "cc": config.knobs().cc, "state": STATE_VERSION}
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()


def _include_files(project: Project, job: Job) -> list[Path]:
    """Entries defined in Python modules: those modules (and what they import) are part of their settings."""
    if job.entry < project.n_static:
        return []
    return [f for inc in project.includes for f in python_deps(inc, [project.root])]


def _stamp(project: Project, bundle: Bundle, programs: list[Any]) -> str:
    h = hashlib.sha256(bundle.to_bytes())
    for p in programs:
        h.update(pickle.dumps(p))
    lib = project.library
    h.update(json.dumps([lib.name, lib.version, list(lib.cflags), config.knobs().cc,
                         tool_versions("cuda")["kernelpack"]]).encode())
    return h.hexdigest()


# ------------------------------------------------------------------------------------------------ running


def _run_all(project: Project, stale: list[Job], workers: int, cache_dir: str | None,
             events: Events | None) -> list[Outcome]:
    ev = events or Events()
    if not stale:
        return []
    if workers <= 1 or len(stale) == 1:
        out = []
        for j in stale:
            ev.start(j)
            o = run(project, j, cache_dir)
            ev.done(j, o)
            out.append(o)
        return out
    # at most `workers` jobs in flight, so "submitted" means "running" for the progress display
    ctx = multiprocessing.get_context("spawn")  # the DSLs are neither thread- nor fork-safe
    results: list[Outcome] = []
    queue = list(stale)
    with cf.ProcessPoolExecutor(max_workers=min(workers, len(stale)), mp_context=ctx) as pool:
        running: dict[cf.Future[Outcome], Job] = {}
        while queue or running:
            while queue and len(running) < workers:
                j = queue.pop(0)
                ev.start(j)
                running[pool.submit(execute, str(project.path), j.id, cache_dir)] = j
            done, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                j = running.pop(fut)
                try:
                    o = fut.result()
                except Exception as err:  # the worker died (a crash in a compiler)
                    o = Outcome(j.id, False, error=f"worker process failed: {type(err).__name__}: {err}")
                ev.done(j, o)
                results.append(o)
    return results


def _merge(all_jobs: list[Job], outcomes: dict[str, Outcome],
           statuses: dict[str, str]) -> tuple[Bundle, list[Any], dict[str, str]]:
    bundles, programs, status = [], [], {}
    for j in all_jobs:
        o = outcomes[j.id]
        if o.kind == "host":
            programs.append(pickle.loads(o.data))  # our own state file, written by this build tool
        else:
            b = Bundle.from_bytes(o.data, source=j.id)
            bundles.append(b)
            status.update({a.label: statuses.get(j.id, "") for a in b})
    try:
        return Bundle.of(*bundles), programs, status
    except BundleError as err:
        raise BuildFailed(f"the build steps' kernels cannot share one library: {err.message} (give the entries "
                          f"distinct names or variants)") from None


def _write_outputs(project: Project, bundle: Bundle, programs: list[Any], state: dict[str, Any],
                   force: bool) -> tuple[dict[str, Path], bool]:
    lib, out = project.library, project.out
    outputs: dict[str, Path] = {}
    if "bundle" in lib.outputs:
        path = out / f"{lib.name}.kpack"
        data = bundle.to_bytes()
        if force or not path.is_file() or path.read_bytes() != data:
            write_atomic(path, data)
        outputs["bundle"] = path
    if "library" not in lib.outputs:
        return outputs, False
    from .link import expected_outputs, link

    expected = expected_outputs(lib.name, out, programs)
    stamp = _stamp(project, bundle, programs)
    fresh = state.get("library_stamp") == stamp and all(
        state.get("outputs", {}).get(str(p)) == _stat(p) for p in expected.values())
    if fresh and not force:
        return {**outputs, **{k: v for k, v in expected.items() if v.exists()}}, False
    return {**outputs, **link(lib, out, bundle, programs)}, True


# ------------------------------------------------------------------------------------------------ state


def _read_state(d: Path) -> dict[str, Any]:
    try:
        state = json.loads((d / "state.json").read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) and state.get("version") == STATE_VERSION else {}


def _write_state(d: Path, state: dict[str, Any]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    os.replace(tmp, d / "state.json")


def _save_jobs(d: Path, all_jobs: list[Job], prints: dict[str, str], outcomes: dict[str, Outcome],
               old: dict[str, Any]) -> dict[str, Any]:
    (d / "jobs").mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    for j in all_jobs:
        o = outcomes.get(j.id)
        if o is None or not o.ok:
            continue
        name = hashlib.sha256(j.id.encode()).hexdigest()[:16] + (".kpack" if o.kind == "bundle" else ".pkl")
        path = d / "jobs" / name
        if not (path.is_file() and old.get(j.id, {}).get("fingerprint") == prints[j.id]):
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(o.data)
            os.replace(tmp, path)
        out[j.id] = {"fingerprint": prints[j.id], "file": name, "kind": o.kind, "seconds": round(o.seconds, 3)}
    return out


def _stat(p: Path) -> list[int] | None:
    try:
        st = p.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _outputs_intact(state: dict[str, Any]) -> bool:
    outs = state.get("outputs")
    return isinstance(outs, dict) and all(_stat(Path(p)) == s for p, s in outs.items())


def _host_rows(programs: list[Any], archs: tuple[str, ...]) -> list[Row]:
    from .report import row

    out = []
    for p in programs:
        for k in p.kernels:
            r = row(k, archs, "host program")
            r.kernel = f"{p.label} ({k.name})"
            out.append(r)
    return out
