"""A generated wheel as its users meet it: installed offline into an empty venv by name from the folder it was written
to, then imported in fresh processes. Prints a markdown table: the packages pip installed beside the wheel (the
target is none), ``import NAME`` (lazy: the package's ``__init__`` only) and the first use of a kernel family (the
carried runtime imported, the bundle read), medians of ``--rounds`` fresh processes, against ``import kernelpack`` +
``kernelpack.load`` of the same bundle from the kernelpack that built it.

    python bench/wheel_delivery.py [--project examples/cuda] [--rounds 10] [--wheel PATH]

``--wheel`` measures a wheel built elsewhere (the GPU runner's step ``delivery`` passes the one built by ``prepare``);
otherwise the project is copied to a temp folder and built with this kernelpack. No GPU and no driver are needed:
nothing here launches.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMED = """
import sys, time
t0 = time.perf_counter()
import {name}
t1 = time.perf_counter()
getattr({name}, {name}.__all__[0])
t2 = time.perf_counter()
print((t1 - t0) * 1e3, (t2 - t1) * 1e3)
"""
BASELINE = """
import sys, time
t0 = time.perf_counter()
import kernelpack
m = kernelpack.load(sys.argv[1])
m[sorted(m.families)[0]]
print((time.perf_counter() - t0) * 1e3)
"""


def build(project: Path, work: Path) -> Path:
    sys.path.insert(0, str(ROOT / "src"))
    from kernelpack.wheel import build_wheel

    src = work / "project"
    shutil.copytree(project, src, ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
    return build_wheel(src, work / "dist", jobs=2).path


def canon(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def install(work: Path, dist: Path, name: str) -> tuple[str, list[str]]:
    """(the distributions pip installed beside the wheel, the command that runs code there); an
    interpreter without ensurepip (some system pythons) gets the wheel unpacked instead, run with ``-S`` (no
    site-packages: nothing else importable either)."""
    try:
        venv.EnvBuilder(with_pip=True).create(work / "venv")
    except (subprocess.CalledProcessError, OSError) as e:
        site = work / "site"
        for whl in dist.glob("*.whl"):
            with zipfile.ZipFile(whl) as z:
                z.extractall(site)
        print(f"(no venv with pip here: {e}; the wheel unpacked and run with -S)", file=sys.stderr)
        run = f"import sys; sys.path.insert(0, {str(site)!r}); exec(sys.argv[1])"
        return "n/a (no pip)", [sys.executable, "-S", "-c", run]
    py = str(work / "venv" / "bin" / "python")

    def names() -> set[str]:
        out = subprocess.run([py, "-m", "pip", "list", "--format", "json"], capture_output=True, text=True, check=True)
        return {canon(p["name"]) for p in json.loads(out.stdout)}

    before = names()
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(dist), name], check=True)
    added = sorted(names() - before - {canon(name)})
    return f"{len(added)}{' (' + ', '.join(added) + ')' if added else ''}", [py, "-c"]


def median_ms(cmd: list[str], rounds: int, cwd: Path) -> list[float]:
    runs = []
    for _ in range(rounds):
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=120, check=True)
        runs.append([float(x) for x in r.stdout.split()])
    return [statistics.median(col) for col in zip(*runs)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--project", type=Path, default=ROOT / "examples" / "cuda")
    ap.add_argument("--wheel", type=Path)
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kp-delivery-") as tmp:
        work = Path(tmp)
        whl = a.wheel.resolve() if a.wheel else build(a.project.resolve(), work)
        name, size = whl.name.split("-")[0], whl.stat().st_size
        dist = work / "find-links"
        dist.mkdir()
        shutil.copy2(whl, dist)
        added, cmd = install(work, dist, name)
        imp, first = median_ms([*cmd, TIMED.format(name=name)], a.rounds, work)
        base = None
        try:
            import kernelpack  # noqa: F401

            bundle = next(work.glob(f"*/**/{name}/*.kpack"))
            base = median_ms([sys.executable, "-c", BASELINE, str(bundle)], a.rounds, work)[0]
        except (ImportError, StopIteration, subprocess.CalledProcessError):
            pass
    print(f"wheel {whl.name}: {size / 1024:.0f} KiB; Python {sys.version.split()[0]}, "
          f"median of {a.rounds} fresh processes\n")
    print("| packages installed beside it | `import` | first use of a family | kernelpack import + load + first use |")
    print("|---:|---:|---:|---:|")
    print(f"| {added} | {imp:.2f} ms | {first:.1f} ms | "
          f"{'-' if base is None else f'{base:.1f} ms'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
