"""``kernelpack build --executor ray``: each compile step runs as a Ray task.

No shared filesystem is assumed: the driver sends the project's files (the project file, every file its entries read,
the Python modules it includes) once as bytes (``ray.put``); a task writes them into a private directory of its
worker (one per snapshot, reused by that worker's later tasks), runs the step there with :func:`.jobs.execute` and
returns the :class:`.jobs.Outcome` (its output as bytes) with the digest of the files it compiled from, which the
driver compares with its snapshot's. The worker's directory is made with ``mkdtemp`` inside
``$TMPDIR/kernelpack-ray-<uid>`` when that is the user's private directory (checked with ``lstat``: not a link, the
user's, writable by nobody else), else beside it: files planted in a shared temp directory are never compiled. The
driver writes the state, the bundle and the library exactly as a local build does (:mod:`.runner`).

A worker lost mid-step (its process or node died) is retried by Ray (``max_retries``, system failures only); a step
that fails to compile comes back as a failed Outcome, is not retried, and is reported as a local failure is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import trust
from ..core.deps import python_deps
from ..core.errors import KernelpackError
from ..frontends.refs import rename_code
from .jobs import Job, Outcome, execute, static_files
from .model import Project

MAX_RETRIES = 3  # a step whose worker dies is run again up to this many times
CONNECT_TIMEOUT_S = 5.0  # an --address that does not answer within this is an error, not a hang
__all__ = ["MAX_RETRIES", "RayUnavailable", "Snapshot", "run_ray", "snapshot", "verified"]


class RayUnavailable(KernelpackError):
    """Ray is not installed, or the cluster at the given address cannot be reached."""


@dataclass(frozen=True)
class Snapshot:
    """A project's files as bytes, by path relative to ``base`` (the common directory of them all)."""

    project: str  # the project file, relative
    files: tuple[tuple[str, bytes], ...]
    digest: str
    origin: str  # ``base`` on the driver: errors name the user's files, not the worker's copies


def snapshot(project: Project) -> Snapshot:
    """Everything a step of ``project`` reads (what its fingerprints hash), as bytes."""
    paths: set[Path] = {project.path.resolve()}
    for inc in project.includes:
        paths.update(p.resolve() for p in python_deps(inc, [project.root]))
    for e in project.entries:
        paths.update(p.resolve() for p in static_files(e, project.root))
    paths = {p for p in paths if p.is_file()}
    base = Path(os.path.commonpath([str(p.parent) for p in paths]))
    files = tuple(sorted((str(p.relative_to(base)), p.read_bytes()) for p in paths))
    return Snapshot(str(project.path.resolve().relative_to(base)), files, _digest(files), str(base))


# ------------------------------------------------------------------------------------------------ the worker side

_OWN: dict[int, Path] = {}  # this worker process's directory, by pid (a forked child makes its own)
_WORKER_DIR = re.compile(r"(\d+)(?:-\w+)?")  # "<pid>-<mkdtemp suffix>" (and "<pid>", an older kernelpack's)


def _home() -> Path | None:
    """``kernelpack-ray-<uid>`` in the temp directory when it is this user's private directory (made here when absent);
    None, warned once, when something else is there: a link, a file, another user's, one others can write."""
    home = Path(tempfile.gettempdir()) / f"kernelpack-ray-{trust.uid()}"
    try:
        os.mkdir(home, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(home)
    why = trust.problem(st) or (None if stat.S_ISDIR(st.st_mode) else "not a directory")
    if why is None:
        return home
    trust.warn_once(f"ray-home:{home}:{why}", f"kernelpack: not using {home}: it is {why}; this Ray worker writes the "
                                              f"project's files into a new private directory beside it instead")
    return None


def _own_dir() -> Path:
    """This worker process's directory: made with mkdtemp (mode 0700 under a fresh name, so nothing was planted in it
    before), in the private home when there is one (where what dead workers left is swept), else in the temp
    directory itself."""
    pid = os.getpid()
    got = _OWN.get(pid)
    if got is not None and got.is_dir():
        return got
    home = _home()
    if home is None:
        got = Path(tempfile.mkdtemp(prefix=f"kernelpack-ray-{trust.uid()}-{pid}-"))
    else:
        got = Path(tempfile.mkdtemp(prefix=f"{pid}-", dir=home))
        _sweep(home, got.name)
    _OWN[pid] = got
    return got


def _sweep(home: Path, mine: str) -> None:
    """Remove the directories that this user's workers which are gone left in the private home; never through a link
    (a link there is left alone), never anything but a worker's directory."""
    with os.scandir(home) as entries:
        for d in entries:
            m = _WORKER_DIR.fullmatch(d.name)
            if m and d.name != mine and d.is_dir(follow_symlinks=False) and not _alive(int(m.group(1))):
                shutil.rmtree(d.path, ignore_errors=True)  # fd-based on Linux: links inside are not followed


def _workdir(snap: Snapshot) -> tuple[Path, str]:
    """The snapshot's files in this worker's own directory (written once per snapshot; older snapshots removed), and
    the digest of those files as read back from there: what the step compiles, for the driver to compare."""
    mine = _own_dir()
    root = mine / snap.digest
    if not (root / ".complete").is_file():
        with os.scandir(mine) as entries:
            for d in entries:
                if d.is_dir(follow_symlinks=False):
                    shutil.rmtree(d.path, ignore_errors=True)
                else:
                    os.unlink(d.path)
        for name, data in snap.files:
            f = root / name
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(data)
        (root / ".complete").write_bytes(b"")
    return root, _digest((name, (root / name).read_bytes()) for name, _ in snap.files)


def _digest(files: Iterable[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for name, data in files:
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def remote_step(snap: Snapshot, job_id: str, cache_dir: str | None) -> Outcome:
    """A Ray task: one step of the snapshot's project, compiled in this worker (``cache_dir``: this node's compile
    cache, the driver's path; None: the node's configured one). The Outcome carries the digest of the files compiled
    from (``inputs``)."""
    try:
        root, inputs = _workdir(snap)
    except OSError as err:
        return Outcome(job_id, False, error=f"the worker cannot write the project's files: {err}")
    rename_code(str(root), snap.origin)  # kernels' code carries the driver's paths, as in a local build
    o = dataclasses.replace(execute(str(root / snap.project), job_id, cache_dir), inputs=inputs)
    if o.ok:
        return o
    return dataclasses.replace(o, error=o.error.replace(str(root), snap.origin),
                               log=o.log.replace(str(root), snap.origin))


# ------------------------------------------------------------------------------------------------ the driver side


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise RayUnavailable(f"--executor ray needs Ray, which is not importable here ({err}); install it with "
                             f"pip install 'kernelpack[ray]'") from None
    return ray


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """RayUnavailable naming ``address`` when nothing accepts a connection there within ``timeout`` seconds."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise RayUnavailable(f"Ray address {address!r}: expected HOST:PORT (or ray://HOST:PORT, or auto)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as err:
        raise RayUnavailable(f"cannot reach the Ray cluster at {address!r} (no answer within {timeout:g} s: "
                             f"{err}); start one with `ray start --head` or check --address") from None


@contextmanager
def connected(address: str | None, jobs: int | None) -> Iterator[Any]:
    """Ray, connected: to the process's existing connection, to ``address``, or to a local instance of ``jobs`` CPUs
    (default: this machine's cores) that is shut down at the end."""
    ray = _import_ray()
    if ray.is_initialized():
        yield ray
        return
    if address is not None:
        check_reachable(address)
        try:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        except Exception as err:  # ConnectionError, RuntimeError, ...: Ray's own words, with the address
            raise RayUnavailable(f"cannot connect to the Ray cluster at {address!r}: {type(err).__name__}: "
                                 f"{err}") from None
    else:
        ray.init(address="local", num_cpus=jobs or os.cpu_count() or 1, include_dashboard=False,
                 logging_level=logging.WARNING, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def verified(o: Outcome, snap: Snapshot) -> Outcome:
    """``o`` when its worker compiled from the files the driver sent (its ``inputs`` digest is the snapshot's), or
    when it failed anyway; else a failed Outcome naming the job and both digests, whose output is not used."""
    if not o.ok or o.inputs == snap.digest:
        return o
    return Outcome(o.job, False, seconds=o.seconds,
                   error=f"{o.job}: the Ray worker compiled from project files of digest {o.inputs or '(none given)'}, "
                         f"not from those the driver sent (digest {snap.digest}); its output is not used (the "
                         f"worker's copy of the files changed, or the worker runs other kernelpack code)")


def run_ray(project: Project, stale: list[Job], jobs: int | None, address: str | None, cache_dir: str | None,
            events: Any) -> list[Outcome]:
    """Run ``stale`` as Ray tasks; their Outcomes in completion order (``events``: :class:`.runner.Events`)."""
    if not stale:
        return []
    snap = snapshot(project)
    with connected(address, jobs) as ray:
        step = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(remote_step)
        ref = ray.put(snap)
        # at most as many in flight as there are CPUs, so "started" means "running" for the progress display
        capacity = jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
        queue, results = list(stale), []
        running: dict[Any, Job] = {}  # ObjectRef -> its job
        try:
            while queue or running:
                while queue and len(running) < capacity:
                    j = queue.pop(0)
                    events.start(j)
                    running[step.remote(ref, j.id, cache_dir)] = j
                done, _ = ray.wait(list(running), num_returns=1)
                for r in done:
                    j = running.pop(r)
                    try:
                        o = ray.get(r)
                    except ray.exceptions.RayError as err:  # the worker died MAX_RETRIES + 1 times, or Ray failed
                        o = Outcome(j.id, False, error=f"its Ray task failed (after up to {MAX_RETRIES} retries "
                                                       f"for lost workers): {type(err).__name__}: "
                                                       f"{str(err).splitlines()[0] if str(err) else ''}",
                                    log=str(err))
                    o = verified(o, snap)
                    events.done(j, o)
                    results.append(o)
        except BaseException:  # interrupted: stop the tasks rather than leave them running on the cluster
            for r in running:
                ray.cancel(r, force=True)
            raise
    return results
