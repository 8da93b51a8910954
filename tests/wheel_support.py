"""Fresh virtual environments (nothing of this process's site-packages) for installing kernelpack-built wheels the
way their users do, offline (tests/test_wheel_install.py): an empty one (a generated wheel carries its runtime and
needs nothing else), and one holding kernelpack itself without extras.

kernelpack is built as a wheel from this checkout (``pip wheel --no-build-isolation --no-deps``, the torch
bridge skipped: a consumer without torch has none) and installed into ``python -m venv`` with ``pip install
--no-index --no-deps``: no index, no network, and nothing but kernelpack itself (the runtime needs none of its
dependencies, which serve the command line). What a plain ``pip install kernelpack`` would pull is computed from the
wheel's own ``Requires-Dist`` and, transitively, from the metadata of the distributions installed here
(:func:`dependency_closure`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# what a plain `pip install kernelpack` may bring (its dependencies and theirs): no DSL, no compiler, no torch
LIGHT = {"rich", "markdown-it-py", "mdurl", "pygments", "tomli", "typing-extensions"}


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


def install_target(wheels: list[Path], target: Path) -> None:
    """``wheels`` installed offline without their dependencies into the folder ``target`` (``pip --target``)."""
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
                        str(target), *map(str, wheels)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def make_venv(where: Path, kernelpack: Path | None = None) -> Venv:
    """A plain venv at ``where``, with ``kernelpack`` (a wheel) installed offline without its dependencies when
    given."""
    r = subprocess.run([sys.executable, "-m", "venv", str(where)], capture_output=True, text=True, timeout=300)
    if r.returncode:
        raise VenvUnavailable(f"python -m venv failed: {r.stderr[-2000:]}")
    venv = Venv(where)
    if kernelpack is None:
        return venv
    r = venv.pip("install", "--no-index", "--no-deps", str(kernelpack))
    if r.returncode:
        raise VenvUnavailable(f"pip install --no-index --no-deps {kernelpack.name} failed:\n{r.stdout[-2000:]}\n"
                              f"{r.stderr[-2000:]}")
    return venv


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(lines: list[str] | None, extras: frozenset[str] = frozenset()) -> list[tuple[str, frozenset[str]]]:
    """The requirements (name, extras asked for) of ``Requires-Dist`` lines that apply to this interpreter with
    ``extras`` selected (markers evaluated with ``packaging`` when it is importable, else kept: the check errs on the
    side of pulling more)."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pragma: no cover - pip and setuptools bring it
        Requirement = None  # type: ignore[assignment,misc]  # noqa: N806
    out = []
    for line in lines or []:
        if Requirement is not None:
            req = Requirement(line)
            envs = [{"extra": e} for e in extras] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                out.append((canonical(req.name), frozenset(req.extras)))
        else:  # pragma: no cover
            m = _NAME.match(line)
            if m and ("extra ==" not in line or any(f'"{e}"' in line for e in extras)):
                out.append((canonical(m.group()), frozenset()))
    return out


def wheel_requires(whl: Path) -> list[str]:
    """The ``Requires-Dist`` lines of a wheel's METADATA."""
    import zipfile
    from email.parser import HeaderParser

    with zipfile.ZipFile(whl) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return HeaderParser().parsestr(z.read(meta).decode("utf-8")).get_all("Requires-Dist") or []


def dependency_closure(requires: list[str]) -> set[str]:
    """Every distribution ``pip install`` of something requiring ``requires`` (no extras) would install: the
    requirements, then theirs, read from the metadata of the distributions installed in this interpreter."""
    todo, seen = requirements(requires), set()
    while todo:
        name, extras = todo.pop()
        key = (name, extras)
        if key in seen:
            continue
        seen.add(key)
        try:
            deps = metadata.requires(name)
        except metadata.PackageNotFoundError:
            continue  # not installed here: it counts (by name), its own requirements are unknown
        todo += requirements(deps, extras)
    return {n for n, _ in seen}
