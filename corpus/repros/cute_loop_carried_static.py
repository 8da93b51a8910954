# FlashAttention-4 (flash-attn-4 4.0.0b36) SM90 causal forward with static example shapes fails in the CuTe DSL with
# CONTAINER_STRUCTURE_CHANGED: tile_scheduler. The cause is FA4's, not the DSL's: SingleTileLPTScheduler
# .advance_to_next_work() sets `self._tile_idx = self.params.total_blocks`; the scheduler is carried through a
# `while` loop, and with static shapes `total_blocks` is a Python int where `_tile_idx` started as a dynamic Int32,
# so the object has one dynamic value fewer at the end of the loop body than at its start. The same pattern, CuTe DSL
# alone (nvidia-cutlass-dsl 4.8.1, no GPU, no FA4, no kernelpack):
import sys

import cutlass
import cutlass.cute as cute
from cutlass import Int32
from cutlass.cute.runtime import make_fake_compact_tensor


class Scheduler:
    """Carries a dynamic tile index; advancing stores the (here static) tile count in it, as FA4's scheduler does."""

    def __init__(self, total, tile_idx):
        self.total, self.tile_idx = total, tile_idx

    def advance(self, fixed: bool):
        self.tile_idx = Int32(self.total) if fixed else self.total  # FA4 4.0.0b36: `= self.params.total_blocks`

    def __extract_mlir_values__(self):
        return cutlass.extract_mlir_values(self.tile_idx)

    def __new_from_mlir_values__(self, values):
        return Scheduler(self.total, cutlass.new_from_mlir_values(self.tile_idx, values))


@cute.kernel
def k(out: cute.Tensor, fixed: cutlass.Constexpr[bool]):
    sched = Scheduler(cute.size(out.shape[0]), Int32(cute.arch.block_idx()[0]))  # static extent: a Python int
    while sched.tile_idx < sched.total:
        out[sched.tile_idx] = 1.0
        sched.advance(fixed)


@cute.jit
def run(out: cute.Tensor, fixed: cutlass.Constexpr[bool]):
    k(out, fixed).launch(grid=[1, 1, 1], block=[1, 1, 1])


if __name__ == "__main__":
    static = make_fake_compact_tensor(cutlass.Float32, (128,))  # what an example tensor without dynamic marks is
    dynamic = make_fake_compact_tensor(cutlass.Float32, (cute.sym_int(),))
    for label, t, fixed in (("static shape", static, False), ("dynamic shape", dynamic, False),
                            ("static shape, Int32(...) in advance()", static, True)):
        try:
            cute.compile(run, t, fixed, options="--gpu-arch sm_90a")
            print(f"{label}: compiles")
        except Exception as e:  # noqa: BLE001
            line = next((x for x in str(e).splitlines() if "CONTAINER_STRUCTURE_CHANGED" in x), str(e)[:200])
            print(f"{label}: {line.strip()}")
    sys.exit(0)
