"""A fresh virtual environment holding kernelpack without extras (and nothing of this process's site-packages), for
installing kernelpack-built wheels the way their users do. Shared by tests/test_wheel_install.py and
scripts/gpu_prepare_wheels.py.

kernelpack is built once as a wheel from this checkout (``pip wheel --no-build-isolation --no-deps``, the torch
bridge skipped: a consumer without torch has none) and installed into ``python -m venv`` with its dependencies from
the configured index (offline here: a local file index); ``--no-index`` with ``find_links`` when there is none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the packages a plain `pip install kernelpack` may bring (its own dependencies and theirs) besides pip/setuptools
LIGHT = {"kernelpack", "rich", "markdown-it-py", "mdurl", "pygments", "tomli", "typing-extensions", "pip",
         "setuptools", "wheel"}


class VenvUnavailable(Exception):
    """No venv could be made here (no network and no local index with kernelpack's dependencies...)."""


@dataclass(frozen=True)
class Venv:
    dir: Path

    @property
    def python(self) -> Path:
        return self.dir / "bin" / "python"

    def run(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        full = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        full.update(env or {})
        return subprocess.run([str(self.python), *args], capture_output=True, text=True, env=full, cwd=cwd,
                              timeout=timeout)

    def pip(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run("-m", "pip", "--disable-pip-version-check", "--no-input", *args)

    def installed(self) -> set[str]:
        r = self.pip("list", "--format=freeze")
        return {line.split("==")[0].lower().replace("_", "-") for line in r.stdout.split()}


def kernelpack_wheel(out: Path) -> Path:
    """kernelpack itself as a wheel built from this checkout (its C launch extension included, no torch bridge)."""
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["KERNELPACK_BUILD_TORCH_BRIDGE"] = "0"
    work = out / "src"
    if work.exists():
        shutil.rmtree(work)
    # a copy: pip builds in the source tree, which must not gain a build/ folder under the tests
    shutil.copytree(ROOT, work, ignore=_skip)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
                        "-w", str(out), str(work)], capture_output=True, text=True, env=env, timeout=600)
    if r.returncode:
        raise VenvUnavailable(f"building kernelpack's wheel failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return next(out.glob("kernelpack-*.whl"))


def _skip(folder: str, entries: list[str]) -> set[str]:
    top = {".git", ".gpu", "build", "dist", "examples", "tests", "docs", "scripts", "corpus"}
    here = top if Path(folder) == ROOT else set()
    return {e for e in entries if e in here or e == "__pycache__" or e.endswith((".so", "_cache"))}


def make_venv(where: Path, kernelpack: Path) -> Venv:
    """A plain venv at ``where`` with ``kernelpack`` (a wheel) and its dependencies installed."""
    r = subprocess.run([sys.executable, "-m", "venv", str(where)], capture_output=True, text=True, timeout=300)
    if r.returncode:
        raise VenvUnavailable(f"python -m venv failed: {r.stderr[-2000:]}")
    venv = Venv(where)
    r = venv.pip("install", str(kernelpack))
    if r.returncode:
        raise VenvUnavailable(f"pip install {kernelpack.name} (with its dependencies) failed; is an index "
                              f"reachable?\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return venv
