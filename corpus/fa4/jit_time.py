"""What FlashAttention-4's own JIT spends before its first attention call, measured on the build machine (no GPU: the
compile is all of it; FA4 compiles on the CPU). Run in a fresh process, prints one JSON object:

    python corpus/fa4/jit_time.py sm_90a 128 1      # arch, head dim, causal

``import_s``: ``import flash_attn.cute``; ``compile_s``: FA4's ``_flash_attn_fwd`` on fake tensors of the library's
representative shape, which runs its ``cute.compile`` (the same kernel object, arguments and options kernelpack exports)
-- what a process pays on its first call for this configuration (a GPU process also loads the module, not counted).
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    arch, head_dim, causal = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    sm = int("".join(ch for ch in arch if ch.isdigit()))
    os.environ["CUTE_DSL_ARCH"] = arch
    os.environ["FLASH_ATTENTION_ARCH"] = str(sm)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from fa4_calls import NUM_SMS, SHAPE

    os.environ["FLASH_ATTENTION_NUM_SMS"] = str(NUM_SMS[sm // 10 * 10])
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    t0 = time.perf_counter()
    from flash_attn.cute import interface as fi

    t1 = time.perf_counter()
    with FakeTensorMode():
        q, k, v = (torch.empty(SHAPE["batch"], SHAPE["seqlen"], SHAPE["heads"], head_dim, dtype=torch.bfloat16,
                               device="cuda") for _ in range(3))
        fi._flash_attn_fwd(q, k, v, causal=causal, return_lse=True)
    t2 = time.perf_counter()
    print(json.dumps({"arch": arch, "head_dim": head_dim, "causal": causal, "dtype": "bf16",
                      "import_s": round(t1 - t0, 3), "compile_s": round(t2 - t1, 3)}))


if __name__ == "__main__":
    main()
