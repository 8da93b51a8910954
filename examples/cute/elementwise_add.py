"""Elementwise ``c = a + b`` over dynamic (m, n) tensors, one kernel source for every element type.

The ``@cute.jit`` host function only launches the kernel, with a grid that is a simple function of the dynamic
sizes (``ceil_div(n, 32) x ceil_div(m, 8)``), so kernelpack records the launch rule and callers of the
kernel-level artifact pass tensors only. The sum is computed in fp32 and rounded once to the output type.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute

BLOCK_X, BLOCK_Y = 32, 8


@cute.kernel
def add_kernel(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    tx, ty, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    m, n = c.shape
    row = by * BLOCK_Y + ty
    col = bx * BLOCK_X + tx
    if row < m and col < n:
        total = a[row, col].to(cutlass.Float32) + b[row, col].to(cutlass.Float32)
        c[row, col] = total.to(c.element_type)


@cute.jit
def elementwise_add(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor):
    m, n = c.shape
    add_kernel(a, b, c).launch(grid=[cute.ceil_div(n, BLOCK_X), cute.ceil_div(m, BLOCK_Y), 1],
                               block=[BLOCK_X, BLOCK_Y, 1])


def example_args(dtype: type[cutlass.Numeric]) -> tuple:
    """Fake (m, n) row-major tensors of ``dtype`` with dynamic sizes and a dynamic 64-bit row stride."""
    from cutlass.cute.runtime import make_fake_compact_tensor
    from cutlass.cute.typing import SymInt

    m, n = SymInt(), SymInt()
    return tuple(make_fake_compact_tensor(dtype, (m, n), stride_order=(1, 0)) for _ in range(3))
