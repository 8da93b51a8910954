#!/usr/bin/env python3
"""Long fuzz campaigns of kernelpack's parsers: the cubin reader, the bundle loader and the embedded-manifest reader
(tests/fuzz_support.py holds the mutators and the targets), and the fatbin decoders against the reference libraries
(``zstd``, ``lz4``: tests/fuzz_decoders.py; a finding is what kernelpack accepts and the reference refuses, or other
bytes; ``stricter`` counts what kernelpack refuses and the reference accepts). Unlike the in-suite tests a finding
does not stop the campaign: each distinct one (exception type and raising line) is counted and printed with a
reproducer.

    python scripts/fuzz.py                       # 2000 inputs per target
    python scripts/fuzz.py -n 20000 cubin bundle-manifest
    python scripts/fuzz.py --seconds 120         # per target, whichever comes first
    python scripts/fuzz.py --sweep --fork dispatch-record   # every record integer at its boundaries, then at random

Every input runs under a 5 s time box and a 1 GiB address-space headroom (RLIMIT_AS). The ``bundle-load`` target
loads each forged bundle and every binary it can run on the tests' fake driver (built into the seed directory); the
``dispatch-record`` target edits a family's dispatch record and launches every family through the C launcher there;
with ``--sweep`` it first runs the deterministic boundary sweep (fuzz_support.record_sweep: every integer field of
records holding a C slot of each kind at each value of BOUNDARY). ``--fork`` runs each input in a forked child, so a
crash (a signal) is a finding with its reproducer, not the end of the campaign.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

import fuzz_decoders as fd  # noqa: E402
import fuzz_support as fz  # noqa: E402

CHUNK = 1000  # inputs per hypothesis run; runs repeat (fresh random seeds) until the count or the time is reached
TARGETS = {**fz.TARGETS, **{f: ("decoder", fd.STRATEGY, fd.target(f)) for f in fd.FORMATS}}


def outcome(parser: str, fn: Callable[[], None]) -> tuple[str, str]:
    """("parsed" | "refused", "") or ("finding", its key: exception type and raising line) for one input."""
    try:
        return fz.check(parser, fn), ""
    except Exception as e:  # noqa: BLE001 - every other outcome is a finding
        frame = traceback.extract_tb(e.__traceback__)[-1]
        return "finding", f"{type(e).__name__} at {Path(frame.filename).name}:{frame.lineno}: {e!s:.200}"


def isolated(parser: str, fn: Callable[[], None]) -> tuple[str, str]:
    """:func:`outcome` in a forked child: a crash is the finding "killed by signal N"."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, and leave without running the parent's exit handlers
        os.close(r)
        try:
            os.write(w, json.dumps(outcome(parser, fn)).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "finding", f"killed by signal {os.WTERMSIG(status)}"
    if not text:
        return "finding", f"child exited {os.WEXITSTATUS(status)} silently"
    what, key = json.loads(text)
    return what, key


def sweep(seeds: fz.Seeds, fork: bool) -> tuple[Counter[str], dict[str, str]]:
    """The dispatch-record boundary sweep, every input (per slot kind: inputs, parsed, refused, findings)."""
    counts: Counter[str] = Counter()
    findings: dict[str, str] = {}
    run = isolated if fork else outcome
    for kind, field, text in fz.record_sweep(fz.seed_record(seeds)):
        what, key = run("load", lambda text=text: fz.sweep_input(seeds, text))  # type: ignore[misc]
        counts["inputs"] += 1
        counts[what] += 1
        counts[f"{kind} {what}"] += 1
        if what == "finding":
            findings.setdefault(f"{key.split(': ')[0]} ({kind} {field})", f"{key}\n    record: {text[:400]!r}")
    return counts, findings


def campaign(name: str, seeds: fz.Seeds, inputs: int, seconds: float,
             fork: bool = False) -> tuple[Counter[str], dict[str, str]]:
    parser, strategy, runner = TARGETS[name]
    counts: Counter[str] = Counter()
    findings: dict[str, str] = {}
    deadline = time.monotonic() + seconds
    run = isolated if fork else outcome

    @settings(max_examples=CHUNK, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(args=strategy)
    def one(args: object) -> None:
        if counts["inputs"] >= inputs or time.monotonic() > deadline:
            return
        counts["inputs"] += 1
        what, key = run(parser, lambda: runner(seeds, args))
        if what != "finding":
            counts[what] += 1
            return
        counts["findings"] += 1
        findings.setdefault(key.split(": ")[0], f"{key}\n    input: {args!r:.400}")

    while counts["inputs"] < inputs and time.monotonic() < deadline:
        one()
    return counts, findings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("targets", nargs="*", default=list(TARGETS), help=f"any of {', '.join(TARGETS)}")
    ap.add_argument("-n", "--inputs", type=int, default=2000, help="inputs per target")
    ap.add_argument("--seconds", type=float, default=float("inf"), help="time limit per target")
    ap.add_argument("--seeds", type=Path, help="directory for the seed build (default: a temporary one)")
    ap.add_argument("--sweep", action="store_true", help="dispatch-record: the boundary sweep first, every input")
    ap.add_argument("--fork", action="store_true", help="each input in a forked child (a crash is a finding)")
    args = ap.parse_args()
    if set(fd.FORMATS) & set(args.targets) and not fd.available():
        print("the zstd and lz4 targets need zstandard and lz4 (pip install 'kernelpack[prebuilt]')", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kpfuzz-") as tmp, ExitStack() as stack:
        t0 = time.monotonic()
        seeds = fz.make_seeds(args.seeds or Path(tmp))
        print(f"seeds: {seeds!r} ({time.monotonic() - t0:.1f} s)", flush=True)
        if {"bundle-load", "dispatch-record"} & set(args.targets):  # they load binaries: on the fake driver
            from fake_cuda import build

            fake = build((args.seeds or Path(tmp)) / "fakecuda").in_process()
            fake.reset()
            stack.enter_context(fake.installed())
        total = 0
        if args.sweep and "dispatch-record" in args.targets:
            t0 = time.monotonic()
            counts, findings = sweep(seeds, args.fork)
            total += len(findings)
            print(f"{'record sweep':18s} inputs={counts['inputs']:7d} parsed={counts['parsed']:6d} "
                  f"refused={counts['refused']:7d} findings={counts['finding']} distinct={len(findings)} "
                  f"({time.monotonic() - t0:.0f} s)", flush=True)
            for kind in fz.SLOT_KINDS:
                print(f"  {kind:12s} " + " ".join(f"{w}={counts[f'{kind} {w}']}" for w in ("parsed", "refused",
                                                                                         "finding")), flush=True)
            for key, detail in findings.items():
                print(f"  FINDING {key}: {detail}", flush=True)
        for name in args.targets:
            t0 = time.monotonic()
            counts, findings = campaign(name, seeds, args.inputs, args.seconds, args.fork)
            total += len(findings)
            print(f"{name:18s} inputs={counts['inputs']:7d} parsed={counts['parsed']:6d} refused={counts['refused']:7d}"
                  f" findings={counts['findings']} distinct={len(findings)} ({time.monotonic() - t0:.0f} s)"
                  + "".join(f" {k}={v}" for k, v in counts.items() if k not in ("inputs", "parsed", "refused",
                                                                               "findings")), flush=True)
            for key, detail in findings.items():
                print(f"  FINDING {key}: {detail}", flush=True)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
