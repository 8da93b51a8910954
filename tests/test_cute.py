"""CuTe DSL frontend without a GPU: ABI derivation for every argument kind, kernel-level artifacts with grid
formulas for several archs, and the stride-width mismatch CuTe's own header generator makes."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pytest

from cute_support import example, need_cute
from kernelpack import AbiMismatch, CompileError, DType, Pointer, Scalar, Struct
from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.abi import Abi, Field, Param, TensorSpec
from kernelpack.core.launchspec import LaunchSpec, evaluate_grid

need_cute()
import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
from cutlass import Constexpr, Float32, Int32, Uint32  # noqa: E402
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream, make_fake_tensor, make_ptr  # noqa: E402
from cutlass.cute.typing import SymInt  # noqa: E402

import kernelpack.cute as kc  # noqa: E402
from kernelpack.frontends.cute.llvm import check_host_abi, host_arg_types  # noqa: E402

THREE = Int32(3)


@pytest.fixture(scope="session")
def ew_bundle() -> Bundle:
    ea = example("elementwise_add")
    return Bundle.of(*(kc.compile(ea.elementwise_add, *ea.example_args(dt), arch=["sm_80", "sm_90a"], name="ew_add",
                                  variant=v) for dt, v in ((cutlass.Float32, "f32"), (cutlass.BFloat16, "bf16"))))


@pytest.fixture(scope="session")
def policy_bundle() -> Bundle:
    ps = example("policy_scale")
    return kc.compile(ps.ScaleShift(), *ps.example_args(), arch=["sm_80", "sm_90a"], name="scale_shift")


def names_types(fn, *args) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(lf.name, lf.type.c_type) for lf in kc.host_leaves(fn, args)]


# ------------------------------------------------------------------ ABI derivation, per argument kind


def test_tensor_widths_come_from_the_type_not_use_32bit_stride() -> None:
    def f(t: cute.Tensor) -> None: ...

    t = make_fake_tensor(Float32, (SymInt(width=64), 64), stride=(SymInt(), 1), assumed_align=16)
    (leaf,) = kc.host_leaves(f, (t,))
    assert isinstance(leaf.type, Struct) and leaf.type.tensor is not None
    spec = leaf.type.tensor
    assert spec.shape == (None, 64) and spec.stride == (None, 1)
    assert (spec.shape_dtype, spec.stride_dtype, spec.align) == (DType.i64, DType.i32, 16)
    assert [f.name for f in leaf.type.fields] == ["data", "shape0", "stride0"]
    assert leaf.type.size == 24  # {ptr; i64; i32} + padding


def test_static_modes_vanish_and_32bit_strides() -> None:
    def f(t: cute.Tensor) -> None: ...

    full = make_fake_compact_tensor(cutlass.Float16, (128, 64), stride_order=(1, 0))
    (leaf,) = kc.host_leaves(f, (full,))
    assert [fl.name for fl in leaf.type.fields] == ["data"]
    narrow = make_fake_compact_tensor(cutlass.Float16, (SymInt(), SymInt()), stride_order=(1, 0), use_32bit_stride=True)
    (leaf,) = kc.host_leaves(f, (narrow,))
    assert [(fl.name, fl.type.c_type) for fl in leaf.type.fields] == [
        ("data", "kp_f16*"), ("shape0", "int32_t"), ("shape1", "int32_t"), ("stride0", "int32_t")]


def test_scalars_pointers_streams_constexpr_and_none() -> None:
    def f(x: Int32, y: Float32, u: Uint32, p: cute.Pointer, opt: cute.Tensor | None, s: typing.Any,
          k: Constexpr[int], n: Int32 = THREE) -> None: ...

    ptr = make_ptr(cutlass.Float16, 0x1000, cute.AddressSpace.gmem, assumed_align=16)
    leaves = kc.host_leaves(f, (Int32(1), Float32(2.0), 7, ptr, None, make_fake_stream(), 4))
    assert [(lf.name, lf.type) for lf in leaves] == [
        ("x", Scalar(DType.i32)), ("y", Scalar(DType.f32)), ("u", Scalar(DType.u32)), ("p", Pointer(DType.f16)),
        ("s", Pointer(None)), ("n", Scalar(DType.i32))]
    assert [lf.stream for lf in leaves] == [False] * 4 + [True, False]


def test_fp8_tensors_and_pointers_are_fp8_element_types() -> None:
    """NVIDIA's fp8 formats (Float8E4M3FN, Float8E5M2) are kernelpack's f8e4m3/f8e5m2 elements (not raw u8), so a
    torch float8 tensor matches them; the MX scale format Float8E8M0FNU stays raw bytes; an fp8 scalar is refused."""
    def f(a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, p: cute.Pointer) -> None: ...

    a = make_fake_compact_tensor(cutlass.Float8E4M3FN, (SymInt(), 64), stride_order=(1, 0))
    b = make_fake_compact_tensor(cutlass.Float8E5M2, (SymInt(), 64), stride_order=(1, 0))
    c = make_fake_compact_tensor(cutlass.Float8E8M0FNU, (SymInt(), 64), stride_order=(1, 0))
    p = make_ptr(cutlass.Float8E4M3FN, 0x1000, cute.AddressSpace.gmem, assumed_align=16)
    a_t, b_t, c_t, p_t = (lf.type for lf in kc.host_leaves(f, (a, b, c, p)))
    assert (a_t.tensor.dtype, b_t.tensor.dtype, c_t.tensor.dtype) == (DType.f8e4m3, DType.f8e5m2, DType.u8)
    assert a_t.fields[0].type == Pointer(DType.f8e4m3) and a_t.fields[0].type.c_type == "uint8_t*"
    assert p_t == Pointer(DType.f8e4m3)

    def g(x: cutlass.Float8E4M3FN) -> None: ...

    with pytest.raises(CompileError, match=r"a scalar of MLIR type f8E4M3FN: fp8 \(f8e4m3\) is an element type of "
                                           r"tensors and pointers only"):
        kc.host_leaves(g, (cutlass.Float8E4M3FN(1.0),))


def test_a_driver_custream_is_the_stream_parameter() -> None:
    """liger's launchers pass ``cuda.bindings.driver.CUstream(torch stream)``: CuTe's JIT takes it as its stream;
    kernelpack derives the same stream parameter (it used to refuse it: "cannot pass a CUstream")."""
    import cuda.bindings.driver as cuda

    def f(x: Int32, stream: cuda.CUstream) -> None: ...

    leaves = kc.host_leaves(f, (Int32(1), cuda.CUstream(0)))
    assert [(lf.name, lf.type, lf.stream) for lf in leaves] == [("x", Scalar(DType.i32), False),
                                                                ("stream", Pointer(None), True)]


def test_self_receiver_and_custom_dynamic_object() -> None:
    ps = example("policy_scale")
    assert names_types(ps.ScaleShift(), *ps.example_args()) == [
        ("x", "tensor_f32_d_1"), ("y", "tensor_f32_d_1"), ("n", "int32_t"), ("alpha", "float"), ("period", "int32_t"),
        ("affine_offset", "float"), ("affine_lo", "float"), ("affine_hi", "float")]


class Epilogue(typing.NamedTuple):
    alpha: Float32
    bias: cute.Tensor
    beta: Float32 | None = None


@dataclasses.dataclass
class Sched:
    tiles: Int32
    swizzle: Constexpr[int] = 8


def test_namedtuples_and_dataclasses_are_flattened_and_none_dropped() -> None:
    def f(epi: Epilogue, sched: Sched) -> None: ...

    bias = make_fake_compact_tensor(Float32, (SymInt(),))
    got = names_types(f, Epilogue(Float32(1.0), bias), Sched(Int32(4)))
    assert got == [("epi_alpha", "float"), ("epi_bias", "tensor_f32_d_1"), ("sched_tiles", "int32_t")]


def test_plain_python_number_without_annotation_gets_the_dsl_type() -> None:
    def f(x, y: int, z) -> None: ...  # type: ignore[no-untyped-def]

    assert names_types(f, 3, 4, 0.5) == [("x", "int32_t"), ("y", "int32_t"), ("z", "float")]  # as cute.compile does


# ------------------------------------------------------------------ kernel-level artifacts


def test_elementwise_add_kernel_level_multi_arch(ew_bundle: Bundle) -> None:
    arts = {a.variant: a for a in ew_bundle}
    assert set(arts) == {"f32", "bf16"} and all(a.name == "ew_add" for a in arts.values())
    for v, a in arts.items():
        assert [str(x) for x in a.archs] == ["sm_80", "sm_90a"]
        assert a.abi.describe() == ", ".join(f"tensor_{v}_dxd_Dx1 {n}" for n in "abc")
        assert a.launch.block == (32, 8, 1)
        assert a.launch.dynamic_smem == 0
        assert a.launch.grid == (("ceil_div", ("arg", "c", "shape1"), 32), ("ceil_div", ("arg", "c", "shape0"), 8), 1)
        assert a.provenance.frontend == "cute" and a.provenance.source_sha256
        for arch in a.archs:
            assert a.cubin_kernel(arch).reqntid == (32, 8, 1)
    grid = [evaluate_grid(e, {("c", "shape0"): 100, ("c", "shape1"): 33}) for e in arts["f32"].launch.grid]
    assert grid == [2, 13, 1]


def test_bundle_roundtrip_keeps_grid_formula(ew_bundle: Bundle, policy_bundle: Bundle) -> None:
    both = Bundle.of(ew_bundle, policy_bundle)
    again = Bundle.from_bytes(both.to_bytes())
    assert [a.launch for a in again] == [a.launch for a in both]
    assert again.to_bytes() == both.to_bytes()


def test_policy_kernel_level(policy_bundle: Bundle) -> None:
    (a,) = policy_bundle
    assert [p.name for p in a.abi] == ["x", "y", "n", "alpha", "period", "affine_offset", "affine_lo", "affine_hi"]
    assert a.launch.grid == (("ceil_div", ("arg", "n", None), 128), 1, 1)
    assert a.launch.block == (128, 1, 1)


def test_grid_formula_must_name_integer_arguments(ew_bundle: Bundle) -> None:
    a = next(iter(ew_bundle))
    bad = LaunchSpec(block=a.launch.block, grid=(("ceil_div", ("arg", "a", "data"), 4), 1, 1))
    with pytest.raises(Exception, match="not an integer argument"):
        KernelArtifact(a.name, a.entry, a.abi, a.binaries, bad, a.provenance, a.variant)


def test_host_only_kernels_are_refused_at_kernel_level() -> None:
    hg = example("hopper_gemm")
    with pytest.raises(CompileError, match="kernelpack.cute.export"):
        kc.compile(hg.HopperGemm(), *hg.example_args(cutlass.Float16), arch="sm_90a", name="gemm")


# ------------------------------------------------------------------ the stride-width catch


def _cute_header_abi(header: str, names: list[str]) -> Abi:
    """The ABI CuTe's own export_to_c header declares (its tensor structs), parsed."""
    params = []
    for n in names:
        m = re.search(r"typedef struct \{\s*void \*data;\s*(\w+) dynamic_shapes\[(\d+)\];\s*(\w+) "
                      rf"dynamic_strides\[(\d+)\];\s*\}} \w+_Tensor_{n}_t;", header)
        assert m, header
        st, ns, rt, nr = m.group(1), int(m.group(2)), m.group(3), int(m.group(4))
        dt = {"int32_t": Scalar(DType.i32), "int64_t": Scalar(DType.i64)}
        fields = [Field("data", Pointer(DType.f32))] + [Field(f"shape{i}", dt[st]) for i in range(ns)] + [
            Field(f"stride{i}", dt[rt]) for i in range(nr)]
        params.append(Param(n, Struct(f"hdr_{n}", tuple(fields))))
    return Abi(tuple(params))


def test_cute_header_stride_width_is_caught(tmp_path: Path) -> None:
    """make_fake_tensor(..., stride=(SymInt(), 1)) has a 32-bit stride; CuTe's header says int64_t."""
    ea = example("elementwise_add")
    ts = tuple(make_fake_tensor(Float32, (SymInt(), 64), stride=(SymInt(), 1)) for _ in range(3))
    (art,) = kc.compile(ea.elementwise_add, *ts, arch="sm_90a", name="ew_narrow")  # derived ABI: verified
    assert art.abi.params[0].type.size == 16  # {float*; i32 shape0; i32 stride0}

    from kernelpack.frontends.cute.compiler import _load_cute_runtime

    _load_cute_runtime()
    compiled = cute.compile(ea.elementwise_add, *ts, options="--gpu-arch sm_90a")
    compiled.export_to_c(str(tmp_path), "hdr")
    header_abi = _cute_header_abi((tmp_path / "hdr.h").read_text(), ["a", "b", "c"])
    assert header_abi.params[0].type.size == 24  # CuTe's int64_t stride
    with pytest.raises(AbiMismatch, match="parameter 0 'a'"):
        KernelArtifact("ew_narrow", art.entry, header_abi, art.binaries, art.launch, art.provenance)
    llvm_types = host_arg_types(compiled.ir_module, compiled.function_name)
    with pytest.raises(AbiMismatch, match="'a'"):
        check_host_abi("elementwise_add", ["a", "b", "c"], [p.type for p in header_abi.params], llvm_types)


def test_same_size_width_mismatch_is_caught_on_the_host_function() -> None:
    """Where a wrong-width field does not change the struct size, the LLVM signature still tells."""
    ea = example("elementwise_add")
    ts = tuple(make_fake_tensor(Float32, (SymInt(), SymInt()), stride=(SymInt(), 1)) for _ in range(3))
    compiled = cute.compile(ea.elementwise_add, *ts, options="--gpu-arch sm_90a")
    derived = [lf.type for lf in kc.host_leaves(ea.elementwise_add, ts)]
    llvm_types = host_arg_types(compiled.ir_module, compiled.function_name)
    check_host_abi("elementwise_add", ["a", "b", "c"], derived, llvm_types)
    wide = TensorSpec(DType.f32, (None, None), (None, 1), DType.i32, DType.i64)
    wrong = [Struct.tensor_descriptor("wide", wide)] * 3
    assert wrong[0].size == derived[0].size
    with pytest.raises(AbiMismatch, match="stride|layout"):
        check_host_abi("elementwise_add", ["a", "b", "c"], wrong, llvm_types)


def test_arch_is_required() -> None:
    ea = example("elementwise_add")
    with pytest.raises(Exception, match="arch"):
        kc.compile(ea.elementwise_add, *ea.example_args(Float32), arch=[])
