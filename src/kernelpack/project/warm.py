"""Warm workers for ``kernelpack build --watch``: worker processes kept between builds, so that what the project's
kernel modules import (torch, the DSLs) is imported once, not by every build.

Each step goes to the worker that ran it last when that one is free (it has the step's modules imported), else to
any free worker. Before each step a worker forgets the project's own modules -- those under the project directory,
outside any site-packages -- and the project file it loaded when any of their files changed since it last ran a step
(and drops their bytecode, so an edit of the same size within the file system's clock tick is read again): a changed
module is always executed again, never served stale; third-party modules stay. A file whose modification time is not
clearly older than the step that read it (:data:`SETTLE_NS`) counts as changed at the next step: an edit made while
a step ran is never taken for what the step read. The parent process does the same before each build
(:func:`refresh`): it reads Python projects and entries too.

While no build runs, the workers warm up (:meth:`WarmWorkers.warm`): each step of the project runs once, served by
the compile cache, in the worker that will run it, so the first edit after ``--watch`` starts finds its modules
imported too.
"""

from __future__ import annotations

import importlib
import importlib.util
import multiprocessing
import os
import sys
import time
import traceback
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from .jobs import Job, Outcome

_SEEN: dict[str, tuple[int, int]] = {}  # a project module's file -> (mtime_ns, size) when this process last looked
SETTLE_NS = 1_000_000_000  # a file modified less than this before a step began may have changed while it read it
_UNKNOWN = (-2, -2)  # never a stat (a missing file is (-1, -1))


def _local_modules(root: Path) -> dict[str, str]:
    """The modules of this process whose files lie under ``root`` (outside any site-packages and kernelpack): name ->
    file."""
    out = {}
    own = Path(__file__).resolve().parent.parent  # kernelpack's own modules stay, wherever the project lies
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if not isinstance(f, str) or "site-packages" in f or "dist-packages" in f:
            continue
        try:
            p = Path(f).resolve()
        except OSError:
            continue
        if p.is_relative_to(root) and not p.is_relative_to(own):
            out[name] = str(p)
    return out


def _stat(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return st.st_mtime_ns, st.st_size


def refresh(root: Path, extra: tuple[str, ...] = ()) -> bool:
    """Forget every module of the project (under ``root``) when one of their files -- or one of ``extra`` (the
    project file) -- changed since :func:`remember`; True when they were forgotten. Their bytecode goes too (a file
    rewritten within its clock tick at the same size would otherwise be read from it)."""
    from ..frontends import refs
    from . import jobs

    local = _local_modules(root.resolve())
    changed = any(_stat(f) != _SEEN.get(f) for f in [*local.values(), *extra])
    if changed:
        for name, f in local.items():
            sys.modules.pop(name, None)
            refs._IMPORTED.pop(name, None)
            try:
                cached = importlib.util.cache_from_source(f)
                os.unlink(cached)
            except (OSError, ValueError, NotImplementedError):
                pass
        jobs._LOADED.clear()
        importlib.invalidate_caches()
    return changed


def remember(root: Path, began_ns: int, extra: tuple[str, ...] = ()) -> None:
    """What the project's modules (and ``extra``) are now, for the next :func:`refresh`. ``began_ns``: when the work
    that read them began (``time.time_ns()``); a file modified since, or just before, is recorded as unknown (changed
    at the next refresh): it may have been edited after it was read."""
    _SEEN.clear()
    for f in [*_local_modules(root.resolve()).values(), *extra]:
        st = _stat(f)
        _SEEN[f] = st if st[0] < began_ns - SETTLE_NS else _UNKNOWN


def _serve(conn: Connection) -> None:
    """A worker: run each step it is sent (``(project file, job id, cache dir, root)``) and send its Outcome back;
    None stops it."""
    import signal

    from .jobs import execute

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops the workers
    sys.dont_write_bytecode = True  # the project's modules change under it
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        project_file, job_id, cache_dir, root = msg
        try:
            began = time.time_ns()
            refresh(Path(root), (project_file,))
            out = execute(project_file, job_id, cache_dir)
            remember(Path(root), began, (project_file,))
        except Exception as err:  # noqa: BLE001 - reported as the step's failure
            out = Outcome(job_id, False, error=f"{type(err).__name__}: {err}", log=traceback.format_exc())
        conn.send(out)


def _start() -> tuple[Connection, Any]:
    """A worker process and the parent's end of its pipe. The worker is started with SIGINT ignored -- a disposition
    its new interpreter keeps -- so a Ctrl-C while it is still importing kernelpack neither kills it nor prints its
    traceback: Ctrl-C is the parent's, which stops the workers."""
    import signal

    ctx = multiprocessing.get_context("spawn")  # the DSLs are neither thread- nor fork-safe
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child,), daemon=True)
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: the worker starts as the caller's signals are
        proc.start()
    else:
        try:
            proc.start()
        finally:
            signal.signal(signal.SIGINT, previous)
    child.close()
    return parent, proc


class WarmWorkers:
    """``workers`` processes that run build steps and stay (``with WarmWorkers(2) as w: build(..., steps=w)``)."""

    def __init__(self, workers: int) -> None:
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        for _ in range(max(1, workers)):
            parent, proc = _start()
            self.conns.append(parent)
            self.procs.append(proc)
        self.busy: dict[int, str | None] = {}  # worker -> the job it runs (None: a warm-up, whose outcome is dropped)
        self.home: dict[str, int] = {}  # job id -> the worker that ran it last
        self.pending: list[tuple[str, str, str | None, str]] = []  # warm-ups not sent yet

    def __enter__(self) -> WarmWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for c in self.conns:
            try:
                c.send(None)
            except OSError:
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
                p.join()
        for c in self.conns:
            c.close()

    def _free(self, preferred: int | None) -> int | None:
        if preferred is not None and preferred not in self.busy:
            return preferred
        return next((w for w in range(len(self.conns)) if w not in self.busy), None)

    def _send(self, w: int, job_id: str | None, msg: tuple[str, str, str | None, str]) -> None:
        self.busy[w] = job_id
        self.conns[w].send(msg)
        if job_id is not None:
            self.home[job_id] = w

    def _collect(self, timeout: float | None) -> list[tuple[int, Outcome]]:
        """The outcomes that arrive within ``timeout`` (None: wait for one)."""
        ready = wait([self.conns[w] for w in self.busy], timeout)
        out = []
        for conn in ready:
            w = self.conns.index(conn)  # type: ignore[arg-type]
            try:
                o: Outcome = conn.recv()  # type: ignore[union-attr, assignment, call-arg]
            except EOFError:  # the worker died (a crash in a compiler): a fresh one takes its place
                o = Outcome(self.busy[w] or "", False, error="worker process died")
                self._replace(w)
            job = self.busy.pop(w)
            if job is not None:
                out.append((w, o))
        return out

    def _replace(self, w: int) -> None:
        self.conns[w], self.procs[w] = _start()

    def __call__(self, project: Any, stale: list[Job], cache_dir: str | None, events: Any) -> list[Outcome]:
        """Run ``stale`` (the runner's StepRunner): each on its last worker when free, else on any free one."""
        msg = (str(project.path), "", cache_dir, str(project.root))
        ids = {j.id for j in stale}
        self.pending = [m for m in self.pending if m[1] not in ids]  # the build runs them
        queue = list(stale)
        results: list[Outcome] = []
        while queue or any(j is not None for j in self.busy.values()):
            while queue:
                j = queue[0]
                w = self._free(self.home.get(j.id))
                if w is None:
                    break
                queue.pop(0)
                events.start(j)
                self._send(w, j.id, (msg[0], j.id, msg[2], msg[3]))
            for _, o in self._collect(None):
                job = next(j for j in stale if j.id == o.job)
                events.done(job, o)
                results.append(o)
        return results

    def warm(self, project: Any, jobs: list[Job], cache_dir: str | None) -> int:
        """Queue one run of each step (served by the compile cache) on the worker that will run it, so its modules are
        imported before an edit needs them; :meth:`pump` sends them while no build runs. Returns how many."""
        fresh = [j for j in jobs if j.id not in self.home]  # a step a worker ran has its modules imported there
        for i, j in enumerate(fresh):
            self.home[j.id] = i % len(self.conns)
            self.pending.append((str(project.path), j.id, cache_dir, str(project.root)))
        return len(fresh)

    def idle(self) -> bool:
        """No step and no warm-up running or queued."""
        return not self.busy and not self.pending

    def pump(self, timeout: float) -> None:
        """Send queued warm-ups to their free workers and take finished ones back, waiting up to ``timeout``."""
        keep = []
        for msg in self.pending:
            w = self.home.get(msg[1], 0)
            if w in self.busy:
                keep.append(msg)
                continue
            self.busy[w] = None
            self.conns[w].send(msg)
        self.pending = keep
        if self.busy:
            self._collect(timeout)
        elif timeout > 0:
            import time

            time.sleep(timeout)
