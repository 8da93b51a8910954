"""A kernel with a ``Constexpr`` policy object, a ``self`` receiver, Int32/Float32 scalars and a custom object that
carries dynamic values through ``__extract_mlir_values__``/``__new_from_mlir_values__``.

    y[i] = clamp(alpha * x[i] + affine.offset, affine.lo, affine.hi) * (i % period == 0 ? 2 : 1)   (i < n)

``policy.threads`` and ``policy.clamp`` are compile-time: they shape the kernel and leave the signature.
"""

from __future__ import annotations

from dataclasses import dataclass

import cutlass
import cutlass.cute as cute
from cutlass import Constexpr, Float32, Int32


@dataclass(frozen=True)
class Policy:
    """Compile-time choices: threads per block and whether to clamp."""

    threads: int = 128
    clamp: bool = True


class Affine:
    """Dynamic values grouped in one object: an offset and clamp bounds (all fp32)."""

    def __init__(self, offset: Float32 | float, lo: Float32 | float, hi: Float32 | float) -> None:
        self.offset, self.lo, self.hi = Float32(offset), Float32(lo), Float32(hi)

    def __extract_mlir_values__(self) -> list:
        return [v for f in (self.offset, self.lo, self.hi) for v in f.__extract_mlir_values__()]

    def __new_from_mlir_values__(self, values: list) -> Affine:
        return Affine(*(Float32(v) for v in values))


class ScaleShift:
    """The ``self`` receiver: holds the compile-time policy; its methods are the jit entry and the kernel."""

    def __init__(self, policy: Policy = Policy()) -> None:
        self.policy = policy

    @cute.kernel
    def kernel(self, x: cute.Tensor, y: cute.Tensor, n: Int32, alpha: Float32, period: Int32, affine: Affine,
               policy: Constexpr[Policy]):
        tx, _, _ = cute.arch.thread_idx()
        bx, _, _ = cute.arch.block_idx()
        i = bx * policy.threads + tx
        if i < n:
            v = alpha * x[i] + affine.offset
            if cutlass.const_expr(policy.clamp):
                v = cute.arch.fmax(affine.lo, cute.arch.fmin(v, affine.hi))
            if i % period == 0:
                v = v * Float32(2.0)
            y[i] = v

    @cute.jit
    def __call__(self, x: cute.Tensor, y: cute.Tensor, n: Int32, alpha: Float32, period: Int32, affine: Affine):
        threads = self.policy.threads
        self.kernel(x, y, n, alpha, period, affine, self.policy).launch(
            grid=[cute.ceil_div(n, threads), 1, 1], block=[threads, 1, 1])


def example_args() -> tuple:
    """Fake 1-D fp32 tensors with a dynamic size, and example scalars."""
    from cutlass.cute.runtime import make_fake_compact_tensor
    from cutlass.cute.typing import SymInt

    size = SymInt()
    x = make_fake_compact_tensor(Float32, (size,))
    y = make_fake_compact_tensor(Float32, (size,))
    return x, y, Int32(0), Float32(1.0), Int32(1), Affine(0.0, -1.0, 1.0)
