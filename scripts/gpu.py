#!/usr/bin/env python3
"""The GPU run in two halves: compile every artifact here (no GPU) into .gpu/, carry it, run the steps there.

    python scripts/gpu.py list                         # the steps: what each prepares and runs
    python scripts/gpu.py prepare [STEP ...]           # here: fill .gpu/ (no step: every non-optional one)
    python3 scripts/gpu.py run [STEP ...] [--out DIR]  # there: build the extension, run the steps (no step: tests)
    python3 scripts/gpu.py run --dry-run STEP ...      # anywhere: the commands, and what .gpu/ lacks

``prepare STEP`` also prepares what the step needs. ``run`` uses kernelpack from src/ with the running python3 (no
install), builds the runtime's extension in place once (``--no-build`` keeps the built one), runs each step's
commands under its time cap (``--cap STEP=SECONDS``) and writes machine.txt, build.log and one log per step under
``--out`` (default ``$OUT``, else /tmp/kp-out). ``GPU_TESTS``/``CPU_TESTS`` replace the test files of the
``tests``/``cpu_tests`` steps.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# tests/ before scripts/: the test helpers' ``gpu`` module is tests/gpu.py, not this file
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "bench"), str(ROOT)]

from gpu_steps import run as there  # noqa: E402
from gpu_steps.table import BY_NAME, DEFAULT_RUN, STEPS, resolve, to_prepare  # noqa: E402


def list_steps() -> int:
    """Each step: what it is, what it prepares here, what it needs, what it runs there."""
    for s in STEPS:
        print(f"{s.name}{' (optional)' if s.optional else ''}: {s.doc}")
        if s.prepare:
            print(f"    prepares  .gpu/{', .gpu/'.join(s.carries)}")
        if s.needs:
            print(f"    needs     {', '.join(s.needs)}")
        for cmd in s.run:
            line = " ".join(a.replace("{py}", "python3").replace("{gpu}", ".gpu").replace("{out}", "$OUT")
                            for a in (*cmd.argv, *cmd.files) if "junitxml" not in a)
            print(f"    runs      {line.replace('-p no:cacheprovider ', '')}")
        if s.run:
            print(f"    cap       {s.cap} s")
    print(f"\nprepare with no step: {', '.join(s.name for s in to_prepare([]))}\nrun with no step: "
          f"{', '.join(DEFAULT_RUN)}")
    return 0


def prepare(names: list[str], gpu: Path) -> int:
    resolve(names)
    failed = []
    for step in to_prepare(names):
        print(f"== prepare {step.name}: {step.doc}", flush=True)
        t0 = time.perf_counter()
        try:
            assert step.prepare is not None
            step.prepare(gpu)
        except Exception:  # noqa: BLE001 - reported; the other steps still prepare
            traceback.print_exc()
            failed.append(step.name)
            continue
        lacking = [rel for rel in step.carries if not (gpu / rel).exists()]
        if lacking:
            print(f"   {step.name} did not write {', '.join(lacking)}")
            failed.append(step.name)
        print(f"   {step.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    size = sum(f.stat().st_size for f in gpu.rglob("*") if f.is_file()) if gpu.exists() else 0
    print(f"{gpu}: {size / 2**20:.1f} MiB{'; FAILED: ' + ', '.join(failed) if failed else ''}")
    return 1 if failed else 0


def run(names: list[str], gpu: Path, out: Path, build: bool, dry_run: bool, caps: dict[str, int]) -> int:
    steps = resolve(names or list(DEFAULT_RUN))
    out.mkdir(parents=True, exist_ok=True)
    env = there.environment(out, gpu)
    for step in steps:
        lacking = there.missing(step, BY_NAME, gpu)
        if lacking:
            print(f"{step.name}: {gpu} lacks {'; '.join(lacking)}")
    if dry_run:
        for k in ("PYTHONPATH", "KERNELPACK_GPU_ARTIFACTS", "KERNELPACK_CACHE_DIR", "OUT"):
            print(f"export {k}={env[k]}")
        if build:
            print(f"$ {sys.executable} setup.py -q build_ext --inplace  # > {out}/build.log")
        for step in steps:
            print(f"== {step.name} (cap {caps.get(step.name, step.cap)} s) > {out}/{step.name}.log")
            for cmd in step.run:
                argv, cenv, cwd = there.expand(cmd, out, gpu, env)
                extra = " ".join(f"{k}={v}" for k, v in cenv.items() if env.get(k) != v)
                where = f"(cd {cwd} && " if cwd != there.ROOT else ""
                print(f"$ {where}{extra + ' ' if extra else ''}{' '.join(argv)}{')' if where else ''}")
        return 0
    print(there.machine(out), end="", flush=True)
    if build and there.build_extension(out, env):
        print(there.tail(out / "build.log", 20))
    status = 0
    for step in steps:
        rc, secs = there.run_step(step, out, gpu, env, caps.get(step.name, step.cap))
        print(f"== {step.name}: rc={rc} in {secs:.0f} s\n{there.tail(out / f'{step.name}.log')}", flush=True)
        status = status or rc
    return status


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="\n".join(__doc__.splitlines()[2:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("verb", choices=("list", "prepare", "run"))
    ap.add_argument("steps", nargs="*", metavar="STEP")
    ap.add_argument("--gpu", type=Path, default=ROOT / ".gpu", help="the artifacts folder (default: .gpu)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "/tmp/kp-out"), help="run: logs")
    ap.add_argument("--no-build", action="store_true", help="run: keep the runtime's extension as built")
    ap.add_argument("--dry-run", action="store_true", help="run: print the commands, run nothing")
    ap.add_argument("--cap", action="append", default=[], metavar="STEP=SECONDS", help="run: a step's time cap")
    args = ap.parse_intermixed_args(argv)
    try:
        caps = {k: int(v) for k, _, v in (c.partition("=") for c in args.cap)}
        resolve([*args.steps, *caps])
    except (KeyError, ValueError) as e:
        ap.error(str(e).strip("'\""))
    gpu = args.gpu.resolve()
    if args.verb == "list":
        return list_steps()
    if args.verb == "prepare":
        return prepare(args.steps, gpu)
    return run(args.steps, gpu, args.out.resolve(), not args.no_build, args.dry_run, caps)


if __name__ == "__main__":
    sys.exit(main())
