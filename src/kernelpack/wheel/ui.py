"""The ``kernelpack wheel`` command's terminal side: the progress display and the summary of ``kernelpack build``
(:mod:`kernelpack.project.ui`), then the wheel written."""

from __future__ import annotations

import os
from typing import Any

from ..project.ui import Display, make_console, summarize
from . import WheelError, WheelResult, build_split_wheels, build_wheel, preflight


def run_wheel(project: str | None, *, dist: str | None, with_library: bool, platform: str | None,
              jobs: int | None, force: bool, overwrite: bool, quiet: bool, console: Any | None = None,
              split: str | None = None) -> int:
    """The ``kernelpack wheel`` command; returns the exit status. The wheels' paths are printed on stdout."""
    from rich.markup import escape

    preflight(project, platform)  # bad input fails in one line, before the progress display draws anything
    if split is not None and with_library:
        raise WheelError("--split arch and --with-library: a C library is one file for every arch; build it apart "
                         "(kernelpack build) or leave out --split")
    if console is None:
        console = make_console(stderr=True, quiet=quiet)
    workers = jobs or os.cpu_count() or 1
    with Display(console) as display:
        results: list[WheelResult] = (
            build_split_wheels(project, dist, platform=platform, jobs=workers, force=force, overwrite=overwrite,
                               events=display) if split else
            [build_wheel(project, dist, with_library=with_library, platform=platform, jobs=workers, force=force,
                         overwrite=overwrite, events=display)])
    summarize(results[0].report, console)
    for w in dict.fromkeys(w for r in results for w in r.warnings):
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    if results[0].left_out:
        console.print(f"[yellow]left out[/] (CuTe host programs live in the C library: pass --with-library): "
                      f"{escape(', '.join(results[0].left_out))}", highlight=False)
    for result in results:
        state = "unchanged" if result.unchanged else "wrote"
        console.print(f"{state} {escape(str(result.path))} ({result.size} bytes, {result.tag})", highlight=False)
        print(result.path)
    return 0


def run_export(project: str | None, *, hf_kernels: str, platform: str | None, jobs: int | None, force: bool,
               quiet: bool) -> int:
    """``kernelpack export --hf-kernels DIR``; returns the exit status. The variant folder is printed on stdout."""
    from rich.console import Console
    from rich.markup import escape

    from .hf import export_hf_kernels

    preflight(project, platform)
    console = Console(stderr=True, quiet=quiet)
    with Display(console) as display:
        result = export_hf_kernels(project, hf_kernels, platform=platform, jobs=jobs or os.cpu_count() or 1,
                                   force=force, events=display)
    summarize(result.report, console)
    where = result.root / "build" / result.variant
    console.print(f"wrote {escape(str(where))} ({len(result.files)} files, id {result.id}); load it with "
                  f"kernels.get_local_kernel(Path({str(result.root)!r}))", highlight=False)
    print(where)
    return 0
