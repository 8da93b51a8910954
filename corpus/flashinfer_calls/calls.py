"""FlashInfer's script of calls for ``kernelpack capture``: its public norm API (``flashinfer.norm``), which runs its
CuTe DSL kernels where nvidia-cutlass-dsl is installed -- RMSNorm (2-D and the per-head 3-D form), fused add +
RMSNorm, LayerNorm -- bf16 and f16, hidden size 4096 (the shapes FlashInfer's tests use):

    kernelpack capture -o build/flashinfer-captured --device h200 -- python corpus/flashinfer_calls/calls.py
    kernelpack build -k build/flashinfer-captured
"""

from __future__ import annotations

import torch

ROWS, HIDDEN, HEADS, HEAD_DIM = 128, 4096, 8, 128


def calls(dtype: torch.dtype) -> None:
    import flashinfer.norm as fn

    x = torch.randn(ROWS, HIDDEN, dtype=dtype, device="cuda")
    w = torch.randn(HIDDEN, dtype=dtype, device="cuda")
    fn.rmsnorm(x, w, 1e-6)
    fn.rmsnorm(torch.randn(ROWS, HEADS, HEAD_DIM, dtype=dtype, device="cuda"),
               torch.randn(HEAD_DIM, dtype=dtype, device="cuda"), 1e-6)
    fn.fused_add_rmsnorm(x, torch.randn_like(x), w, 1e-6)
    fn.layernorm(x, torch.randn(HIDDEN, dtype=torch.float32, device="cuda"),
                 torch.randn(HIDDEN, dtype=torch.float32, device="cuda"), 1e-6)


if __name__ == "__main__":
    for dtype in (torch.bfloat16, torch.float16):
        calls(dtype)
