"""Triton kernels used by the frontend tests, the GPU tests and bench/triton_launch.py (source must be a real file)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def axpy_kernel(alpha, x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask) + y, mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        kk = k + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def tma_matmul_kernel(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


@triton.jit
def scale_rows_kernel(x_ptr, y_ptr, M, N, factor, BM: tl.constexpr, BN: tl.constexpr):
    """Builds its tensor descriptors on the device: on sm_90 they live in Triton's global scratch."""
    dx = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dy = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pid_m = tl.program_id(0)
    for n in range(0, N, BN):
        dy.store([pid_m * BM, n], dx.load([pid_m * BM, n]) * factor)


@triton.jit
def persistent_double_kernel(x_ptr, out_ptr, n, NUM_SMS, BLOCK: tl.constexpr):
    """A persistent loop: program p doubles blocks p, p + NUM_SMS, ... (NUM_SMS: the device's SM count, filled by
    the launcher; the grid is NUM_SMS programs)."""
    pid = tl.program_id(0)
    for start in range(pid * BLOCK, n, NUM_SMS * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def rows_per_sm_kernel(x_ptr, out_ptr, n_rows, n_cols, NUM_SMS: tl.constexpr, BLOCK: tl.constexpr):
    """liger's norm-backward pattern: rows_per_program = ceil(n_rows / sm_count) with the SM count a constexpr
    (built once per SM count; the grid is NUM_SMS programs). Adds 1 to each element of the rows it owns."""
    pid = tl.program_id(0)
    rows_per_program = tl.cdiv(n_rows, NUM_SMS)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    for r in range(pid * rows_per_program, tl.minimum((pid + 1) * rows_per_program, n_rows)):
        tl.store(out_ptr + r * n_cols + cols, tl.load(x_ptr + r * n_cols + cols, mask=mask) + 1, mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=8)],
                 key=["n"])
@triton.jit
def add_autotuned(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
