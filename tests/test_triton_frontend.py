"""kernelpack.triton with no GPU: typed ABIs, specializations, hidden scratch params and tensor descriptors,
each verified against the cubin of every arch it was compiled for."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("triton")

import frontend_builds as fb  # noqa: E402
import kernelpack.frontends.triton.compile as kt  # noqa: E402
from kernelpack.bundle.artifact import KernelArtifact  # noqa: E402
from kernelpack.bundle.kpack import Bundle  # noqa: E402
from kernelpack.core.abi import Abi, DType, Opaque, Param, Pointer, Scalar  # noqa: E402
from kernelpack.core.errors import AbiMismatch, CompileError  # noqa: E402
from kernelpack.core.packing import pack_params  # noqa: E402
from kernelpack.core.verify import verify_abi  # noqa: E402
from triton_kernels import add_kernel, axpy_kernel, scale_rows_kernel, tma_matmul_kernel  # noqa: E402


@pytest.fixture(scope="module")
def bundle(module_cache) -> Bundle:
    return fb.triton_bundle(module_cache)


def art(bundle: Bundle, label: str) -> KernelArtifact:
    return next(a for a in bundle if a.label == label)


def test_every_artifact_verifies_against_every_cubin(bundle):
    assert {a.label for a in bundle} == {"tr_add[f32]", "tr_add[f32_aligned]", "tr_add[f16]", "tr_add[f16_aligned]",
                                         "tr_axpy", "tr_matmul[m128]", "tr_matmul[m64]", "tr_tma_matmul",
                                         "tr_scale_rows"}
    for a in bundle:
        for b in a.binaries:
            assert b.cubin.arch == b.arch
            ck = b.cubin.kernel(a.entry)
            verify_abi(a.label, a.abi_for(b.arch), ck, b.arch)
            assert ck.reqntid == a.launch_for(b.arch).block == (32 * (8 if "m128" in a.label or "tma" in a.label
                                                                      else 4), 1, 1)
        assert a.provenance.frontend == "triton"
    assert {str(x) for x in art(bundle, "tr_add[f32]").archs} == {"sm_80", "sm_90a"}


@pytest.mark.parametrize("variant,dtype", [("f32", DType.f32), ("f16", DType.f16)])
def test_vector_add_abi_with_and_without_divisibility(bundle, variant, dtype):
    general, aligned = art(bundle, f"tr_add[{variant}]"), art(bundle, f"tr_add[{variant}_aligned]")
    for a, div in ((general, 1), (aligned, 16)):
        assert a.abi.args == (Param("x_ptr", Pointer(dtype), div), Param("y_ptr", Pointer(dtype), div),
                              Param("out_ptr", Pointer(dtype), div), Param("n", Scalar(DType.i32), div))
        assert [p.role for p in a.abi.params[4:]] == ["global_scratch", "profile_scratch"]
        assert a.launch.global_scratch == a.launch.profile_scratch == 0
    assert general.binary("sm_90a").data != aligned.binary("sm_90a").data  # the hint changed the code


def test_axpy_alpha_is_a_4_byte_float(bundle):
    a = art(bundle, "tr_axpy")
    assert a.abi.params[0] == Param("alpha", Scalar(DType.f32))
    for arch in a.archs:
        ck = a.cubin_kernel(arch)
        assert ck.params[0].size == 4 and ck.params[1].offset == 8  # then the pointer at its 8-byte alignment
    buf = pack_params(a.abi, [0.731, 0x1000, 0x2000, 7, 0, 0])
    assert buf[:4] == struct.pack("<f", 0.731)


def test_matmul_tile_configs_form_one_family(bundle):
    fam = bundle.families()["tr_matmul"]
    big, small = (art(bundle, "tr_matmul[m128]"), art(bundle, "tr_matmul[m64]"))
    assert len(fam) >= 2 and all([p.name for p in a.abi.params] == [p.name for p in small.abi.params] for a in fam)
    assert {p.name for p in big.abi.args if p.divisibility == 16} == set(fb.MATMUL_ALIGNED)
    assert all(p.divisibility == 1 for p in small.abi.params)
    assert big.launch.block == (256, 1, 1) and small.launch.block == (128, 1, 1)
    assert big.launch.dynamic_smem > small.launch.dynamic_smem > 0
    assert "constexpr BM=128" in big.provenance.options


def test_tma_matmul_abi_and_encoding_metadata(bundle):
    a = art(bundle, "tr_tma_matmul")
    names = [p.name for p in a.abi.params]
    assert names[:5] == ["a_desc", "a_desc_shape0", "a_desc_shape1", "a_desc_stride0", "a_desc_stride1"]
    assert a.abi.params[0].type == Opaque(128, 64, "CUtensorMap")
    assert [p.type for p in a.abi.params[1:5]] == [Scalar(DType.i32)] * 2 + [Scalar(DType.i64)] * 2
    assert names[15:] == ["K", "global_scratch", "profile_scratch"]
    descs = {d.arg: d for d in a.launch.tensor_descs}
    assert [d.lowering for d in a.launch.tensor_descs] == ["tma"] * 3
    # the box the host encodes is Triton's, not the declared block: inner dims clamp to the 128-byte swizzle span
    assert [descs[n].block_shape for n in ("a_desc", "b_desc", "c_desc")] == [(128, 64), (64, 64), (128, 64)]
    assert all(d.elem_size == 2 and d.elem_type == 6 and d.swizzle == 3 for d in descs.values())  # fp16, 128B
    assert a.launch.dynamic_smem > 48 * 1024
    ck = a.cubin_kernel("sm_90a")
    assert [p.offset for p in ck.params[:6]] == list(a.abi.offsets(ck.param_base)[:6])
    again = Bundle.from_bytes(Bundle.of(a).to_bytes()).artifacts[0]
    assert again.launch == a.launch


def test_tensor_descriptors_decompose_on_sm80_and_one_artifact_covers_both_lowerings(module_cache):
    b = kt.compile(tma_matmul_kernel, fb.TMA, constexprs={"BM": 128, "BN": 128, "BK": 64}, arch="sm_80",
                   cache=module_cache)
    a = b.artifacts[0]
    assert [d.lowering for d in a.launch.tensor_descs] == ["decomposed"] * 3
    assert [p.name for p in a.abi.params[:6]] == ["a_desc_base", "a_desc_shape0", "a_desc_shape1", "a_desc_stride0",
                                                  "a_desc_stride1", "a_desc_padding_nan"]  # 3.9 adds round_tf32
    (both,) = kt.compile(tma_matmul_kernel, fb.TMA, constexprs={"BM": 128, "BN": 128, "BK": 64},
                         arch=["sm_80", "sm_90a"], cache=module_cache)
    assert [d.lowering for d in both.launch_for("sm_80").tensor_descs] == ["decomposed"] * 3
    assert [d.lowering for d in both.launch_for("sm_90a").tensor_descs] == ["tma"] * 3
    assert both.abi_for("sm_80") == a.abi and both.abi_for("sm_90a").params[0].type == Opaque(128, 64, "CUtensorMap")
    for x in both.binaries:
        verify_abi(both.label, both.abi_for(x.arch), x.cubin.kernel(both.entry), x.arch)


def test_hidden_global_scratch_size_is_recorded(bundle, module_cache):
    a = art(bundle, "tr_scale_rows")
    assert a.abi.params[-2] == Param("global_scratch", Pointer(None), role="global_scratch")
    assert a.abi.params[-1] == Param("profile_scratch", Pointer(None), role="profile_scratch")
    assert a.abi.params[4] == Param("factor", Scalar(DType.f32))
    assert a.launch.global_scratch > 0 and a.launch.global_scratch_align >= 64  # device-built TMA descriptors
    assert Bundle.from_bytes(Bundle.of(a).to_bytes()).artifacts[0].launch == a.launch
    # where archs disagree on launch facts, each arch's binary carries its own: one artifact
    (both,) = kt.compile(scale_rows_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32",
                                             "factor": "fp32"},
                         constexprs={"BM": 32, "BN": 64}, arch=["sm_80", "sm_90a"], cache=module_cache)
    assert both.variant == "" and both.launch_for("sm_80").global_scratch == 0
    assert both.launch_for("sm_90a").global_scratch > 0


def test_scratch_without_its_param_is_refused(bundle):
    a = art(bundle, "tr_scale_rows")
    plain = Abi(tuple(p if p.role == "arg" else Param(p.name, p.type) for p in a.abi.params))
    with pytest.raises(AbiMismatch, match="global_scratch"):
        KernelArtifact(a.name, a.entry, plain, a.binaries, a.launch)


def test_wrong_scalar_width_fails_verification(bundle):
    a = art(bundle, "tr_axpy")
    wide = Abi((Param("alpha", Scalar(DType.f64)),) + a.abi.params[1:])
    with pytest.raises(AbiMismatch, match=r"parameter 0 'alpha' \(double\): expected 8 bytes, the cubin has 4"):
        KernelArtifact(a.name, a.entry, wide, a.binaries, a.launch)


def test_the_compile_cache_serves_a_second_compile(module_cache, monkeypatch):
    import triton

    fb.triton_axpy(module_cache)

    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("compiled again")

    monkeypatch.setattr(triton, "compile", boom)
    assert fb.triton_axpy(module_cache).artifacts[0].abi.params[0].type == Scalar(DType.f32)


SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


@pytest.mark.parametrize("signature,kwargs,match", [
    ({k: v for k, v in SIG.items() if k != "n"}, {}, r"add_kernel: parameter 3 'n' has no type in the signature"),
    ({**SIG, "m": "i32"}, {}, r"add_kernel: parameter\(s\) \['m'\] not in the kernel's parameters"),
    ({**SIG, "x_ptr": "*fp128"}, {}, r"add_kernel: parameter 0 'x_ptr': unsupported Triton type '\*fp128'"),
    ({**SIG, "n": "tensor"}, {}, r"add_kernel: parameter 3 'n': unsupported Triton type 'tensor'"),
    ({**SIG, "n": "fp32"}, {"specializations": [{"divisibility": ["n"]}]},
     r"add_kernel: parameter 'n' \(fp32\) cannot take a divisibility hint"),
    (SIG, {"specializations": [{"divisibility": {"x_ptr": 12}}]}, r"'x_ptr': divisibility must be a power of two"),
    (SIG, {"specializations": [{"bogus": 1}]}, r"add_kernel: unknown specialization key\(s\) \['bogus'\]"),
    (SIG, {"specializations": [{}, {}]}, r"add_kernel: specializations would share the variant name"),
    (["*fp32", "i32"], {}, r"add_kernel: signature lists 2 types for 5 parameters"),
])
def test_bad_signatures_raise_compile_errors_naming_kernel_and_parameter(module_cache, signature, kwargs, match):
    kwargs = {"constexprs": {"BLOCK": 1024}, **kwargs}
    with pytest.raises(CompileError, match=match):
        kt.compile(add_kernel, signature, arch="sm_80", cache=module_cache, **kwargs)


def test_missing_constexpr_and_triton_failures_are_compile_errors(module_cache):
    with pytest.raises(CompileError, match=r"add_kernel: constexpr parameter 4 'BLOCK' has no value: give it in "
                                           r"constexprs .*`constexprs = \{ BLOCK = \.\.\. \}`"):
        kt.compile(add_kernel, SIG, arch="sm_80", cache=module_cache)
    with pytest.raises(CompileError, match=r"kernel add_kernel \(sm_80\): Triton failed") as e:
        kt.compile(add_kernel, SIG, constexprs={"BLOCK": 1000}, arch="sm_80", cache=module_cache)  # not a power of two
    assert e.value.log
    with pytest.raises(CompileError, match="needs a @triton.jit function"):
        kt.compile(lambda x: x, SIG, arch="sm_80", cache=module_cache)
    with pytest.raises(CompileError, match=r"axpy_kernel: parameter 0 'alpha' has type 'fp32' and a constexpr"):
        kt.compile(axpy_kernel, {"alpha": "fp32"}, constexprs={"alpha": 2.0, "BLOCK": 64}, arch="sm_80",
                   cache=module_cache)


def test_num_ctas_becomes_the_cluster(module_cache):
    a = kt.compile(add_kernel, SIG, constexprs={"BLOCK": 1024}, num_ctas=2, arch="sm_90a",
                   cache=module_cache).artifacts[0]
    ck = a.cubin_kernel("sm_90a")
    assert a.launch.cluster == ck.cluster_dims == (2, 1, 1) and ck.explicit_cluster
    with pytest.raises(CompileError, match=r"add_kernel \(sm_80\): Triton failed: .*num_ctas"):
        kt.compile(add_kernel, SIG, constexprs={"BLOCK": 1024}, num_ctas=2, arch="sm_80", cache=module_cache)


PERSIST = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "NUM_SMS": "i32"}
ROWS = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32"}


def test_device_args_become_hidden_params_the_grid_formula_may_read(module_cache):
    from triton_kernels import persistent_double_kernel

    (a,) = kt.compile(persistent_double_kernel, PERSIST, constexprs={"BLOCK": 1024}, arch=["sm_80", "sm_90a"],
                      device_args={"NUM_SMS": "sm_count"}, grid=(("arg", "NUM_SMS", None), 1, 1), cache=module_cache)
    assert a.abi.params[3] == Param("NUM_SMS", Scalar(DType.i32), role="sm_count")
    assert [p.name for p in a.abi.args] == ["x_ptr", "out_ptr", "n"] and a.launch.grid == (("arg", "NUM_SMS", None),
                                                                                           1, 1)
    with pytest.raises(CompileError, match=r"device_args names NSMS, which is no runtime parameter"):
        kt.compile(persistent_double_kernel, PERSIST, constexprs={"BLOCK": 1024}, arch="sm_80",
                   device_args={"NSMS": "sm_count"}, cache=module_cache)
    with pytest.raises(CompileError, match=r"parameter 1 'out_ptr': .*role 'sm_count' fills a 32- or 64-bit integer"):
        kt.compile(persistent_double_kernel, PERSIST, constexprs={"BLOCK": 1024}, arch="sm_80",
                   device_args={"out_ptr": "sm_count"}, cache=module_cache)


def test_specializations_built_for_sm_counts_carry_their_requirement(module_cache):
    from triton_kernels import rows_per_sm_kernel

    specs = [{"constexprs": {"NUM_SMS": n}, "requires": {"sm_count": n}, "variant": f"sm{n}"} for n in (132, 108)]
    b = kt.compile(rows_per_sm_kernel, ROWS, constexprs={"BLOCK": 256}, arch="sm_90a", specializations=specs,
                   cache=module_cache)
    assert {a.variant: a.requirements for a in b} == {"sm132": (("sm_count", 132),), "sm108": (("sm_count", 108),)}
    with pytest.raises(CompileError, match=r"cannot require device property 'sms'"):
        kt.compile(rows_per_sm_kernel, ROWS, constexprs={"BLOCK": 256, "NUM_SMS": 132}, arch="sm_90a",
                   specializations=[{"requires": {"sms": 132}}], cache=module_cache)
