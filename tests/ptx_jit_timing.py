"""Run by tests/test_ptx_gpu.py in a fresh process (the driver's JIT cache is configured by the environment before
CUDA starts): load the carried compute_80-only bundle, time the first launch of ``ptx_axpy`` (the driver JIT-compiles
its PTX on load) and warm launches after it, check the result, print one JSON line."""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch

import kernelpack


def main(path: str) -> None:
    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    want = 2.0 * x + y
    torch.cuda.synchronize()
    mod = kernelpack.load(path)
    n = x.numel()
    t0 = time.perf_counter()
    mod.ptx_axpy(2.0, x, y, n, grid=(n + 255) // 256, block=256)
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    torch.testing.assert_close(y, want)
    warm = []
    for _ in range(50):
        t0 = time.perf_counter()
        mod.ptx_axpy(0.0, x, y, n, grid=(n + 255) // 256, block=256)
        torch.cuda.synchronize()
        warm.append(time.perf_counter() - t0)
    print(json.dumps({"first_launch_ms": first * 1e3, "warm_launch_us": statistics.median(warm) * 1e6,
                      "binary": mod.ptx_axpy.binary_for(0)}))


if __name__ == "__main__":
    main(sys.argv[1])
