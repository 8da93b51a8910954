"""The ``kernelpack wheel`` command's terminal side: the progress display and the summary of ``kernelpack build``
(:mod:`kernelpack.project.ui`), then the wheel written."""

from __future__ import annotations

import os
from typing import Any

from ..project.ui import Display, summarize
from . import build_wheel, preflight


def run_wheel(project: str | None, *, dist: str | None, with_library: bool, platform: str | None,
              jobs: int | None, force: bool, overwrite: bool, quiet: bool, console: Any | None = None) -> int:
    """The ``kernelpack wheel`` command; returns the exit status. The wheel's path is printed on stdout."""
    from rich.console import Console
    from rich.markup import escape

    preflight(project, platform)  # bad input fails in one line, before the progress display draws anything
    if console is None:
        console = Console(stderr=True, quiet=quiet)
        if not console.is_terminal:
            console = Console(stderr=True, quiet=quiet, width=max(console.width, 160))
    workers = jobs or os.cpu_count() or 1
    with Display(console) as display:
        result = build_wheel(project, dist, with_library=with_library, platform=platform, jobs=workers, force=force,
                             overwrite=overwrite, events=display)
    summarize(result.report, console)
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    if result.left_out:
        console.print(f"[yellow]left out[/] (CuTe host programs live in the C library: pass --with-library): "
                      f"{escape(', '.join(result.left_out))}", highlight=False)
    state = "unchanged" if result.unchanged else "wrote"
    console.print(f"{state} {escape(str(result.path))} ({result.size} bytes, {result.tag})", highlight=False)
    print(result.path)
    return 0
