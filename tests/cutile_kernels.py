"""cuTile kernels used by the frontend tests and `scripts/gpu.py prepare frontends` (source must be a real file)."""

from __future__ import annotations

import cuda.tile as ct
from cuda.tile.compilation import ArrayConstraint


@ct.kernel
def vadd(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ta = ct.load(a, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    tb = ct.load(b, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(c, index=(bid,), tile=ta + tb)


@ct.kernel
def matmul(A, B, C, alpha: float, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    bm = ct.bid(0)
    bn = ct.bid(1)
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
        a = ct.load(A, index=(bm, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(B, index=(k, bn), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(bm, bn), tile=(acc * alpha).astype(C.dtype))


def array(dtype, ndim: int, **assume) -> ArrayConstraint:  # type: ignore[no-untyped-def]
    """An int32-indexed array that aliases nothing, with non-negative strides."""
    return ArrayConstraint(dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                           may_alias_internally=False, **assume)
