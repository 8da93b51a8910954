"""cuTile kernels whose signatures tests/test_cutile_signatures.py derives from example arguments and compares with
what cuTile's own JIT derives for device arrays of the same layout (source must be a real file)."""

from __future__ import annotations

from typing import Annotated

import cuda.tile as ct


@ct.kernel
def scaled(x, y, alpha, n, flag, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0, 0), shape=(1, 1, TILE), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(bid, 0), tile=ct.reshape(t * alpha, (1, TILE)))


@ct.kernel
def wide(x: Annotated[ct.Array, ct.ArrayAnnotation(index_dtype=ct.int64, static_shape_dims=(0,))],
         y: Annotated[ct.Array, ct.ArrayAnnotation(static_stride_dims=(0,))], k: ct.ScalarInt64,
         TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(y, index=(bid, 0), tile=ct.load(x, index=(bid, 0), shape=(1, TILE), padding_mode=ct.PaddingMode.ZERO))
