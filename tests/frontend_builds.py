"""The Triton and cuTile bundles the frontend tests check here and the GPU tests run on the H200.

Built on the GPU-less machine (`scripts/gpu.py prepare frontends` writes them to .gpu/frontends/) because the GPU
machine has neither cuTile nor Triton 3.9.
"""

from __future__ import annotations

from kernelpack.bundle.kpack import Bundle
from kernelpack.core.cache import CompileCache

ARCHS = ("sm_80", "sm_90a")
F32 = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
F16 = {"x_ptr": "*fp16", "y_ptr": "*fp16", "out_ptr": "*fp16"}
MATMUL = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32",
          "stride_ak": "i32", "stride_bk": "i32", "stride_bn": "i32", "stride_cm": "i32", "stride_cn": "i32"}
MATMUL_ALIGNED = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"]
TMA = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 128]>",
       "c_desc": "tensordesc<fp16[128, 128]>", "K": "i32"}


def triton_add(cache: CompileCache | None = None) -> Bundle:
    import kernelpack.frontends.triton.compile as kt
    from triton_kernels import add_kernel

    return kt.compile(add_kernel, F32, constexprs={"BLOCK": 1024}, arch=ARCHS, name="tr_add", cache=cache,
                      specializations=[{"variant": "f32"}, {"variant": "f32_aligned", "divisibility": "all"},
                                       {"variant": "f16", "signature": F16},
                                       {"variant": "f16_aligned", "signature": F16, "divisibility": "all"}])


def triton_axpy(cache: CompileCache | None = None) -> Bundle:
    import kernelpack.frontends.triton.compile as kt
    from triton_kernels import axpy_kernel

    return kt.compile(axpy_kernel, {"alpha": "fp32", "x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"},
                      constexprs={"BLOCK": 1024}, arch=ARCHS, name="tr_axpy", cache=cache)


def triton_matmul(cache: CompileCache | None = None) -> Bundle:
    import kernelpack.frontends.triton.compile as kt
    from triton_kernels import matmul_kernel

    big = {"variant": "m128", "constexprs": {"BM": 128, "BN": 128, "BK": 32}, "num_warps": 8,
           "divisibility": MATMUL_ALIGNED}
    small = {"variant": "m64", "constexprs": {"BM": 64, "BN": 64, "BK": 32}, "num_warps": 4}
    return kt.compile(matmul_kernel, MATMUL, arch=ARCHS, name="tr_matmul", cache=cache, specializations=[big, small])


def triton_tma(cache: CompileCache | None = None) -> Bundle:
    import kernelpack.frontends.triton.compile as kt
    from triton_kernels import tma_matmul_kernel

    return kt.compile(tma_matmul_kernel, TMA, constexprs={"BM": 128, "BN": 128, "BK": 64}, num_warps=8,
                      arch="sm_90a", name="tr_tma_matmul", cache=cache)


def triton_scratch(cache: CompileCache | None = None) -> Bundle:
    import kernelpack.frontends.triton.compile as kt
    from triton_kernels import scale_rows_kernel

    return kt.compile(scale_rows_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32", "factor": "fp32"},
                      constexprs={"BM": 32, "BN": 64}, arch="sm_90a", name="tr_scale_rows", cache=cache,
                      specializations=[{"divisibility": ["x_ptr", "y_ptr", "N"]}])


def triton_bundle(cache: CompileCache | None = None) -> Bundle:
    return Bundle.of(triton_add(cache), triton_axpy(cache), triton_matmul(cache), triton_tma(cache),
                     triton_scratch(cache))


def cutile_vadd(cache: CompileCache | None = None) -> Bundle:
    import cuda.tile as ct

    import kernelpack.frontends.cutile.compile as kc
    from cutile_kernels import array, vadd

    return kc.compile(vadd, {"f32": [array(ct.float32, 1)] * 3 + [1024], "f16": [array(ct.float16, 1)] * 3 + [1024]},
                      arch=ARCHS, name="ct_vadd", cache=cache)


def cutile_matmul(cache: CompileCache | None = None) -> Bundle:
    import cuda.tile as ct
    from cuda.tile.compilation import ScalarConstraint

    import kernelpack.frontends.cutile.compile as kc
    from cutile_kernels import array, matmul

    rowmajor = {"stride_constant": (None, 1)}
    sig = [array(ct.float16, 2, **rowmajor), array(ct.float16, 2, **rowmajor), array(ct.float32, 2, **rowmajor),
           ScalarConstraint(ct.float32), 64, 64, 32]
    return kc.compile(matmul, [sig], arch=ARCHS, name="ct_matmul", cache=cache)


def cutile_bundle(cache: CompileCache | None = None) -> Bundle:
    return Bundle.of(cutile_vadd(cache), cutile_matmul(cache))
