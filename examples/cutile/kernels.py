"""cuTile kernels for the example library ex_cutile, and the signatures they are compiled for."""

import cuda.tile as ct
from cuda.tile.compilation import ArrayConstraint, ScalarConstraint

TILE = 1024


@ct.kernel
def vadd(a, b, c, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ta = ct.load(a, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    tb = ct.load(b, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(c, index=(bid,), tile=ta + tb)


@ct.kernel
def scale(x, y, alpha: float, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    tx = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(bid,), tile=tx * alpha)


def array(dtype) -> ArrayConstraint:  # type: ignore[no-untyped-def]
    """A 1-D int32-indexed array that aliases nothing (each becomes ptr, shape0, stride0 in C)."""
    return ArrayConstraint(dtype, 1, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                           may_alias_internally=False)


VADD_SIGNATURES = {"f32": [array(ct.float32)] * 3 + [TILE], "f16": [array(ct.float16)] * 3 + [TILE]}
SCALE_SIGNATURES = [[array(ct.float32), array(ct.float32), ScalarConstraint(ct.float32), TILE]]
