"""CUDA C++ frontend: typed ABIs derived from real compiles, verified on every arch, errors with logs."""

from __future__ import annotations

import pytest

from kernelpack.core.abi import Abi, DType, Opaque, Param, Pointer, Scalar
from kernelpack.core.errors import AbiMismatch, CompileError
from kernelpack.frontends.cuda import compile as cuda
from kernelpack.frontends.cuda.toolkit import nvrtc_available
from toolchain_support import needs_cuda_compiler, needs_nvcc

pytestmark = needs_cuda_compiler

SOURCE = r"""
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
namespace ops {
template <typename T, int VEC>
__global__ void copy(const T* __restrict__ src, T* dst, unsigned long long n) {
    unsigned long long i = (blockIdx.x * blockDim.x + threadIdx.x) * (unsigned long long)VEC;
    for (int v = 0; v < VEC; ++v) if (i + v < n) dst[i + v] = src[i + v];
}
}
typedef float real;
#define KERNEL extern "C" __global__
KERNEL void mixed(char c, short s, double d, real f, unsigned char u, __half h, __nv_bfloat16 b, bool flag,
                  int* out) {
    if (flag) out[0] = c + s + (int)d + (int)f + u + (int)__half2float(h) + (int)__bfloat162float(b);
}
KERNEL void tma(char tag, const __grid_constant__ CUtensorMap map, float* out) {
    if (tag) out[0] = (float)((const char*)&map)[0];
}
struct Big { double v[625]; };
KERNEL void big(Big b, int i, double* out) { out[0] = b.v[i]; }
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
__global__ void __cluster_dims__(2, 1, 1) clustered(float* x) { x[blockIdx.x] = 1.f; }
#endif
"""


def test_template_kernels_become_variants_of_one_family_typed_from_the_mangled_name(fresh_cache):
    b = cuda.compile(SOURCE, ["ops::copy<float, 4>", "ops::copy<__half, 8>"], arch=["sm_80", "sm_90a"],
                     cache=fresh_cache)
    assert [a.label for a in b] == ["copy[float_4]", "copy[half_8]"]
    f32 = b.artifacts[0]
    assert f32.abi == Abi((Param("src", Pointer(DType.f32, const=True)), Param("dst", Pointer(DType.f32)),
                           Param("n", Scalar(DType.u64))))
    assert b.artifacts[1].abi.params[0].type == Pointer(DType.f16, const=True)
    assert [str(a) for a in f32.archs] == ["sm_80", "sm_90a"]


def test_extern_c_kernels_are_typed_through_the_probe_with_macros_and_typedefs(fresh_cache):
    (mixed,) = cuda.compile(SOURCE, ["mixed"], arch="sm_90a", cache=fresh_cache)
    assert [(p.name, p.type) for p in mixed.abi.params] == [
        ("c", Scalar(DType.i8)), ("s", Scalar(DType.i16)), ("d", Scalar(DType.f64)), ("f", Scalar(DType.f32)),
        ("u", Scalar(DType.u8)), ("h", Scalar(DType.f16)), ("b", Scalar(DType.bf16)), ("flag", Scalar(DType.bool)),
        ("out", Pointer(DType.i32)),
    ]
    assert mixed.entry == "mixed"
    assert "__kp_probe" not in {k.name for k in mixed.binaries[0].cubin.kernels}


def test_tensor_map_is_an_aligned_opaque_and_offsets_verify_on_every_arch(fresh_cache):
    (tma,) = cuda.compile(SOURCE, ["tma"], arch=["sm_80", "sm_90a", "sm_100a"], cache=fresh_cache)
    assert tma.abi.params[1].type == Opaque(128, 128, "CUtensorMap")  # alignas(128) since CUDA 13
    for b in tma.binaries:
        ck = b.cubin.kernel("tma")
        assert tuple(p.offset for p in ck.params) == tma.abi.offsets(ck.param_base)


def test_a_5000_byte_struct_by_value_is_sized_from_the_cubin(fresh_cache):
    (big,) = cuda.compile(SOURCE, ["big"], arch="sm_90a", cache=fresh_cache)
    assert big.abi.params[0].type.size == 5000 and big.abi.params[0].type.align == 8


def test_cluster_dims_are_read_from_the_cubin(fresh_cache):
    (k,) = cuda.compile(SOURCE, ["clustered"], arch="sm_90a", cache=fresh_cache)
    ck = k.cubin_kernel("sm_90a")
    assert ck.cluster_dims == (2, 1, 1) and ck.explicit_cluster


def test_a_wrong_user_signature_is_caught_by_verification(fresh_cache):
    with pytest.raises(AbiMismatch, match=r"kernel tma \(sm_90a\): parameter 1 'map'.*expected 8 bytes.*128"):
        cuda.compile(SOURCE, ["tma"], arch="sm_90a", cache=fresh_cache,
                     signatures={"tma": "char tag, void* map, float* o"})
    wrong_width = Abi((Param("alpha", Scalar(DType.f64)), Param("x", Pointer(DType.f32))))
    with pytest.raises(AbiMismatch, match="2 parameters"):
        cuda.compile(SOURCE, ["tma"], arch="sm_90a", cache=fresh_cache, signatures={"tma": wrong_width})


def test_an_explicit_text_signature_is_used_and_verified(fresh_cache):
    (k,) = cuda.compile(SOURCE, ["tma"], arch="sm_90a", cache=fresh_cache,
                        signatures={"tma": "signed char kind, CUtensorMap m, float* __restrict__ result"})
    assert [p.name for p in k.abi.params] == ["kind", "m", "result"]


def test_compile_errors_carry_the_compiler_log(fresh_cache):
    with pytest.raises(CompileError) as e:
        cuda.compile("extern \"C\" __global__ void k(int* x) { x[0] = undefined_name; }", ["k"], arch="sm_90a",
                     cache=fresh_cache)
    assert "undefined_name" in str(e.value) and e.value.log


def test_unknown_kernel_names_are_reported_with_the_available_entries(fresh_cache):
    with pytest.raises(CompileError, match="nope"):
        cuda.compile(SOURCE, ["nope"], arch="sm_90a", cache=fresh_cache)


def test_options_reach_the_compiler(fresh_cache):
    src = "extern \"C\" __global__ void k(float* x) { float a[64];" \
          " for (int i = 0; i < 64; ++i) a[i] = x[i * threadIdx.x]; float s = 0;" \
          " for (int i = 63; i >= 0; --i) s += a[(i * 7 + (int)x[i]) & 63]; x[threadIdx.x] = s; }"
    (k,) = cuda.compile(src, ["k"], arch="sm_90a", cache=fresh_cache, maxrregcount=24, defines={"UNUSED": 1},
                        lineinfo=True)
    ck = k.cubin_kernel("sm_90a")
    assert ck.max_registers == 24 and ck.registers <= 24
    assert ck.stack_bytes > 0  # the local array lives in local memory
    assert "--maxrregcount=24" in k.provenance.options


def test_a_second_compile_is_served_from_the_cache(fresh_cache):
    a = cuda.compile(SOURCE, ["mixed"], arch="sm_90a", cache=fresh_cache)
    entries = list(fresh_cache.root.rglob("*"))
    b = cuda.compile(SOURCE, ["mixed"], arch="sm_90a", cache=fresh_cache)
    assert a.to_bytes() == b.to_bytes()
    assert list(fresh_cache.root.rglob("*")) == entries


@needs_nvcc
def test_nvcc_backend_gives_the_same_abis_as_nvrtc(fresh_cache):
    names = ["ops::copy<float, 4>", "mixed", "tma"]
    via_nvcc = cuda.compile(SOURCE, names, arch="sm_90a", compiler="nvcc", cache=fresh_cache)
    assert via_nvcc.artifacts[0].provenance.compiler.startswith("nvcc")
    if nvrtc_available():
        via_nvrtc = cuda.compile(SOURCE, names, arch="sm_90a", compiler="nvrtc", cache=fresh_cache)
        assert [a.abi for a in via_nvcc] == [a.abi for a in via_nvrtc]
        assert [a.entry for a in via_nvcc] == [a.entry for a in via_nvrtc]


LIB_HEADER = r"""
#pragma once
#include <cuda_fp16.h>
namespace lib {
template <typename T, float (*F)(const float&), unsigned VEC>
__global__ void act(T* __restrict__ out, const T* __restrict__ in, int d) {
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    for (unsigned v = 0; v < VEC; ++v) if (i + (int)v < d) out[i + v] = (T)F((float)in[i + v]);
}
}
"""


@needs_nvcc
def test_nvcc_finds_each_instance_by_its_own_spelling_and_reads_names_from_the_header(tmp_path, fresh_cache):
    # nvcc has no lowered names: half is __half, 8 is 8u and &silu an expression in the symbols; each instance is
    # found through its probe kernel (whose mangled name numbers the substitutions differently); the parameter
    # names come from the included header that declares the template
    (tmp_path / "lib.cuh").write_text(LIB_HEADER)
    source = ('#include "lib.cuh"\n__device__ float silu(const float& x) { return x / (1.f + __expf(-x)); }\n'
              "__device__ float ident(const float& x) { return x; }\n")
    names = {"act_h": "lib::act<half, silu, 8>", "act_f": "lib::act<float, silu, 8>",
             "id_h": "lib::act<half, ident, 8>"}
    b = cuda.compile(source, names, arch="sm_90a", compiler="nvcc", include_dirs=[str(tmp_path)], cache=fresh_cache)
    by = {a.name: a for a in b}
    assert len({a.entry for a in b}) == 3
    assert "6__half" in by["act_h"].entry and "4silu" in by["act_h"].entry
    assert "5ident" in by["id_h"].entry and "Lj8E" in by["act_f"].entry
    assert [p.name for p in by["act_h"].abi.params] == ["out", "in", "d"]
    assert by["act_f"].abi.params[0].type == Pointer(DType.f32)
    assert by["act_h"].abi.params[1].type == Pointer(DType.f16, const=True)
