"""Output directories: checked before any work, written through a staging folder, published as one set.

A build writes nothing where users look until every output exists. It stages them under
``OUT/.kernelpack-staging-XXXX/new/`` (same file system as their destinations, mirroring their final paths), then
publishes:

1. the previous file of each destination is hard-linked into ``.../old/`` (for a rollback);
2. the journal ``OUT/.kernelpack-publish.json`` (the staging folder and the list of files) is written atomically —
   the commit point: before it exists nothing was replaced, after it the staged set is complete;
3. each staged file is renamed onto its destination (``os.replace``), then the journal and the staging folder are
   removed.

SIGINT/SIGTERM/SIGHUP arriving during steps 1-3 are held until the set is published. A process killed outright
(SIGKILL, power loss) inside step 3 leaves a journal: the next build of that directory (:func:`recover`, run by
:func:`output_dir`) rolls it forward — the new files are all there — before it reads anything. A rename that fails
(a destination folder not writable) rolls the replaced files back from ``old/``, under a "back" journal that the
next build finishes the same way if that is interrupted. Staging folders without a journal
are leftovers of killed builds and are removed. One build at a time per directory (``flock`` on the directory).

Users see the usual layout with plain files (``include/``, ``lib/``, ``NAME.kpack``): several libraries can share one
prefix, and copying a folder out of it copies files, not links.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import KernelpackError

STAGING_PREFIX = ".kernelpack-staging-"
JOURNAL = ".kernelpack-publish.json"
_STAGING_NAME = re.compile(r"\.kernelpack-staging-[A-Za-z0-9_]{1,64}")
_HELD_SIGNALS = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None)


class PublishError(KernelpackError):
    """Outputs could not be written where they go (the previous outputs are left as they were)."""


def check_out_dir(path: str | os.PathLike[str], what: str = "output directory") -> Path:
    """``path`` as an output directory: an existing directory, or a path whose first existing ancestor is one.
    A file, a device such as /dev/null, or a path through a file is refused before any work is done."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise PublishError(f"{what} must be a path (got {type(path).__name__} {path!r:.80})")
    p = Path(path)
    if "\0" in str(p) or not str(p):
        raise PublishError(f"{what} {str(p)!r:.80} is not a valid path")
    for q in (p, *p.absolute().parents):
        try:
            st = q.stat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as e:
            raise PublishError(f"{what} {p}: cannot use {q}: {e.strerror}") from None
        if not stat.S_ISDIR(st.st_mode):
            kind = "a file" if stat.S_ISREG(st.st_mode) else "not a directory (a device, socket or pipe)"
            where = f"{p} is {kind}" if q == p else f"{p} lies under {q}, which is {kind}"
            raise PublishError(f"{what}: {where}; give a directory")
        return p
    return p


# ------------------------------------------------------------------------------------------------ locking

_LOCK = threading.Lock()
_HELD: dict[str, tuple[threading.RLock, list[int]]] = {}  # realpath -> (in-process lock, [depth, fd])


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """One build at a time in ``out`` (which exists): an flock on the directory, re-entrant within a process."""
    key = os.path.realpath(out)
    with _LOCK:
        rlock, held = _HELD.setdefault(key, (threading.RLock(), [0, -1]))
    with rlock:
        if held[0] == 0:
            held[1] = _flock(key)
        held[0] += 1
        try:
            yield
        finally:
            held[0] -= 1
            if held[0] == 0 and held[1] >= 0:
                os.close(held[1])  # releases the flock
                held[1] = -1


def _flock(path: str) -> int:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return -1
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:  # a file system without flock: go on unlocked
        os.close(fd)
        return -1
    return fd


@contextlib.contextmanager
def output_dir(path: str | os.PathLike[str], what: str = "output directory") -> Iterator[Path]:
    """Check and create ``path``, hold its lock, finish or clear what a killed build left there; yields the
    directory."""
    out = check_out_dir(path, what)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PublishError(f"cannot create {what} {out}: {e.strerror}") from None
    with locked(out):
        recover(out)
        yield out


# ------------------------------------------------------------------------------------------------ staging


class Stage:
    """Outputs being written for ``out``: ``path(rel)`` is where ``out/rel`` is staged; ``work`` is a scratch folder
    that goes away with the stage. As a context manager: published when the block ends normally, discarded when
    it raises (or is interrupted)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        try:
            self.dir = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=os.path.abspath(out)))
        except OSError as e:
            raise PublishError(f"cannot write into output directory {out}: {e.strerror}") from None
        self.published = False  # True once every staged file is in place (even if a held signal is raised after)
        self.new = self.dir / "new"
        self.work = self.dir / "work"
        self.new.mkdir()
        self.work.mkdir()

    def __enter__(self) -> Stage:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()

    def path(self, rel: str) -> Path:
        """The staged file for ``out/rel`` (its folder created)."""
        p = self.new / _check_rel(rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def write(self, rel: str, data: bytes | str) -> Path:
        p = self.path(rel)
        if isinstance(data, str):
            p.write_text(data)
        else:
            p.write_bytes(data)
        return self.out / rel

    def staged(self, final: Path) -> Path:
        """Where ``final`` (a path under ``out``) is now: its staged file if there is one, else itself."""
        try:
            rel = final.relative_to(self.out)
        except ValueError:
            return final
        p = self.new / rel
        return p if p.is_file() else final

    def files(self) -> list[str]:
        return sorted(str(p.relative_to(self.new)) for p in self.new.rglob("*") if p.is_file() or p.is_symlink())

    def discard(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def commit(self) -> None:
        """Publish every staged file (see the module docstring); the stage is gone afterwards."""
        files = self.files()
        with _signals_held():  # a held SIGTERM ends the process only after the stage is cleared too
            try:
                if files:
                    self._preflight(files)
                    self._publish(files)
                self.published = True
            finally:
                self.discard()

    def _preflight(self, files: list[str]) -> None:
        for d in sorted({(self.out / rel).parent for rel in files}):
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise PublishError(f"cannot create {d}: {e.strerror}; the previous outputs are untouched") from None
            if not os.access(d, os.W_OK | os.X_OK):
                raise PublishError(f"cannot write into {d}: permission denied; the previous outputs are untouched")
        for rel in files:
            dest = self.out / rel
            if dest.is_dir() and not dest.is_symlink():
                raise PublishError(f"cannot replace {dest}: it is a directory; the previous outputs are untouched")
            for p in (self.new / rel, self.dir / "old" / rel):
                p.parent.mkdir(parents=True, exist_ok=True)
            with open(self.new / rel, "rb") as f:
                os.fsync(f.fileno())  # the content is on disk before the journal says it is complete

    def _publish(self, files: list[str]) -> None:
        old = self.dir / "old"
        had = set()
        for rel in files:
            dest = self.out / rel
            if os.path.lexists(dest):
                try:
                    os.link(dest, old / rel, follow_symlinks=False)
                except OSError:
                    shutil.copy2(dest, old / rel, follow_symlinks=False)
                had.add(rel)
        _write_journal(self.out, {"staging": self.dir.name, "direction": "forward", "files": files})
        done: list[str] = []
        try:
            for rel in files:
                os.replace(self.new / rel, self.out / rel)
                done.append(rel)
        except OSError as e:
            # roll back, journaled too: a kill in the middle is finished backwards by the next build
            _write_journal(self.out, {"staging": self.dir.name, "direction": "back", "files": done,
                                      "had": sorted(had & set(done))})
            _roll(self.out, self.dir, "back", done, had)
            (self.out / JOURNAL).unlink(missing_ok=True)
            raise PublishError(f"cannot publish {self.out / files[len(done)]}: {e.strerror}; the previous outputs "
                               f"were restored") from None
        (self.out / JOURNAL).unlink()
        self.published = True


def _check_rel(rel: str) -> str:
    parts = rel.split("/")
    if not rel or rel.startswith("/") or "\0" in rel or "\\" in rel or any(p in ("", ".", "..") for p in parts):
        raise PublishError(f"not a relative output path: {rel!r}")
    return rel


def _write_journal(out: Path, doc: dict[str, Any]) -> None:
    tmp = out / (JOURNAL + ".tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out / JOURNAL)
    with contextlib.suppress(OSError):
        fd = os.open(out, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Signals that would stop the process are recorded, then delivered once the block is done (main thread only:
    elsewhere Python delivers no signals to this code)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {}
    for s in _HELD_SIGNALS:
        try:
            previous[s] = signal.signal(s, lambda n, _f: pending.append(n))
        except (ValueError, OSError):  # pragma: no cover - not installable here
            pass
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)  # None: a handler installed outside Python
        for s in dict.fromkeys(pending):
            signal.raise_signal(s)


# ------------------------------------------------------------------------------------------------ recovery


def recover(out: Path) -> None:
    """Finish a publish that was killed after its commit point (roll forward), and remove staging folders and
    journals that a killed build left. Call with the directory's lock held (:func:`output_dir` does)."""
    journal = out / JOURNAL
    if os.path.lexists(journal):
        doc = _read_journal(journal)
        if doc is not None:
            _roll_forward(out, doc)
        journal.unlink(missing_ok=True)
    (out / (JOURNAL + ".tmp")).unlink(missing_ok=True)
    try:
        leftovers = [p for p in out.iterdir() if p.name.startswith(STAGING_PREFIX)]
    except OSError:
        return
    for p in leftovers:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def _read_journal(path: Path) -> dict[str, Any] | None:
    """The journal if it is one this module wrote (else None: it is ignored and removed)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode) or os.path.getsize(path) > 1 << 20:
            return None
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("staging"), str) or doc.get("direction") not in (
            "forward", "back"):
        return None
    files, had = doc.get("files"), doc.get("had", [])
    if not _STAGING_NAME.fullmatch(doc["staging"]) or not isinstance(files, list) or not isinstance(had, list):
        return None
    if not all(isinstance(f, str) for f in files + had) or not set(had) <= set(files):
        return None
    try:
        for f in files:
            _check_rel(f)
    except PublishError:
        return None
    return doc


def _roll_forward(out: Path, doc: dict[str, Any]) -> None:
    stage = out / doc["staging"]
    if not stage.is_dir() or stage.is_symlink():
        return
    _roll(out, stage, doc["direction"], doc["files"], set(doc.get("had", [])))


def _roll(out: Path, stage: Path, direction: str, files: list[str], had: set[str]) -> None:
    """Put the staged files in place ("forward"), or the previous ones back ("back"; a file that had none is
    removed). Idempotent: a file already moved is skipped, so a kill in the middle is finished by running it again."""
    source = stage / ("new" if direction == "forward" else "old")
    root, top = os.path.realpath(out), os.path.realpath(source)
    for rel in files if direction == "forward" else reversed(files):
        src, dest = source / rel, out / rel
        if not _inside(os.path.dirname(dest), root) or not _inside(os.path.dirname(src), top):
            continue  # a folder on the way is a link out of the tree: not something this module wrote
        try:
            if os.path.lexists(src):
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dest)
            elif direction == "back" and rel not in had:
                dest.unlink(missing_ok=True)
        except OSError as e:
            raise PublishError(f"{out}: cannot finish the interrupted publish of {dest}: {e.strerror}") from None


def _inside(path: str, root: str) -> bool:
    real = os.path.realpath(path)
    return real == root or real.startswith(root + os.sep)
