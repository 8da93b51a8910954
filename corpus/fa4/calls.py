"""FlashAttention-4's script of calls for ``kernelpack capture``: its own interface (``flash_attn.cute``), forward and
backward, head dims 64 and 128, causal or not, bf16 and f16 -- the configurations corpus/fa4/kernelpack.toml builds by
hand-written factories, here reached as a user's code reaches them:

    kernelpack capture -o build/fa4-captured --device h200 -- python corpus/fa4/calls.py
    kernelpack build -k build/fa4-captured

With no GPU the capture answers for the device named (FA4 picks its kernel classes from it) and compiles each
``cute.compile`` FA4 makes while its objects live. The shape only picks FA4's tile configuration: its kernels take
every shape dynamically.
"""

from __future__ import annotations

import itertools

import torch

BATCH, SEQLEN, HEADS = 2, 1024, 16


def call(head_dim: int, causal: bool, dtype: torch.dtype) -> None:
    from flash_attn.cute import flash_attn_func

    q, k, v = (torch.randn(BATCH, SEQLEN, HEADS, head_dim, dtype=dtype, device="cuda", requires_grad=True)
               for _ in range(3))
    out = flash_attn_func(q, k, v, causal=causal)
    out = out[0] if isinstance(out, tuple) else out
    out.backward(torch.randn_like(out))


if __name__ == "__main__":
    for head_dim, causal, dtype in itertools.product((64, 128), (False, True), (torch.bfloat16, torch.float16)):
        call(head_dim, causal, dtype)
