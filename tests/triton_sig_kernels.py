"""Triton kernels whose signatures tests/test_triton_signatures.py derives from example arguments and compares with
what Triton's own JIT picks for the same call (source must be a real file)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def mixed(x_ptr, y_ptr, a, b, f, flag, opt, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs * a, mask=offs < b).to(tl.float32)
    if opt is not None:
        v += tl.load(opt + offs, mask=offs < b).to(tl.float32)
    if flag:
        v = v * f
    tl.store(y_ptr + offs, v.to(y_ptr.dtype.element_ty), mask=offs < b)


@triton.jit(do_not_specialize=["m"], do_not_specialize_on_alignment=["q_ptr"])
def hinted(p_ptr, q_ptr, m, k: tl.int64, r: tl.constexpr = 8):
    offs = tl.arange(0, r)
    tl.store(q_ptr + offs, tl.load(p_ptr + offs * m + k))


@triton.jit
def const_ptr(src: tl.const, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


@triton.heuristics(values={"BLOCK": lambda args: triton.next_power_of_2(args["n"]),
                           "EVEN": lambda args: args["n"] % 2 == 0})
@triton.jit
def heuristic(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if EVEN:
        tl.store(x_ptr + offs, tl.load(x_ptr + offs))
    else:
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)],
                 key=["n"])
@triton.jit
def tuned(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def broken(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, undefined_value, mask=offs < n)  # noqa: F821 - the error under test


@triton.jit
def fp8_widen(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n).to(tl.float32), mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)],
                 key=["n"])
@triton.heuristics(values={"HALF": lambda args: args["BLOCK"] // 2})
@triton.jit
def tuned_half(x_ptr, n, BLOCK: tl.constexpr, HALF: tl.constexpr):
    offs = tl.arange(0, HALF) * 2
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + BLOCK, mask=offs < n)
