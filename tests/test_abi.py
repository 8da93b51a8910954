"""The typed ABI model: sizes, alignments, C spellings, layouts and a lossless JSON round-trip."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelpack.core.abi import Abi, DType, Field, Opaque, Param, Pointer, Scalar, Struct, TensorSpec
from kernelpack.core.errors import AbiError


def test_scalars_have_exact_width_and_c_spelling():
    assert Scalar(DType.f32).size == 4 and Scalar(DType.f32).c_type == "float"
    assert Scalar(DType.f64).size == 8 and Scalar(DType.f64).c_type == "double"
    assert Scalar(DType.i8).c_type == "int8_t" and Scalar(DType.u64).c_type == "uint64_t"
    assert Scalar(DType.f16).size == 2 and Scalar(DType.f16).c_type == "kp_f16"
    assert Scalar(DType.bf16).size == 2 and Scalar(DType.bf16).c_type == "kp_bf16"
    assert Scalar(DType.bool).size == 1


def test_fp8_is_an_element_type_stored_as_uint8_and_never_a_scalar():
    for dt in (DType.f8e4m3, DType.f8e5m2):
        assert dt.size == 1 and dt.is_float and dt.is_fp8 and not dt.is_integer
        assert Pointer(dt, const=True).c_type == "const uint8_t*"
        assert Abi.from_json(Abi((Param("x", Pointer(dt)),)).to_json()).params[0].type.pointee is dt
        spec = TensorSpec(dt, (None,), (1,))
        assert Struct.tensor_descriptor("t", spec).fields[0].type == Pointer(dt)
        with pytest.raises(AbiError, match=f"scalar of dtype {dt.value}: fp8 is an element type of pointers and "
                                           f"tensors only"):
            Scalar(dt)
    assert DType.parse("f8e4m3") is DType.f8e4m3 and DType.parse("f8e5m2") is DType.f8e5m2


def test_pointer_spelling_keeps_const_and_pointee():
    assert Pointer(DType.f32, const=True).c_type == "const float*"
    assert Pointer(None).c_type == "void*"
    assert Pointer(DType.bf16).size == 8 and Pointer(DType.bf16).align == 8


def test_tensor_descriptor_struct_drops_static_modes_and_follows_c_layout():
    spec = TensorSpec(DType.f16, shape=(None, 128), stride=(None, 1), shape_dtype=DType.i32, stride_dtype=DType.i64)
    s = Struct.tensor_descriptor("tensor_f16_2d", spec)
    assert [f.name for f in s.fields] == ["data", "shape0", "stride0"]
    assert s.field_offsets == (0, 8, 16)  # i32 shape then i64 stride realigned to 8
    assert s.size == 24 and s.align == 8


def test_struct_rejects_fields_that_contradict_its_tensor_spec():
    spec = TensorSpec(DType.f32, (None,), (1,))
    with pytest.raises(AbiError, match="tensor spec"):
        Struct("bad", (Field("data", Pointer(DType.f32)),), tensor=TensorSpec(DType.f32, (None,), (None,)))
    assert Struct.tensor_descriptor("ok", spec).size == 16


def test_offsets_apply_alignment_to_the_absolute_address():
    abi = Abi((Param("c", Scalar(DType.i8)), Param("m", Opaque(128, 64, "CUtensorMap"))))
    assert abi.offsets(0) == (0, 64)
    # a param buffer starting at 0x210 (528): the 64-aligned CUtensorMap lands at absolute 576 -> offset 48
    assert abi.offsets(0x210) == (0, 48)
    assert abi.param_bytes(0x210) == 176


def test_invalid_descriptions_raise_abi_error_naming_the_problem():
    with pytest.raises(AbiError, match="unknown dtype 'f8'"):
        Scalar("f8")  # type: ignore[arg-type]
    with pytest.raises(AbiError, match="not a C identifier"):
        Param("2x", Scalar(DType.i32))
    with pytest.raises(AbiError, match="duplicate parameter names: n"):
        Abi((Param("n", Scalar(DType.i32)), Param("n", Scalar(DType.i64))))
    with pytest.raises(AbiError, match="power of two"):
        Opaque(24, 3)
    with pytest.raises(AbiError, match="unknown ABI type kind"):
        Abi.from_json([{"name": "x", "type": {"kind": "float"}}])
    with pytest.raises(AbiError, match="must be a list"):
        Abi.from_json({"name": "x"})  # type: ignore[arg-type]


dtypes = st.sampled_from(list(DType))  # element types: every dtype, fp8 included
scalar_dtypes = st.sampled_from([d for d in DType if not d.is_fp8])
leaf_types = st.one_of(
    scalar_dtypes.map(Scalar),
    st.builds(Pointer, st.one_of(st.none(), dtypes), st.booleans(), st.sampled_from(["global", "generic"])),
    st.builds(lambda s, a: Opaque(s * a, a, "blob"), st.integers(1, 64), st.sampled_from([1, 2, 4, 8, 16, 64])),
)


@st.composite
def tensor_structs(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.one_of(st.none(), st.integers(1, 512))) for _ in range(rank))
    stride = tuple(draw(st.one_of(st.none(), st.integers(1, 512))) for _ in range(rank))
    spec = TensorSpec(draw(dtypes), shape, stride, draw(st.sampled_from([DType.i32, DType.i64])),
                      draw(st.sampled_from([DType.i32, DType.i64])), draw(st.sampled_from([1, 16])))
    return Struct.tensor_descriptor(f"t{draw(st.integers(0, 99))}", spec)


@st.composite
def abis(draw):
    n = draw(st.integers(0, 8))
    types = [draw(st.one_of(leaf_types, tensor_structs())) for _ in range(n)]
    return Abi(tuple(Param(f"p{i}", t, draw(st.sampled_from([1, 4, 16])),
                           draw(st.sampled_from(["arg", "arg", "global_scratch"]))) for i, t in enumerate(types)))


@settings(max_examples=200, deadline=None)
@given(abis())
def test_json_round_trip_is_lossless(abi):
    text = json.dumps(abi.to_json())
    back = Abi.from_json(json.loads(text))
    assert back == abi
    assert back.offsets(0x210) == abi.offsets(0x210)
    assert back.describe() == abi.describe()
