"""The GPU-machine half: run steps' commands over the carried ``.gpu/`` with kernelpack from ``src/`` (no install),
each under its step's time cap, one log per step under the output folder.

Environment of every command: ``KERNELPACK_GPU_ARTIFACTS=<root>/.gpu``, ``KERNELPACK_CACHE_DIR=off``,
``PYTHONUNBUFFERED=1``, ``PYTHONPATH=<root>/src`` before any given, ``OUT=<out>``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from .table import Cmd, Step

ROOT = Path(__file__).resolve().parents[2]


def environment(out: Path, gpu: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", KERNELPACK_GPU_ARTIFACTS=str(gpu), KERNELPACK_CACHE_DIR="off",
               OUT=str(out))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p)
    return env


def expand(cmd: Cmd, out: Path, gpu: Path, env: Mapping[str, str]) -> tuple[list[str], dict[str, str], Path]:
    """(argv, environment, working folder) of ``cmd`` with its placeholders filled."""
    fill = {"py": sys.executable, "out": str(out), "gpu": str(gpu)}
    files = env[cmd.files_from].split() if cmd.files_from and env.get(cmd.files_from) else cmd.files
    argv = [a.format(**fill) for a in (*cmd.argv, *files)]
    return argv, {**env, **{k: v.format(**fill) for k, v in cmd.env.items()}}, ROOT / cmd.cwd.format(**fill)


def machine(out: Path) -> str:
    """The GPU, its driver and compute capability, and the versions of python, torch and triton (machine.txt)."""
    lines = []
    smi = shutil.which("nvidia-smi")
    if smi:
        q = subprocess.run([smi, "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                           capture_output=True, text=True, check=False)
        lines.append(q.stdout.strip() or q.stderr.strip())
    else:
        lines.append("no nvidia-smi")
    v = subprocess.run([sys.executable, "-c", "import sys, torch, triton; "
                        "print(sys.version.split()[0], torch.__version__, triton.__version__)"],
                       capture_output=True, text=True, check=False)
    lines.append(v.stdout.strip() or (v.stderr.strip().splitlines() or ["no python version"])[-1])
    text = "\n".join(lines) + "\n"
    (out / "machine.txt").write_text(text)
    return text


def build_extension(out: Path, env: Mapping[str, str]) -> int:
    """The runtime's extensions built in place for this python and torch (setup.py's own build folders and the old
    .so files removed first); the log is build.log."""
    for d in (ROOT / "build").glob("*"):
        if d.name.startswith(("lib.", "temp.", "bdist.")):
            shutil.rmtree(d, ignore_errors=True)
    for so in (ROOT / "src" / "kernelpack" / "runtime").glob("*.so"):
        so.unlink()
    t0 = time.perf_counter()
    with open(out / "build.log", "w") as log:
        rc = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=ROOT, env=dict(env),
                            stdout=log, stderr=subprocess.STDOUT, check=False).returncode
        built = sorted(p.name for p in (ROOT / "src" / "kernelpack" / "runtime").glob("*.so"))
        log.write(f"\nrc={rc} in {time.perf_counter() - t0:.1f} s: {' '.join(built) or 'no extension'}\n")
    return rc


def missing(step: Step, steps: Mapping[str, Step], gpu: Path) -> list[str]:
    """What the step's run reads from ``gpu`` and is not there: '<path> (prepare <step>)'."""
    out = []
    for name in (step.name, *step.needs):
        for rel in steps[name].carries:
            if not (gpu / rel).exists():
                out.append(f"{rel} (prepare {name})")
    return out


def run_step(step: Step, out: Path, gpu: Path, env: Mapping[str, str], cap: int) -> tuple[int, float]:
    """The step's commands in order, stopping at the first failing one, all within ``cap`` seconds; (rc, seconds).
    rc 124 when the cap was reached (the command's process group is killed)."""
    t0 = time.perf_counter()
    rc = 0
    with open(out / f"{step.name}.log", "w") as log:
        for cmd in step.run:
            argv, cenv, cwd = expand(cmd, out, gpu, env)
            log.write(f"$ {' '.join(argv)}\n")
            log.flush()
            left = cap - (time.perf_counter() - t0)
            rc = _call(argv, cenv, cwd, log, left) if left > 0 else 124
            if rc:
                break
    return rc, time.perf_counter() - t0


def _call(argv: Sequence[str], env: Mapping[str, str], cwd: Path, log: object, timeout: float) -> int:
    proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdout=log, stderr=subprocess.STDOUT,  # type: ignore[arg-type]
                            start_new_session=True)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return 124


def tail(path: Path, n: int = 3) -> str:
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    return "\n".join(lines[-n:])
