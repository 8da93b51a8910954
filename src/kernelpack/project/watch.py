"""``kernelpack build --watch``: build, then build again whenever a file the project reads changes, with warm workers
(kernelpack.project.warm) -- an edit of one kernel recompiles that kernel and relinks, without importing what its
module imports (torch, a DSL) again.

The files are those a build reads that can be found without importing the project (``runner.project_files``: the
project file, the sources, the Python modules they import, ``depends``, the tuning table), looked at every
``poll`` seconds (their size and modification time); a change is built once the files have been still for one more
look. A failed build is reported and the watch goes on; Ctrl-C stops it (exit status 0).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ..core.errors import KernelpackError

POLL_S = 0.1


def _snapshot(files: list[Path]) -> dict[Path, tuple[int, int]]:
    out = {}
    for f in files:
        try:
            st = f.stat()
            out[f] = (st.st_mtime_ns, st.st_size)
        except OSError:
            out[f] = (-1, -1)
    return out


def run_watch(project: str | None, *, jobs: int | None, force: bool, quiet: bool, as_json: bool, out: str | None,
              tuning: str | None, verbose: bool, make_console: Any, poll: float = POLL_S) -> int:
    """Build, then rebuild on every change until interrupted. ``as_json``: one build report per line on stdout."""
    import signal

    workers = jobs or os.cpu_count() or 1
    console = make_console()
    previous = signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops it as Ctrl-C does: the workers closed
    try:
        return _watch(project, workers, force, as_json, out, tuning, verbose, console, poll)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _watch(project: str | None, workers: int, force: bool, as_json: bool, out: str | None, tuning: str | None,
           verbose: bool, console: Any, poll: float) -> int:
    from .model import load_project
    from .runner import project_files
    from .warm import WarmWorkers, refresh, remember

    static = load_project(project, import_includes=False, check_files=False)
    root = static.root
    with WarmWorkers(workers) as warm:
        files = project_files(static)
        seen = _snapshot(files)  # taken before the build: an edit made while it runs is built after it
        began = time.time_ns()
        _once(project, warm, force, out, tuning, as_json, verbose, console, full=True)
        remember(root, began)
        t_warm = time.perf_counter()
        n_warm = _warm_up(project, warm, out, tuning)
        console.print(f"[dim]watching {len(files)} file(s) of {static.path.name} with {workers} warm worker(s); "
                      f"Ctrl-C stops[/]", highlight=False)
        try:
            while True:
                warm.pump(poll)
                if n_warm >= 0 and warm.idle():  # said once: the first edit from now on finds every step warm
                    console.print(f"[dim]ready: {n_warm} step(s) warmed up in {time.perf_counter() - t_warm:.1f} s[/]",
                                  highlight=False)
                    n_warm = -1
                now = _snapshot(files)
                if now == seen:
                    continue
                while True:  # the edit is done once the files are still for one more look
                    time.sleep(poll / 2)
                    again = _snapshot(files)
                    if again == now:
                        break
                    now = again
                began = time.time_ns()
                refresh(root)
                _once(project, warm, False, out, tuning, as_json, verbose, console, full=False)
                remember(root, began)
                try:
                    files = project_files(load_project(project, import_includes=False, check_files=False))
                except KernelpackError:
                    pass  # the project file is broken: _once said so; keep watching what was read before
                seen = {f: now.get(f) or _snapshot([f])[f] for f in files}  # what this build read
        except KeyboardInterrupt:
            console.print("[dim]stopped watching[/]", highlight=False)
            return 0


def _once(project: str | None, warm: Any, force: bool, out: str | None, tuning: str | None, as_json: bool,
          verbose: bool, console: Any, *, full: bool) -> None:
    """One build on the warm workers; its error is printed, not raised (the watch goes on)."""
    from .runner import build
    from .ui import Display, summarize

    try:
        with Display(console) as display:
            report = build(project, force=force, out=out, events=display, tuning=tuning, steps=warm)
    except KernelpackError as e:
        if as_json:
            print(json.dumps({"error": {"status": 1, "kind": "failed", "type": type(e).__name__,
                                        "message": e.message, "log": e.log}}), flush=True)
        print(f"kernelpack: error: {e.message}", file=sys.stderr, flush=True)
        if e.log:
            print(f"--- log ---\n{e.log.rstrip()}", file=sys.stderr, flush=True)
        return
    if as_json:
        print(json.dumps(report.to_json(), sort_keys=True), flush=True)
    elif full or verbose:
        summarize(report, console, verbose=verbose)
    else:
        summarize_line(report, console)


def summarize_line(report: Any, console: Any) -> None:
    """What a rebuild did, in one line (the table is the first build's, or -v's)."""
    from rich.markup import escape

    if report.up_to_date:
        console.print(f"[green]up to date[/] ({report.seconds:.2f} s)", highlight=False)
        return
    parts = [f"{report.count(s)} {s}" for s in ("compiled", "cached") if report.count(s)]
    link = f"library linked in {report.link_seconds:.2f} s" if report.linked else "library unchanged"
    warned = [f"{r.kernel}: {w}" for r in report.rows if r.status in ("compiled", "cached") for w in r.warnings]
    console.print(f"[green]rebuilt[/] {', '.join(parts) or 'nothing'}; {link}; {report.seconds:.2f} s in all",
                  highlight=False)
    for w in warned:
        console.print(f"[yellow]warning[/]: {escape(w)}")


def _warm_up(project: str | None, warm: Any, out: str | None, tuning: str | None) -> int:
    """Queue a run of every step on its worker (served by the compile cache), so the first edit finds its modules
    imported (kernelpack.project.warm); returns how many were queued."""
    from ..core import config
    from .jobs import plan
    from .model import load_project

    try:
        static = load_project(project, import_includes=False, check_files=False)
        jobs = plan(static)
    except KernelpackError:
        return 0
    cache = config.knobs().cache_dir
    return warm.warm(static, [j for j in jobs if j.entry < static.n_static], str(cache) if cache else None)
