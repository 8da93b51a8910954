"""The example projects (examples/<dsl>/): which exist, building them, and compiling their C++ programs.

Shared by tests/test_examples.py (GPU-less: build, link, bind; GPU: run) and scripts/gpu_steps/prepare.py
(builds them here into .gpu/examples/ for the GPU machine, which has neither CuTe DSL nor cuTile).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from toolchain_support import CXX, cuda_compiler_available

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@dataclass(frozen=True)
class Example:
    dsl: str
    needs: str | None  # the Python module the build needs (None: a CUDA C++ compiler)
    libs: tuple[str, ...]  # what the C++ program links, in order

    @property
    def dir(self) -> Path:
        return EXAMPLES / self.dsl

    @property
    def name(self) -> str:
        return f"ex_{self.dsl}"

    def buildable(self) -> bool:
        if self.needs is None:
            return cuda_compiler_available()
        return importlib.util.find_spec(self.needs) is not None

    def copy(self, dst: Path) -> Path:
        """The example's project copied to ``dst`` without build outputs: building the copy leaves the checkout
        without a build/ or dist/."""
        shutil.copytree(self.dir, dst, ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
        return dst


ALL = (
    Example("cuda", None, ("ex_cuda",)),
    Example("triton", "triton", ("ex_triton",)),
    Example("cutile", "cuda.tile", ("ex_cutile",)),
    Example("cute", "cutlass", ("ex_cute",)),
)


def build_example(ex: Example, out: Path, jobs: int = 2):  # type: ignore[no-untyped-def]
    """Build the example's project into ``out`` (returns the BuildReport)."""
    from kernelpack.project import build

    return build(ex.dir, jobs=jobs, out=out)


def compile_program(ex: Example, prefix: Path, exe: Path, *, werror: bool = True) -> subprocess.CompletedProcess[str]:
    """g++ the example's main.cpp against the built library under ``prefix`` (no CUDA headers, no -lcuda)."""
    lib = prefix / "lib"
    cmd = [CXX, "-std=c++17", "-O2", "-Wall", "-Wextra", *(["-Werror"] if werror else []), f"-I{prefix / 'include'}",
           f"-I{EXAMPLES / 'common'}", str(ex.dir / "main.cpp"), f"-L{lib}", *[f"-l{n}" for n in ex.libs],
           f"-Wl,-rpath,{lib}", "-ldl", "-lpthread", "-o", str(exe)]
    return subprocess.run(cmd, capture_output=True, text=True)
