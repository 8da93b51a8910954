"""``kernelpack build``: run a project's jobs in parallel processes, reuse what did not change, link the library.

Three levels of "nothing changed", cheapest first:

1. **project digest** (no import, no compile): the project file, every file its entries read, the Python modules
   it includes, tool versions. Equal to the last build's and every output still in place -> done.
2. **job fingerprints**: per job (one CUDA source, one Triton specialization...) -> the previous output is reused.
3. **library stamp**: a hash of the merged bundle bytes and link settings -> the library is not relinked.

Under that, each frontend's compile cache skips compilations whose precise inputs did not change. State lives in
``<out>/.kernelpack-build/`` (``state.json``, one output file per job; see :mod:`.state`, which reads it as untrusted
data). The outputs and the new ``state.json`` are published together (:mod:`kernelpack.core.publish`): an
interrupted or
failed build leaves the previous set, never half of each.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..bundle import host_manifest
from ..core import config
from ..core._reprs import clip_left
from ..core.arch import Arch
from ..core.cache import CompileCache
from ..core.deps import digest_files, python_deps
from ..core.errors import BundleError, KernelpackError
from ..core.publish import Stage, output_dir
from ..core.version import __version__
from ..frontends.registry import FRONTENDS
from . import state as st
from .jobs import Job, Outcome, execute, fingerprint, plan, run, static_files
from .link import expected_outputs
from .model import BuildSpec, Project, ProjectError, check_executor, load_project
from .report import Row, rows_reusing, warn_shadowed
from .state import STATE_DIR, STATE_VERSION

if TYPE_CHECKING:
    from ..bundle.kpack import Bundle

# (the bundle, artifact, merge and launch modules are imported where a build uses them: a no-op build needs none)

LOCAL = BuildSpec()  # the default executor: worker processes on this machine
Built = Any  # a job's decoded output: Bundle, or a CuTe HostProgram


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
    failed: dict[str, str] = field(default_factory=dict)  # keep_going: job id -> why it failed (left out)

    def __repr__(self) -> str:
        jobs = ", ".join(f"{n} {s}" for s in ("compiled", "cached", "reused", "failed") if (n := self.count(s)))
        state = "up to date" if self.up_to_date else "linked" if self.linked else "not relinked"
        return (f"<BuildReport {clip_left(str(self.project), 100)}: {len(self.jobs)} jobs ({jobs or 'none'}), "
                f"{state}, {len(self.rows)} kernels, {self.seconds:.1f} s>")

    def count(self, status: str) -> int:
        return sum(1 for s in self.jobs.values() if s == status)

    def to_json(self) -> dict[str, Any]:
        return {"project": str(self.project), "out": str(self.out), "up_to_date": self.up_to_date, "jobs": self.jobs,
                "job_seconds": self.job_seconds, "linked": self.linked, "link_seconds": self.link_seconds,
                "outputs": self.outputs, "failed": self.failed,
                "seconds": round(self.seconds, 3), "kernels": [r.to_json() for r in self.rows]}


class Events:
    """What the runner reports while it builds (the default reports nowhere)."""

    def planned(self, stale: list[Job], reused: int) -> None:
        """The jobs that will run, and how many were reused."""

    def start(self, job: Job) -> None:
        """A job started (it is running in a worker now)."""

    def done(self, job: Job, outcome: Outcome) -> None:
        """A job finished (see ``outcome.ok``)."""


# what runs a build's stale steps instead of fresh worker processes: (project, steps, cache dir, events) -> outcomes
StepRunner = Callable[[Project, list[Job], "str | None", Events], list[Outcome]]


def build(where: str | os.PathLike[str] | None = None, *, jobs: int | None = None, force: bool = False,
          out: str | os.PathLike[str] | None = None, events: Events | None = None,
          outputs: tuple[str, ...] | None = None, tuning: str | os.PathLike[str] | None = None,
          executor: str | None = None, address: str | None = None, steps: StepRunner | None = None,
          keep_going: bool = False) -> BuildReport:
    """Build the project at ``where`` (a project file or a directory holding one). ``jobs``: worker processes
    (default: CPU count; with Ray, the tasks in flight, default: the cluster's CPUs). ``executor``: "local" or "ray"
    (default: the project's ``[build] executor``, else local); ``address``: the Ray cluster (default: ``[build]
    address``, else a local Ray instance of ``jobs`` CPUs, started and stopped by the build). ``force``: ignore
    fingerprints and stamps (the compile cache is still used). ``out``: output directory instead of the project's
    ``[library] out``. ``outputs``: instead of ``[library] outputs`` (``kernelpack wheel`` needs the bundle, and the
    library only when the wheel carries it). ``tuning``: a tuning file instead of ``[library] tuning`` (``"none"``:
    build without one, e.g. the bundle ``kernelpack tune`` times). ``steps``: what runs the stale steps instead of
    fresh worker processes (``kernelpack build --watch``'s warm workers, kernelpack.project.warm). ``keep_going``: steps
    that fail are left out (``report.failed`` says why) and the rest is linked; the next build tries them again."""
    t0 = time.perf_counter()
    static = _with_tuning(_load(where, out, import_includes=False, outputs=outputs), tuning)
    spec = _executor(static, executor, address)
    with output_dir(static.out, "output directory") as out_dir:
        return _build(where, out, static, out_dir, jobs, force, events, t0, outputs, spec, steps, keep_going)


def _executor(project: Project, executor: str | None, address: str | None) -> BuildSpec:
    """The build's executor: the arguments over the project's ``[build]`` table."""
    if executor is not None:
        check_executor(executor, "--executor")
    if address is not None and executor in (None, "ray"):
        return BuildSpec("ray", address)
    if address is not None:
        raise ProjectError(f"--address {address!r} is for --executor ray; given --executor {executor!r}")
    if executor is None or executor == project.build.executor:
        return project.build
    return BuildSpec(executor, project.build.address if executor == "ray" else None)


def _with_tuning(project: Project, tuning: str | os.PathLike[str] | None) -> Project:
    if tuning is None:
        return project
    path = None if str(tuning) == "none" else Path(tuning).resolve()
    return dataclasses.replace(project, library=dataclasses.replace(project.library, tuning=path))


def _build(where: str | os.PathLike[str] | None, out: str | os.PathLike[str] | None, static: Project, out_dir: Path,
           jobs: int | None, force: bool, events: Events | None, t0: float,
           outputs: tuple[str, ...] | None = None, spec: BuildSpec = LOCAL,
           steps: StepRunner | None = None, keep_going: bool = False) -> BuildReport:
    state_dir = out_dir / STATE_DIR
    st.prepare(state_dir)
    expected = {str(p) for p in _expected_outputs(static).values()}
    state = st.read_state(state_dir, expected)
    digest = project_digest(static)
    report = BuildReport(static.path, static.out)
    if not force and state.get("digest") == digest and _outputs_intact(state, expected):
        report.up_to_date = True
        report.jobs = {j: "reused" for j in state.get("jobs", {})}
        report.outputs = dict(state.get("outputs_paths", {}))
        report.rows = [Row(**{**r, "status": "reused" if r["status"] != "dropped" else "dropped"})
                       for r in state.get("rows", [])]
        report.seconds = time.perf_counter() - t0
        return report

    project = (dataclasses.replace(_load(where, out, import_includes=True, outputs=outputs), library=static.library)
               if static.includes else static)
    all_jobs = plan(project)
    files: dict[int, list[Path]] = {}  # per entry: its jobs read the same files
    for j in all_jobs:
        if j.entry not in files:
            files[j.entry] = static_files(project.entries[j.entry], project.root) + _include_files(project, j)
    prints = {j.id: fingerprint(project, j, files[j.entry]) for j in all_jobs}
    old = state.get("jobs", {})
    outcomes: dict[str, Outcome] = {}
    built: dict[str, Built] = {}
    stale = []
    for j in all_jobs:
        prev = old.get(j.id)
        reused = None
        if not force and prev and prev["fingerprint"] == prints[j.id]:
            reused = _decode_saved(state_dir, j.id, prev["kind"], prev["sha256"])
        if reused is None:
            stale.append(j)
            continue
        built[j.id] = reused
        outcomes[j.id] = Outcome(j.id, True, prev["kind"], seconds=prev.get("seconds", 0.0),
                                 dropped=tuple(tuple(d) for d in prev.get("dropped", ())))
        report.jobs[j.id] = "reused"
    cache_dir = config.knobs().cache_dir
    if stale and cache_dir is not None and not CompileCache(cache_dir).usable():
        cache_dir = None  # warned once here, not once per worker
    (events or Events()).planned(stale, len(all_jobs) - len(stale))
    if steps is not None:
        ran = steps(project, stale, str(cache_dir) if cache_dir else None, events or Events())
    elif spec.executor == "ray":
        from .distributed import run_ray

        ran = run_ray(project, stale, jobs, spec.address, str(cache_dir) if cache_dir else None, events or Events())
    else:
        ran = _run_all(project, stale, jobs or os.cpu_count() or 1, str(cache_dir) if cache_dir else None, events)
    for o in ran:
        if o.ok:
            try:
                built[o.job] = _decode(o.job, o.kind, o.data)
            except KernelpackError as err:
                o = dataclasses.replace(o, ok=False, error=f"its output cannot be read back: {err.message}")
        outcomes[o.job] = o
        report.jobs[o.job] = o.status
        report.job_seconds[o.job] = round(o.seconds, 3)
    failed = [o for o in outcomes.values() if not o.ok]
    new_jobs = _save_jobs(state_dir, all_jobs, prints, outcomes, old)
    partial = {**state, "version": STATE_VERSION, "digest": None, "jobs": new_jobs}  # the previous outputs, kept
    if failed and (not keep_going or len(failed) == len(all_jobs)):
        st.write(state_dir, partial)
        lines = "\n".join(f"  {o.job}: {o.error}" for o in failed)
        raise BuildFailed(f"{len(failed)} of {len(all_jobs)} build step(s) failed:\n{lines}",
                          log="\n\n".join(f"== {o.job}\n{o.log}" for o in failed if o.log))
    if failed:  # keep going: link the rest; no digest, so the next build runs the failed steps again
        report.failed = {o.job: o.error for o in failed}
        all_jobs = [j for j in all_jobs if outcomes[j.id].ok]
        digest = ""

    stage = Stage(out_dir)
    try:
        with stage:  # outputs and state.json published together when the block ends
            _finish(project, stage, all_jobs, built, new_jobs, digest, state, force, report)
    except BaseException:
        if not stage.published:  # the link failed or was interrupted: keep the jobs that did compile
            st.write(state_dir, partial)
        raise
    report.seconds = time.perf_counter() - t0
    return report


def _finish(project: Project, stage: Stage, all_jobs: list[Job], built: dict[str, Built], new_jobs: dict[str, Any],
            digest: str, state: dict[str, Any], force: bool, report: BuildReport) -> None:
    """Merge the jobs' outputs, embed the tuning table, link, and stage the outputs with the new state."""
    dropped = [(j.frontend, *d) for j in all_jobs for d in new_jobs[j.id].get("dropped", ())]
    bundle, programs, status = _merge(all_jobs, built, report.jobs, dropped)
    bundle = _tuned(project, bundle)
    t_link = time.perf_counter()
    data = bundle.to_bytes()  # once: the bundle output and the library stamp both hash it
    stamp = _stamp(project, data, programs)
    outputs, report.linked = _write_outputs(project, stage, bundle, data, stamp, programs, state, force)
    report.link_seconds = round(time.perf_counter() - t_link, 3)
    report.outputs = {k: str(v) for k, v in outputs.items()}
    report.rows, row_keys = rows_reusing(bundle, project.library.archs, status, _previous_rows(state), dropped)
    report.rows += _host_rows(programs, project.library.archs)
    warn_shadowed(bundle, report.rows)
    stage.write(f"{STATE_DIR}/state.json", st.encode({
        "version": STATE_VERSION, "digest": digest, "jobs": new_jobs,
        "library_stamp": stamp, "row_keys": row_keys,
        "outputs": {str(p): _stat(stage.staged(p)) for p in outputs.values()}, "outputs_paths": report.outputs,
        "rows": [r.to_json() for r in report.rows],
    }))


def _previous_rows(state: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """The previous build's summary rows by kernel label, with their keys (report.row_key), for reuse."""
    keys = state.get("row_keys", {})
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for r in state.get("rows", []):  # the kernels' rows first, then the host programs' (which have no key)
        if r["kernel"] in keys:
            out.setdefault(r["kernel"], (keys[r["kernel"]], r))
    return out


def _load(where: str | os.PathLike[str] | None, out: str | os.PathLike[str] | None, *,
          import_includes: bool, outputs: tuple[str, ...] | None = None) -> Project:
    project = load_project(where, import_includes=import_includes)
    lib = project.library
    if out is not None:
        lib = dataclasses.replace(lib, out=Path(out).resolve())
    if outputs is not None:
        lib = dataclasses.replace(lib, outputs=tuple(outputs))
    return project if lib is project.library else dataclasses.replace(project, library=lib)


# ------------------------------------------------------------------------------------------------ digests


def project_files(project: Project) -> list[Path]:
    """Every file a build reads that can be found without importing the project's Python modules (what ``kernelpack
    build --watch`` watches)."""
    files: list[Path] = [project.path]
    for inc in project.includes:
        files += python_deps(inc, [project.root])
    for e in project.entries:
        files += static_files(e, project.root)
    tuning = tuning_path(project)
    if tuning is not None:
        files.append(tuning)
    return files


# what writes a library: another kernelpack, or one writing another host-program record format (same version or not),
# makes the project out of date (project_digest) and relinks it (_stamp)
WRITER = (__version__, host_manifest.FORMAT)


def project_digest(project: Project) -> str:
    """Everything a build reads that can be found without importing the project's Python modules."""
    files = project_files(project)
    frontends = sorted(FRONTENDS) if project.includes else sorted({e.frontend for e in project.entries})
    blob = {"files": digest_files(files), "versions": {f: FRONTENDS[f].versions() for f in frontends},
            "library": repr(project.library), "cc": config.knobs().cc, "state": STATE_VERSION, "writer": WRITER}
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()


def tuning_path(project: Project) -> Path | None:
    """``[library] tuning`` resolved against the project directory (None: no tuning table)."""
    t = project.library.tuning
    if t is None:
        return None
    return t if t.is_absolute() else project.root / t


def _tuned(project: Project, bundle: Bundle) -> Bundle:
    """The bundle with ``[library] tuning``'s table as shape-range rules (kernelpack.tuning)."""
    path = tuning_path(project)
    if path is None:
        return bundle
    from ..tuning.tune import TuningTable, embed

    return embed(bundle, TuningTable.read(path), source=f"[library] tuning {path}")


def _include_files(project: Project, job: Job) -> list[Path]:
    """Entries defined in Python modules: those modules (and what they import) are part of their settings."""
    if job.entry < project.n_static:
        return []
    return [f for inc in project.includes for f in python_deps(inc, [project.root])]


def _stamp(project: Project, bundle_bytes: bytes, programs: list[Any]) -> str:
    h = hashlib.sha256(bundle_bytes)
    for p in programs:
        h.update(p.to_bytes())
    lib = project.library
    h.update(json.dumps([lib.name, lib.version, list(lib.cflags), config.knobs().cc, WRITER]).encode())
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
    import concurrent.futures as cf  # here: a build that runs one step or none starts no pool (and imports none)
    import multiprocessing

    # at most `workers` jobs in flight, so "submitted" means "running" for the progress display
    ctx = multiprocessing.get_context("spawn")  # the DSLs are neither thread- nor fork-safe
    results: list[Outcome] = []
    queue = list(stale)
    pool = cf.ProcessPoolExecutor(max_workers=min(workers, len(stale)), mp_context=ctx, initializer=_worker_init)
    try:
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
    except BaseException:  # interrupted: stop the compilers now rather than wait for them
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            proc.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return results


def _decode(job_id: str, kind: str, data: bytes) -> Built:
    """A job's output bytes as a Bundle or HostProgram (BundleError if they are not one)."""
    if kind == "host":
        from ..bundle.host_program import HostProgram
        from ..bundle.merge import set_origin

        return set_origin(HostProgram.from_bytes(data, source=job_id), job_id)  # names the job when merged
    from ..bundle.kpack import Bundle

    return Bundle.from_bytes(data, source=job_id)


def _decode_saved(state_dir: Path, job_id: str, kind: str, sha256: str) -> Built | None:
    """The previous build's output of a job, or None when it is missing, is not the file the state describes (a
    build killed between writing it and its state), or is not readable (the job is rebuilt)."""
    from ..bundle.artifact import deferred_verification

    data = st.read_job(state_dir, job_id, kind)
    if data is None or hashlib.sha256(data).hexdigest() != sha256:
        return None
    try:
        with deferred_verification():  # the bytes its run verified (the hash says so): cubins parsed when needed
            return _decode(job_id, kind, data)
    except KernelpackError:
        return None


def _worker_init() -> None:
    """Workers leave Ctrl-C to the parent (it stops them), so an interrupt prints no worker tracebacks."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _merge(all_jobs: list[Job], built: dict[str, Built], statuses: dict[str, str],
           dropped: list[tuple[str, ...]]) -> tuple[Bundle, list[Any], dict[str, str]]:
    """The jobs' kernels as one bundle and their host programs, each kernel (program) built for several archs by
    several jobs merged into one (kernelpack.bundle.merge); a kernel's status is its last job's. ``dropped``: the
    configs the jobs left out for an arch, (frontend, kernel, config label, arch, reason): some other config of the
    family must carry that arch."""
    from ..bundle.kpack import Bundle
    from ..bundle.merge import merge_programs
    from ..bundle.pruned import check_pruned
    from ..core.errors import ConfigDropped
    from ..launch.family import check_families

    bundles, programs, status = [], [], {}
    for j in all_jobs:
        b = built[j.id]
        if isinstance(b, Bundle):
            bundles.append(b)
            status.update({a.label: statuses.get(j.id, "") for a in b})
        else:
            programs.append((b, j.id))
    try:
        bundle = Bundle.of(*bundles)
    except BundleError as err:
        raise BuildFailed(f"the build steps' kernels cannot share one library: {err.message}") from None
    try:  # families the C library and the runtime would refuse (ambiguous ranges...), whatever the outputs
        check_families(bundle.families())
        check_pruned(bundle, [ConfigDropped(*d[1:]) for d in dropped])
    except KernelpackError as err:
        raise BuildFailed(err.message) from None
    return bundle, merge_programs(programs), status


def _expected_outputs(project: Project) -> dict[str, Path]:
    """Every output path this project's build writes (the only paths a state file may name)."""
    lib = project.library
    out: dict[str, Path] = {}
    if "bundle" in lib.outputs:
        out["bundle"] = project.out / f"{lib.name}.kpack"
    if "library" in lib.outputs:
        out.update(expected_outputs(lib.name, project.out, []))
    return out


def _write_outputs(project: Project, stage: Stage, bundle: Bundle, data: bytes, stamp: str, programs: list[Any],
                   state: dict[str, Any], force: bool) -> tuple[dict[str, Path], bool]:
    """``data``: the bundle's bytes; ``stamp``: the library stamp (:func:`_stamp`)."""
    lib, out = project.library, project.out
    outputs: dict[str, Path] = {}
    if "bundle" in lib.outputs:
        path = out / f"{lib.name}.kpack"
        if force or not _holds(path, data):
            stage.write(path.name, data)
        outputs["bundle"] = path
    if "library" not in lib.outputs:
        return outputs, False
    from .link import link

    expected = expected_outputs(lib.name, out, programs)
    fresh = state.get("library_stamp") == stamp and all(
        state.get("outputs", {}).get(str(p)) == _stat(p) for p in expected.values())
    if fresh and not force:
        return {**outputs, **{k: v for k, v in expected.items() if v.exists()}}, False
    return {**outputs, **link(lib, stage, bundle, programs, data)}, True


def _holds(path: Path, data: bytes) -> bool:
    """Whether ``path`` is a regular file with exactly ``data`` (a link or a device is never read)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode) or os.path.getsize(path) != len(data):
            return False
        return path.read_bytes() == data
    except OSError:
        return False


# ------------------------------------------------------------------------------------------------ state


def _save_jobs(d: Path, all_jobs: list[Job], prints: dict[str, str], outcomes: dict[str, Outcome],
               old: dict[str, Any]) -> dict[str, Any]:
    """Write the outputs of the jobs that ran; the state's rows for every job that succeeded."""
    out: dict[str, Any] = {}
    for j in all_jobs:
        o = outcomes.get(j.id)
        if o is None or not o.ok:
            continue
        if o.data:  # ran now
            st.save_job(d, j.id, o.kind, o.data)
            sha = hashlib.sha256(o.data).hexdigest()
        else:  # reused: its file is already there
            sha = old[j.id]["sha256"]
        out[j.id] = {"fingerprint": prints[j.id], "kind": o.kind, "seconds": round(o.seconds, 3), "sha256": sha}
        if o.dropped:
            out[j.id]["dropped"] = [list(d) for d in o.dropped]
    return out


def _stat(p: Path) -> list[int] | None:
    try:
        st = p.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _outputs_intact(state: dict[str, Any], expected: set[str]) -> bool:
    """Every output this build writes is recorded and still has the size and mtime recorded."""
    outs = state.get("outputs")
    return isinstance(outs, dict) and set(outs) == expected and all(_stat(Path(p)) == s for p, s in outs.items())


def _host_rows(programs: list[Any], archs: tuple[str, ...]) -> list[Row]:
    """Rows of the kernels host programs launch. A program carries one object per arch and describes its kernels per
    arch where their parameter layouts differ: the archs a row misses are those the *program* has no object for."""
    from .report import row

    out = []
    for p in programs:
        have = {(o.arch.major, o.arch.minor) for o in p.objects}
        missing = [a for a in archs if (Arch.parse(a).major, Arch.parse(a).minor) not in have]
        for k in p.kernels:
            r = row(k, [str(b.arch) for b in k.binaries], "host program")
            r.kernel = f"{p.label} ({k.name})"
            if missing:
                r.warnings.append(f"not built for {', '.join(missing)}")
            out.append(r)
    return out
