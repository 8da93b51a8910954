#!/usr/bin/env python3
"""Long fuzz campaigns of kernelpack's parsers: the cubin reader, the bundle loader and the embedded-manifest reader
(tests/fuzz_support.py holds the mutators and the targets). Unlike the in-suite tests a finding does not stop the
campaign: each distinct one (exception type and raising line) is counted and printed with a reproducer.

    python scripts/fuzz.py                       # 2000 inputs per target
    python scripts/fuzz.py -n 20000 cubin bundle-manifest
    python scripts/fuzz.py --seconds 120         # per target, whichever comes first

Every input runs under a 5 s time box and a 1 GiB address-space headroom (RLIMIT_AS). The ``bundle-load`` target
loads each forged bundle and every binary it can run on the tests' fake driver (built into the seed directory); the
``dispatch-record`` target edits a family's dispatch record and launches every family through the C launcher there.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

import fuzz_support as fz  # noqa: E402

CHUNK = 1000  # inputs per hypothesis run; runs repeat (fresh random seeds) until the count or the time is reached


def campaign(name: str, seeds: fz.Seeds, inputs: int, seconds: float) -> tuple[Counter[str], dict[str, str]]:
    parser, strategy, runner = fz.TARGETS[name]
    counts: Counter[str] = Counter()
    findings: dict[str, str] = {}
    deadline = time.monotonic() + seconds

    @settings(max_examples=CHUNK, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(args=strategy)
    def one(args: object) -> None:
        if counts["inputs"] >= inputs or time.monotonic() > deadline:
            return
        counts["inputs"] += 1
        try:
            counts[fz.check(parser, lambda: runner(seeds, args))] += 1
        except Exception as e:  # noqa: BLE001 - every other outcome is a finding
            frame = traceback.extract_tb(e.__traceback__)[-1]
            key = f"{type(e).__name__} at {Path(frame.filename).name}:{frame.lineno}"
            counts["findings"] += 1
            findings.setdefault(key, f"{e!s:.200}\n    input: {args!r:.400}")

    while counts["inputs"] < inputs and time.monotonic() < deadline:
        one()
    return counts, findings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("targets", nargs="*", default=list(fz.TARGETS), help=f"any of {', '.join(fz.TARGETS)}")
    ap.add_argument("-n", "--inputs", type=int, default=2000, help="inputs per target")
    ap.add_argument("--seconds", type=float, default=float("inf"), help="time limit per target")
    ap.add_argument("--seeds", type=Path, help="directory for the seed build (default: a temporary one)")
    args = ap.parse_args()
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
        for name in args.targets:
            t0 = time.monotonic()
            counts, findings = campaign(name, seeds, args.inputs, args.seconds)
            total += len(findings)
            print(f"{name:18s} inputs={counts['inputs']:7d} parsed={counts['parsed']:6d} refused={counts['refused']:7d}"
                  f" findings={counts['findings']} distinct={len(findings)} ({time.monotonic() - t0:.0f} s)",
                  flush=True)
            for key, detail in findings.items():
                print(f"  FINDING {key}: {detail}", flush=True)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
