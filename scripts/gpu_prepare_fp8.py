#!/usr/bin/env python3
"""On the GPU-less build machine: compile the fp8 kernels (tests/fp8_kernels.cu: __nv_fp8_e4m3/__nv_fp8_e5m2 -> f32)
with NVRTC for sm_90 into .gpu/fp8/fp8.kpack (git-ignored, carried). tests/test_fp8_gpu.py launches them on the H200
with torch float8 tensors and compares with torch's own conversion."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src")]

import kernelpack  # noqa: E402

KERNELS = ["widen<__nv_fp8_e4m3>", "widen<__nv_fp8_e5m2>", "widen_e4m3"]


def main() -> None:
    out = ROOT / ".gpu" / "fp8"
    out.mkdir(parents=True, exist_ok=True)
    bundle = kernelpack.cuda.compile(ROOT / "tests" / "fp8_kernels.cu", KERNELS, arch=["sm_90"], compiler="nvrtc")
    path = bundle.write(out / "fp8.kpack")
    abis = "; ".join(f"{a.label}({a.abi.params[0].type.pointee.value}*)" for a in bundle)
    print(f"wrote {path} ({path.stat().st_size} bytes): {abis}")


if __name__ == "__main__":
    main()
