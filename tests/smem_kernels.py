"""Triton matmuls whose shared memory differs per arch and per config (issue 27 items 6 and 7), for
tests/test_smem_limits.py and its GPU test: ``c = a @ b`` (fp16 in, fp32 out, row-major, K a multiple of BK), and
program 0 writes the config's TAG to ``tag[0]`` so a test can tell which config a launch ran.

Figures with Triton 3.9 (pipelined tl.dot: sm_80 holds num_stages - 1 tiles, sm_90a num_stages), tiles of
128 x 128 x 64 (32 KiB a stage):

* ``SMALL`` (3 stages): 65,536 B on sm_80, 98,304 B on sm_90a -- fits both;
* ``BIG`` (7 stages): 196,608 B on sm_80 (over its 163 KiB), 229,376 B on sm_90a (under its 227 KiB);
* ``HUGE`` (8 stages): 229,376 B on sm_80, 262,144 B on sm_90a -- fits neither;
* ``WIDE`` (64 x 256 x 128, 3 stages): 163,840 B on sm_80 (fits), 245,760 B on sm_90a (does not).
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

SIG = {"a": "*fp16", "b": "*fp16", "c": "*fp32", "tag": "*i32", "M": "i32", "N": "i32", "K": "i32"}
SMALL = {"BM": 128, "BN": 128, "BK": 64, "stages": 3}
BIG = {"BM": 128, "BN": 128, "BK": 64, "stages": 7}
HUGE = {"BM": 128, "BN": 128, "BK": 64, "stages": 8}
WIDE = {"BM": 64, "BN": 256, "BK": 128, "stages": 3}


@triton.jit
def mm_tagged(a, b, c, tag, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, TAG: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :], mask=rm[:, None] < M, other=0.0)
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :], mask=rn[None, :] < N, other=0.0)
        acc = tl.dot(x, y, acc)
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
    if (tl.program_id(0) == 0) & (tl.program_id(1) == 0):
        tl.store(tag, TAG)


def config(cfg: dict[str, int], tag: int) -> Any:
    return triton.Config({"BM": cfg["BM"], "BN": cfg["BN"], "BK": cfg["BK"], "TAG": tag}, num_warps=4,
                         num_stages=cfg["stages"])


def autotuned(*configs: dict[str, int]) -> Any:
    """``mm_tagged`` under @triton.autotune over ``configs`` (TAG = 1, 2, ... in order: variants c0, c1, ...)."""
    return triton.autotune(configs=[config(c, i + 1) for i, c in enumerate(configs)], key=["M", "N", "K"])(mm_tagged)


def grid_formula(meta: dict[str, Any]) -> tuple[Any, Any, int]:
    """Each config's grid: cdiv(M, BM) x cdiv(N, BN) (kernelpack.core.launchspec.evaluate_grid)."""
    return ("ceil_div", ("arg", "M", None), meta["BM"]), ("ceil_div", ("arg", "N", None), meta["BN"]), 1


def specialization(cfg: dict[str, int], variant: str, tag: int = 0) -> dict[str, Any]:
    """One config as a plain specialization (no autotuning: a config that does not fit an arch is refused)."""
    return {"constexprs": {"BM": cfg["BM"], "BN": cfg["BN"], "BK": cfg["BK"], "TAG": tag}, "num_stages": cfg["stages"],
            "divisibility": "all", "variant": variant}


EXAMPLE_MNK = (256, 256, 512)


def example_args() -> tuple[Any, ...]:
    """One call's arguments as Triton's JIT binds them (16-byte aligned arrays, dimensions divisible by 16): what an
    autotuned family derives its signature and divisibility from."""
    import numpy as np

    m, n, k = EXAMPLE_MNK
    a, b = np.zeros(m * k, np.float16), np.zeros(k * n, np.float16)
    return a, b, np.zeros(m * n, np.float32), np.zeros(4, np.int32), m, n, k


def compile_family(configs: tuple[dict[str, int], ...], arch: list[str], cache: Any = None, **kw: Any) -> Any:
    """Every config of ``autotuned(*configs)`` as one kernelpack family ``mm`` (each config's own grid)."""
    import kernelpack.frontends.triton.compile as kt

    return kt.compile(autotuned(*configs), example_args=example_args(), arch=arch, name="mm", grid=grid_formula,
                      cache=cache, **kw)
