"""``kernelpack capture``: run the command inside a capture, write the project, say what happened."""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..core.errors import KernelpackError
from .session import Capture, run_script


def run_capture(command: Sequence[str], *, out: str, device: str | None, configs: str | None, name: str | None,
                interpret: Sequence[str], quiet: bool, as_json: bool, native: bool = False,
                native_from: Sequence[str] = ()) -> int:
    """Exit status: 0 when something was captured (skipped launches and a failing script are listed), 1 when
    nothing was."""
    argv = list(command)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise KernelpackError("kernelpack capture: give the command to run after --: kernelpack capture -o DIR "
                              "--device h200 -- python script.py [ARGS]")
    t0 = time.perf_counter()
    cap = Capture(device, configs=configs, interpret=interpret, native=native, native_from=native_from)
    finished = run_script(cap, argv)
    written = cap.write_project(out, name=name, command=" ".join(shlex.quote(a) for a in argv)) if cap.launches \
        else None
    seconds = time.perf_counter() - t0
    report = {"mode": cap.mode, "finished": finished, "launches": len(cap.launches), "seconds": round(seconds, 2),
              "skipped": [s.line() for s in cap.skipped], "notes": cap.notes,
              "device_reads": cap.answers.summary() if cap.answers is not None else []}
    if written is not None:
        report.update(project=str(written.root), families=len(written.families),
                      specializations=written.specializations, new_families=written.new_families,
                      new_specializations=written.new_specs,
                      kernels=len({(f.dsl, f.kernel) for f in written.families}))
    if as_json:
        print(json.dumps(report, indent=1))
    elif not quiet:
        _print(report, out)
    else:
        for line in report["skipped"]:
            print(f"skipped: {line}", file=sys.stderr)
    if written is None:
        print("kernelpack: error: nothing was captured (no Triton, cuTile, CuTe or, with --native, native launch "
              "ran)", file=sys.stderr)
        return 1
    return 0


def _print(r: dict[str, object], out: str) -> None:
    print(f"captured {r['launches']} launch(es) in {r['seconds']} s ({r['mode']})")
    if "project" in r:
        print(f"  {r['kernels']} kernel(s), {r['families']} famil{'ies' if r['families'] != 1 else 'y'}, "
              f"{r['specializations']} specialization(s) in {r['project']} ({r['new_families']} new famil"
              f"{'ies' if r['new_families'] != 1 else 'y'}, {r['new_specializations']} new specialization(s))")
    for line in r["device_reads"]:  # type: ignore[attr-defined]
        print(f"  answered: {line}")
    for line in r["notes"]:  # type: ignore[attr-defined]
        print(f"  note: {line}")
    for line in r["skipped"]:  # type: ignore[attr-defined]
        print(f"  skipped: {line}")
    if "project" in r:
        print(f"next: kernelpack build {Path(out)}")
