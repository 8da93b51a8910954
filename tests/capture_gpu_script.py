"""The script both captures of tests/test_capture_gpu.py run: GPU-less here (scripts/gpu.py prepare capture) and on the
H200 (the autotuner measuring there). Shapes whose autotune key differs, so a GPU run may choose per shape."""

from __future__ import annotations

import torch

import capture_kernels as ck

if __name__ == "__main__":
    for n, dtype in ((1 << 12, torch.float32), (1 << 20, torch.float32), (1000, torch.float16)):
        x = torch.randn(n, device="cuda", dtype=dtype)
        y = ck.add(x, x)
        ck.scale(y)
    ck.rows(torch.randn(64, 300, device="cuda"))
