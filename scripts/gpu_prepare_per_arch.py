#!/usr/bin/env python3
"""On the GPU-less build machine: compile the per-arch kernels the GPU run checks (tests/per_arch_builds.py: a cuTile
matmul whose thread count differs per arch, a Triton matmul over tensor descriptors lowered per arch, kernels reading
the SM count and the max active clusters from the device, builds for 132 and 108 SMs) into
.gpu/per_arch/per_arch.kpack (git-ignored, carried). The GPU machine has no cuTile and an older Triton, so these
artifacts, not ones compiled there, are what tests/test_per_arch_gpu.py launches."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import per_arch_builds as pb  # noqa: E402


def main() -> None:
    out = ROOT / ".gpu" / "per_arch"
    out.mkdir(parents=True, exist_ok=True)
    bundle = pb.bundle()
    path = bundle.write(out / "per_arch.kpack")
    labels = ", ".join(f"{a.label}({'/'.join(map(str, a.archs))})" for a in bundle)
    print(f"wrote {path} ({path.stat().st_size} bytes): {labels}")


if __name__ == "__main__":
    main()
