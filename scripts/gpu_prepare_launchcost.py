#!/usr/bin/env python3
"""On the GPU-less build machine: compile the launch-cost-vs-argument-count kernels (bench/argcount.py: 0, 4, 19 and
64 parameters) for sm_90a with nvcc into .gpu/launchcost/ (git-ignored, carried): ``argcount.kpack`` for the Python
runtime's rows, ``argcount.cubin`` for the raw-driver and peer rows, and the generated C library ``kpargs``
(``lib/libkpargs.so`` + ``include/kpargs.h``) for the C library's rows of bench/launch_overhead.py.

Also ``before/``: the runtime's sources at the commit before the launch-cost work (``$KP_BEFORE_COMMIT``, default
2872c9c), which scripts/gpu_runtime.sh builds and benchmarks in the same GPU session for the before/after ratio."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "bench")]

import argcount  # noqa: E402

from kernelpack import cuda  # noqa: E402
from kernelpack.bundle import Bundle  # noqa: E402
from kernelpack.clib import Library  # noqa: E402

ARCH = "sm_90a"
BEFORE = os.environ.get("KP_BEFORE_COMMIT", "2872c9c")


def main() -> None:
    out = ROOT / ".gpu" / "launchcost"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cu = out / "argcount.cu"
    cu.write_text(argcount.source())
    names = [f"args{n}" for n in argcount.COUNTS]
    arts = cuda.compile(cu, names, arch=[ARCH], compiler="nvcc")
    Bundle.of(arts).write(out / "argcount.kpack")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    subprocess.run([nvcc, "-cubin", f"-arch={ARCH}", str(cu), "-o", str(out / "argcount.cubin")], check=True)
    res = Library("kpargs", *arts).build(out / "clib")
    before = out / "before"
    before.mkdir()
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE, "src", "setup.py", "pyproject.toml"],
                         check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(before)], input=tar, check=True)
    print(f"{before.relative_to(ROOT)}: the runtime at {BEFORE} ({len(tar)} bytes of sources)")
    for p in sorted(out.rglob("*")):
        if p.is_file() and before not in p.parents:
            print(f"{p.relative_to(ROOT)}: {p.stat().st_size} bytes")
    print(f"C library: {res.shared} (header {res.include_dir})")


if __name__ == "__main__":
    main()
