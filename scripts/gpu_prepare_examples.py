#!/usr/bin/env python3
"""On the GPU-less build machine: build every example project (examples/<dsl>/kernelpack.toml) into
.gpu/examples/<dsl>/ (git-ignored, carried to the GPU machine, which has neither CuTe DSL nor cuTile and Triton 3.6
only). tests/test_examples.py's GPU tests compile each examples/<dsl>/main.cpp there with g++ against the carried
library and run it and examples/<dsl>/run.py.

    python3 scripts/gpu_prepare_examples.py [-j N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from example_builds import ALL, build_example  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-j", "--jobs", type=int, default=2)
    args = p.parse_args()
    out = ROOT / ".gpu" / "examples"
    if out.exists():
        shutil.rmtree(out)
    built, missing = {}, []
    for ex in ALL:
        if not ex.buildable():
            missing.append(ex.dsl)
            print(f"skip examples/{ex.dsl}: {ex.needs or 'a CUDA C++ compiler'} is not installed")
            continue
        t0 = time.perf_counter()
        report = build_example(ex, out / ex.dsl, jobs=args.jobs)
        labels = [r.kernel for r in report.rows]
        built[ex.dsl] = labels
        print(f"built examples/{ex.dsl} -> {out / ex.dsl} in {time.perf_counter() - t0:.1f} s: {', '.join(labels)}")
    (out / "manifest.json").write_text(json.dumps({"built": built, "missing": missing}, indent=1))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
