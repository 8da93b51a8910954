"""The terminal side of ``kernelpack build``: a live progress display with one line per running job, a line per
finished job, and the summary table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .jobs import Job, Outcome
from .report import render
from .runner import BuildReport, Events, build

_STYLE = {"compiled": "green", "cached": "cyan", "failed": "bold red"}


class Display(Events):
    """Receives the runner's events and draws them with rich (plain lines when the output is not a terminal)."""

    def __init__(self, console: Any = None, make: Callable[[], Any] | None = None) -> None:
        self._console = console
        self._make = make  # makes the console on first use when none is given (a no-op --json build draws nothing)
        self.progress: Any = None  # the live display, started when the first step runs (a no-op build draws none)
        self.overall: Any = None
        self.total: int | None = None
        self.tasks: dict[str, Any] = {}

    @property
    def console(self) -> Any:
        if self._console is None:
            assert self._make is not None, "Display needs a console or a way to make one"
            self._console = self._make()
        return self._console

    def _live(self) -> Any:
        if self.progress is None:
            from rich import progress as rp

            self.progress = rp.Progress(rp.SpinnerColumn(), rp.TextColumn("{task.description}"), rp.BarColumn(),
                                        rp.MofNCompleteColumn(), rp.TimeElapsedColumn(), console=self.console,
                                        transient=True)
            self.overall = self.progress.add_task("building", total=self.total)
            self.progress.__enter__()
        return self.progress

    def __enter__(self) -> Display:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.__exit__(*exc)

    def planned(self, stale: list[Job], reused: int) -> None:
        self.total = len(stale)
        if self.progress is not None:
            self.progress.update(self.overall, total=self.total)
        if reused:
            self.console.print(f"  [dim]{reused} build step(s) unchanged, reused[/]")

    def start(self, job: Job) -> None:
        from rich.markup import escape

        self.tasks[job.id] = self._live().add_task(f"  [dim]compiling[/] {escape(job.id)}", total=None)

    def done(self, job: Job, outcome: Outcome) -> None:
        from rich.markup import escape

        progress = self._live()
        task = self.tasks.pop(job.id, None)
        if task is not None:
            progress.remove_task(task)
        progress.advance(self.overall)
        st = outcome.status
        # a failure's message is printed once, by the build's error at the end (with -q too)
        self.console.print(f"  [{_STYLE.get(st, 'white')}]{st:>8}[/] {escape(job.id)}  {outcome.seconds:.2f} s",
                           highlight=False)


def make_console(*, stderr: bool, quiet: bool) -> Any:
    """A rich console for progress and summaries; one that is no terminal (a log, a pipe) is at least 160 columns
    wide, so that lines are not wrapped at the default 80."""
    from rich.console import Console

    made = Console(stderr=stderr, quiet=quiet)
    if not made.is_terminal:
        made = Console(stderr=stderr, quiet=quiet, width=max(made.width, 160))
    return made


def run_build(project: str | None, *, jobs: int | None, force: bool, quiet: bool, as_json: bool,
              out: str | None = None, console: Any | None = None, tuning: str | None = None,
              executor: str | None = None, address: str | None = None, verbose: bool = False,
              watch: bool = False, keep_going: bool = False) -> int:
    """The ``kernelpack build`` command (project form); returns the exit status (1 when ``keep_going`` left steps
    out). ``watch``: build again on every change, with warm workers (kernelpack.project.watch)."""
    import json

    def make() -> Any:  # rich is imported when something is drawn (a no-op build with --json draws nothing)
        return make_console(stderr=as_json, quiet=quiet)

    if watch:
        from .watch import run_watch

        return run_watch(project, jobs=jobs, force=force, quiet=quiet, as_json=as_json, out=out, tuning=tuning,
                         verbose=verbose, make_console=(lambda: console) if console is not None else make)

    workers = jobs  # None: the CPU count (local), the cluster's CPUs (Ray)
    with Display(console, make) as display:  # errors (BuildFailed included) go to the CLI: stderr, even with -q
        report = build(project, jobs=workers, force=force, out=out, events=display, tuning=tuning,
                       executor=executor, address=address, keep_going=keep_going)
    if as_json:
        print(json.dumps(report.to_json(), indent=1, sort_keys=True))
        return 1 if report.failed else 0
    summarize(report, display.console, verbose=verbose)
    if report.failed:
        import sys

        lines = "\n".join(f"  {job}: {why}" for job, why in sorted(report.failed.items()))
        print(f"kernelpack: error: {len(report.failed)} of {len(report.jobs)} build step(s) "
              f"failed and were left out (--keep-going: the library holds the rest):\n{lines}", file=sys.stderr)
        return 1
    return 0


def summarize(report: BuildReport, console: Any, verbose: bool = False) -> None:
    """The table of kernels and what the build did: the steps, the link (its own time) and the whole build's time;
    ``verbose``: every kernel row, the slowest steps and every output's path."""
    n = len(report.jobs)
    if report.up_to_date:
        head = f"[green]up to date[/]: {n} build step(s), nothing changed ({report.seconds:.2f} s)"
    else:
        parts = [f"{report.count(s)} {s}" for s in ("compiled", "cached", "reused") if report.count(s)]
        link = f"library linked in {report.link_seconds:.2f} s" if report.linked else "library unchanged"
        head = f"[green]built[/] {n} build step(s): {', '.join(parts)}; {link}; {report.seconds:.2f} s in all"
    files = [p for k, p in sorted(report.outputs.items()) if k in ("bundle", "shared", "static", "host_shared")]
    sizes = ", ".join(f"{Path(p).name} {_size(p)}" for p in files)
    lines = [head] + ([f"  {sizes}"] if sizes else [])
    if verbose:
        slow = sorted(report.job_seconds.items(), key=lambda kv: -kv[1])[:5]
        if slow:
            lines.append("  slowest steps: " + ", ".join(f"{job} {s:.2f} s" for job, s in slow))
        lines += [f"  {kind}: {path}" for kind, path in sorted(report.outputs.items())]
    from rich.markup import escape

    render(report.rows, console=console, title=f"{len(report.rows)} kernel specialization(s) in "
                                               f"{escape(str(report.out))}",
           footer="\n".join(lines[:1] + [escape(x) for x in lines[1:]]), limit=None if verbose else 60)


def _size(p: str) -> str:
    try:
        n = Path(p).stat().st_size
    except OSError:
        return "?"
    return f"{n / 1024:.0f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"
