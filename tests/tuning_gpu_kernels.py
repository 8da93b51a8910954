"""The autotuned Triton matmul of the tuning GPU test (tests/test_tuning_gpu.py): Triton's tutorial kernel (grouped
program order), fp16 in, fp32 accumulate, with @triton.autotune over block shapes keyed on M, N, K."""

from __future__ import annotations

import triton
import triton.language as tl

CONFIGS = [
    triton.Config({"BM": 128, "BN": 256, "BK": 64, "GM": 8}, num_stages=3, num_warps=8),
    triton.Config({"BM": 64, "BN": 256, "BK": 32, "GM": 8}, num_stages=4, num_warps=4),
    triton.Config({"BM": 128, "BN": 128, "BK": 32, "GM": 8}, num_stages=4, num_warps=4),
    triton.Config({"BM": 128, "BN": 64, "BK": 32, "GM": 8}, num_stages=4, num_warps=4),
    triton.Config({"BM": 64, "BN": 128, "BK": 32, "GM": 8}, num_stages=4, num_warps=4),
    triton.Config({"BM": 32, "BN": 64, "BK": 32, "GM": 8}, num_stages=5, num_warps=2),
    triton.Config({"BM": 64, "BN": 32, "BK": 32, "GM": 8}, num_stages=5, num_warps=2),
]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def matmul_autotuned(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_pid_in_group = GM * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GM
    group_size_m = min(num_pid_m - first_pid_m, GM)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BM + tl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    offs_cm = pid_m * BM + tl.arange(0, BM)
    offs_cn = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def grid_formula(meta):
    """kernelpack's grid for one config: cdiv(M, BM) * cdiv(N, BN) programs
    (kernelpack.core.launchspec.evaluate_grid)."""
    m, n = ("arg", "M", None), ("arg", "N", None)
    return (("mul", ("ceil_div", m, meta["BM"]), ("ceil_div", n, meta["BN"])), 1, 1)


def triton_grid(meta):
    return (triton.cdiv(meta["M"], meta["BM"]) * triton.cdiv(meta["N"], meta["BN"]),)


# (M, N, K): square sizes and skinny ones, all multiples of 16 (the divisibility the bundle is compiled for)
SHAPES = [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
          (64, 4096, 4096), (4096, 64, 4096), (8192, 8192, 1024)]


def compile_bundle(arch: str = "sm_90a"):  # type: ignore[no-untyped-def]
    """Every config of matmul_autotuned as one kernelpack family (signature as the JIT derives it for 1024^3)."""
    import torch

    import kernelpack.frontends.triton.compile as kt

    a = torch.empty(1024, 1024, dtype=torch.float16, device="meta")
    example = (a, a, a, 1024, 1024, 1024, 1024, 1, 1024, 1, 1024, 1)
    return kt.compile(matmul_autotuned, example_args=example, arch=arch, name="matmul", grid=grid_formula)
