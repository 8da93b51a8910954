# FlashAttention-4 (flash-attn-4 4.0.0b36, nvidia-cutlass-dsl 4.8.1, no GPU, no kernelpack): the SM90 causal forward
# compiled with static example shapes fails with CONTAINER_STRUCTURE_CHANGED: tile_scheduler
# (flash_fwd_sm90.py:681), the same kernel with dynamic shapes (what FA4's own interface passes) compiles.
# Minimal CuTe-only reproducer of the pattern and the fix: cute_loop_carried_static.py beside this file.
#   CUTE_DSL_ARCH=sm_90a python corpus/repros/fa4_sm90_static_causal.py
import os
import sys

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")  # FA4's SM90 class asserts the DSL's arch when constructed

import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
from cutlass.cute.runtime import make_fake_stream, make_fake_tensor  # noqa: E402
from flash_attn.cute.flash_fwd_sm90 import FlashAttentionForwardSm90  # noqa: E402
from flash_attn.cute.utils import AuxData  # noqa: E402


def tensor(dt, shape, dynamic, align):
    stride, acc = [], 1
    for s in reversed(shape):
        stride.insert(0, acc)
        acc *= s
    if dynamic:  # FA4's to_cute_tensor: every mode dynamic but the contiguous stride
        shape = tuple(cute.sym_int() for _ in shape)
        stride = tuple(cute.sym_int64() for _ in stride[:-1]) + (1,)
    return make_fake_tensor(dt, tuple(shape), tuple(stride), assumed_align=align)


def compile_fwd(dynamic: bool) -> None:
    fa = FlashAttentionForwardSm90(cutlass.BFloat16, 128, 128, 1, is_causal=True, is_local=False, pack_gqa=False,
                                   tile_m=128, tile_n=128, num_stages=2, num_threads=384, Q_in_regs=False,
                                   intra_wg_overlap=True, mma_pv_is_rs=True)
    q, k, v, o = (tensor(cutlass.BFloat16, (2, 1024, 16, 128), dynamic, 16) for _ in range(4))
    lse = tensor(cutlass.Float32, (2, 16, 1024), dynamic, 4)
    cute.compile(fa, q, k, v, o, lse, 0.125, *[None] * 9, AuxData(), None, None, make_fake_stream(),
                 options="--gpu-arch sm_90a")


if __name__ == "__main__":
    for dynamic in (True, False):
        try:
            compile_fwd(dynamic)
            print(f"{'dynamic' if dynamic else 'static'} shapes: compiles")
        except Exception as e:  # noqa: BLE001
            line = next((x for x in str(e).splitlines() if "CONTAINER_STRUCTURE_CHANGED" in x), str(e)[:300])
            print(f"{'dynamic' if dynamic else 'static'} shapes: {line.strip()}")
    sys.exit(0)
