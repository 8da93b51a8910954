#!/usr/bin/env python3
"""On the GPU-less build machine: build the wheels of the CUDA C++ and Triton example projects (examples/cuda,
examples/triton) with ``kernelpack wheel`` into .gpu/wheel/ (git-ignored, carried to the GPU machine, which has no
network, no CuTe DSL and no cuTile). tests/test_wheel_gpu.py installs them there with ``pip install --no-index
--no-deps --target`` and runs every kernel against torch.

    python3 scripts/gpu_prepare_wheels.py [-j N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from example_builds import ALL  # noqa: E402

DSLS = ("cuda", "triton")  # what the GPU machine could also build: no CuTe DSL, no cuTile there


def main() -> int:
    from kernelpack.wheel import build_wheel

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-j", "--jobs", type=int, default=2)
    args = p.parse_args()
    out = ROOT / ".gpu" / "wheel"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    built, missing = {}, []
    with tempfile.TemporaryDirectory(prefix="kp-gpu-wheels-") as tmp:
        for ex in ALL:
            if ex.dsl not in DSLS:
                continue
            if not ex.buildable():
                missing.append(ex.dsl)
                print(f"skip examples/{ex.dsl}: {ex.needs or 'a CUDA C++ compiler'} is not installed")
                continue
            src = Path(tmp) / ex.dsl  # a copy: the checkout gains no build/ or dist/
            shutil.copytree(ex.dir, src, ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
            result = build_wheel(src, out, jobs=args.jobs)
            built[ex.name] = result.path.name
            print(f"wrote {result.path} ({result.size} bytes)")
    (out / "manifest.json").write_text(json.dumps({"wheels": built, "missing": missing}, indent=1))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
