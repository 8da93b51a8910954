#!/usr/bin/env python3
"""TFLOP/s of the CuTe DSL Hopper GEMM launched through kernelpack (libkpcute.so: CuTe's host launcher + the
kernelpack driver shim, called with ctypes) next to ``torch.matmul`` on the same inputs.

Run on the GPU machine after `scripts/gpu.py prepare cute` built .gpu/cute/ on the build machine:
    KERNELPACK_GPU_ARTIFACTS=$PWD/.gpu python3 bench/cute_gemm.py
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import torch

SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 1024), (1000, 520, 1032)]


class T2(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("shape0", ctypes.c_int32), ("shape1", ctypes.c_int32),
                ("stride0", ctypes.c_int64)]


def t2(x: torch.Tensor) -> T2:
    return T2(x.data_ptr(), x.shape[0], x.shape[1], x.stride(0))


def timed(fn, iters: int) -> float:  # type: ignore[no-untyped-def]
    """Median milliseconds per call over 5 batches of ``iters`` calls (after a warm-up)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / iters)
    return sorted(times)[2]


def main() -> int:
    root = Path(os.environ.get("KERNELPACK_GPU_ARTIFACTS", ".gpu")) / "cute" / "kpcute" / "lib" / "libkpcute.so"
    if not root.is_file():
        print(f"no {root}: run scripts/gpu.py prepare cute on the build machine first", file=sys.stderr)
        return 1
    lib = ctypes.CDLL(str(root))
    lib.kpcute_last_error.restype = ctypes.c_char_p
    torch.zeros(1, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'dtype':6} {'M':>5} {'N':>5} {'K':>5} {'kernelpack TFLOP/s':>19} "
          f"{'torch.matmul TFLOP/s':>21} {'ratio':>6}")
    for dtype, name in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        fn = getattr(lib, f"kpcute_gemm_{name}")
        fn.argtypes = [T2, T2, T2, ctypes.c_void_p]
        for m, n, k in SHAPES:
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(n, k, device="cuda", dtype=dtype)
            c = torch.empty(m, n, device="cuda", dtype=dtype)
            ta, tb, tc = t2(a), t2(b), t2(c)
            status = fn(ta, tb, tc, stream)
            if status != 0:
                print(f"kpcute_gemm_{name}: {lib.kpcute_last_error().decode()}", file=sys.stderr)
                return 1
            iters = max(3, int(2e11 / (2 * m * n * k)))
            kp_ms = timed(lambda: fn(ta, tb, tc, stream), iters)  # noqa: B023
            bt = b.T
            th_ms = timed(lambda: torch.matmul(a, bt), iters)  # noqa: B023
            flop = 2 * m * n * k
            kp, th = flop / kp_ms / 1e9, flop / th_ms / 1e9
            print(f"{name:6} {m:5} {n:5} {k:5} {kp:19.1f} {th:21.1f} {kp / th:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
