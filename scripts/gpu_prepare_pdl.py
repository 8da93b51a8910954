#!/usr/bin/env python3
"""On the GPU-less build machine: compile the launch-flag kernels (tests/pdl_kernels.cu: a PDL pair and a grid-barrier
kernel) for sm_90 into .gpu/pdl/pdl.kpack (git-ignored, carried), with pdl_secondary flagged for programmatic
dependent launch and grid_center for cooperative launch. tests/test_launch_flags_gpu.py launches them on the H200."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src")]

import kernelpack  # noqa: E402

KERNELS = ["pdl_primary", "pdl_secondary", "grid_center"]


def main() -> None:
    out = ROOT / ".gpu" / "pdl"
    out.mkdir(parents=True, exist_ok=True)
    bundle = kernelpack.cuda.compile(ROOT / "tests" / "pdl_kernels.cu", KERNELS, arch=["sm_90"],
                                     pdl=["pdl_secondary"], cooperative=["grid_center"])
    path = bundle.write(out / "pdl.kpack")
    flags = ", ".join(f"{a.name}(pdl={a.launch.pdl}, cooperative={a.launch.cooperative})" for a in bundle)
    print(f"wrote {path} ({path.stat().st_size} bytes): {flags}")


if __name__ == "__main__":
    main()
