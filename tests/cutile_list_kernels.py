"""cuTile kernels of the list-of-arrays tests (tests/test_cutile_lists.py, `scripts/gpu.py prepare cutile_lists`) and
of the tileiras-failure test; the source must be a real file."""

from __future__ import annotations

import cuda.tile as ct
from cuda.tile.compilation import ArrayConstraint, ListConstraint, ScalarConstraint, TupleConstraint


@ct.kernel
def group_scale(xs, ys, alpha: float, TILE: ct.Constant[int]):
    """ys[g] = alpha * xs[g] for every group g = bid(1), one tile of each group per bid(0) (the grid covers the longest
    group: a block past a shorter one's tiles stores nothing, as a tile wholly outside an array must not be stored)."""
    g = ct.bid(1)
    i = ct.bid(0)
    x, y = xs[g], ys[g]
    if i < ct.num_tiles(y, axis=0, shape=(TILE,)):
        t = ct.load(x, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
        ct.store(y, index=(i,), tile=(t * alpha).astype(y.dtype))


@ct.kernel
def group_matmul(As, Bs, Cs, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """A grouped GEMM: Cs[g] = As[g] @ Bs[g] for group g = bid(2), each of its own shape (the grid covers the largest
    group; blocks past a smaller one's tiles store nothing)."""
    g = ct.bid(2)
    bm = ct.bid(0)
    bn = ct.bid(1)
    A, B, C = As[g], Bs[g], Cs[g]
    if bm < ct.num_tiles(C, axis=0, shape=(TM, TN)):
        if bn < ct.num_tiles(C, axis=1, shape=(TM, TN)):
            acc = ct.full((TM, TN), 0, dtype=ct.float32)
            for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
                a = ct.load(A, index=(bm, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
                b = ct.load(B, index=(k, bn), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
                acc = ct.mma(a, b, acc)
            ct.store(C, index=(bm, bn), tile=acc.astype(C.dtype))


@ct.kernel
def scale_one(x, y, alpha: float, TILE: ct.Constant[int]):
    """y = alpha * x over one array: group_scale without the list (the launch-cost baseline of bench/list_launch.py)."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(i,), tile=(t * alpha).astype(y.dtype))


@ct.kernel
def first_of_many(xs, c, TILE: ct.Constant[int]):
    """Reads the first array of a tuple: with thousands of arrays its parameters overflow what a kernel may take."""
    i = ct.bid(0)
    ct.store(c, index=(i,), tile=ct.load(xs[0], index=(i, 0, 0, 0), shape=(TILE, 1, 1, 1)).reshape((TILE,)) + 1)


def array(dtype, ndim: int, **assume) -> ArrayConstraint:  # type: ignore[no-untyped-def]
    """An int32-indexed array that aliases nothing, with non-negative strides."""
    return ArrayConstraint(dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                           may_alias_internally=False, **assume)


def listof(element: ArrayConstraint) -> ListConstraint:
    return ListConstraint(element, alias_groups=(), elements_may_alias=False)


SCALE = {"f32": [listof(array(ct.float32, 1)), listof(array(ct.float32, 1)), ScalarConstraint(ct.float32), 256],
         "f16": [listof(array(ct.float16, 1)), listof(array(ct.float16, 1)), ScalarConstraint(ct.float32), 256]}
SCALE_ONE = [[array(ct.float32, 1), array(ct.float32, 1), ScalarConstraint(ct.float32), 256]]
MATMUL = [[listof(array(ct.float16, 2)), listof(array(ct.float16, 2)), listof(array(ct.float32, 2)), 64, 64, 32]]
# 820 rank-4 arrays of 40 bytes each: 32800 bytes of parameters, more than the 32764 a kernel may take
TOO_MANY = [[TupleConstraint([array(ct.float32, 4)] * 820), array(ct.float32, 1), 128]]
