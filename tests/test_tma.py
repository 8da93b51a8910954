"""kernelpack.core.tma: tensor-descriptor specs and the pure host-side encoding (no GPU, no driver)."""

from __future__ import annotations

import pytest

from kernelpack.core.abi import Abi, DType, Param, Scalar
from kernelpack.core.errors import AbiError, LaunchError
from kernelpack.core.tma import TENSOR_MAP, TensorDescSpec, encode_args

PARAMS = ("a", "a_shape0", "a_shape1", "a_stride0", "a_stride1")
SPEC = TensorDescSpec("a", "fp16", (128, 64), "tma", PARAMS, elem_size=2, elem_type=6, swizzle=3)


def test_encode_args_reverses_dims_and_gives_byte_strides():
    got = encode_args(SPEC, 0x10000, (512, 256), (256, 1), kernel="mm")
    e = got.encode
    assert e is not None
    assert (e.data_type, e.rank, e.global_address) == (6, 2, 0x10000)
    assert e.global_dim == (256, 512) and e.global_strides == (512,) and e.box_dim == (64, 128)
    assert e.element_strides == (1, 1) and (e.interleave, e.swizzle, e.l2_promotion, e.oob_fill) == (0, 3, 2, 0)
    assert got.values == (None, 512, 256, 256, 1)  # the map, then shape (i32) and strides (i64) in elements
    assert not e.clear_bit21


def test_options_tf32_nan_padding_and_the_old_driver_fixup():
    f32 = TensorDescSpec("a", "fp32", (32, 32), "tma", PARAMS, elem_size=4, elem_type=7, swizzle=3)
    e = encode_args(f32, 0x10000, (64, 64), (64, 1), padding="nan", round_f32_to_tf32=True, driver_version=13000).encode
    assert e is not None and e.data_type == 11 and e.oob_fill == 1
    assert e.clear_bit21  # 16 KiB tensor on a 13.0 driver: Triton 3.9 clears bit 21
    big = encode_args(f32, 0x10000, (1024, 1024), (1024, 1), driver_version=13000).encode
    new = encode_args(f32, 0x10000, (64, 64), (64, 1), driver_version=13020).encode
    assert big is not None and new is not None and not big.clear_bit21 and not new.clear_bit21


@pytest.mark.parametrize("ptr,shape,strides,match", [
    (0x10008, (64, 64), (64, 1), "16-byte aligned base address"),
    (0x10000, (64, 64), (1, 64), "innermost stride must be 1"),
    (0x10000, (64, 63), (63, 1), "multiples of 16 bytes"),
    (0x10000, (64,), (1,), "expected a rank-2 tensor"),
])
def test_encode_args_refuses_what_tma_cannot_address(ptr, shape, strides, match):
    with pytest.raises(LaunchError, match=f"kernel mm: tensor descriptor a: .*{match}"):
        encode_args(SPEC, ptr, shape, strides, kernel="mm")


def test_decomposed_lowering_passes_the_tensor_twice():
    names = ("a_base", "a_shape0", "a_shape1", "a_stride0", "a_stride1", "a_padding_nan", "a_round_tf32",
             "a_dshape0", "a_dshape1", "a_dstride0", "a_dstride1")
    spec = TensorDescSpec("a", "fp16", (128, 64), "decomposed", names)
    got = encode_args(spec, 0x1000, (10, 20), (20, 1), padding="nan")
    assert got.encode is None and got.values == (0x1000, 10, 20, 20, 1, True, False, 10, 20, 20, 1)


def test_spec_json_round_trip_and_abi_check():
    assert TensorDescSpec.from_json(SPEC.to_json()) == SPEC
    abi = Abi((Param("a", TENSOR_MAP), Param("a_shape0", Scalar(DType.i32)), Param("a_shape1", Scalar(DType.i32)),
               Param("a_stride0", Scalar(DType.i64)), Param("a_stride1", Scalar(DType.i64))))
    SPEC.check(abi, "mm")
    wrong = Abi(abi.params[:3] + (Param("a_stride0", Scalar(DType.i32)),) + abi.params[4:])
    with pytest.raises(AbiError, match="kernel mm: tensor descriptor a: param a_stride0"):
        SPEC.check(wrong, "mm")
    with pytest.raises(AbiError, match="fills 5 params, the spec names 2"):
        TensorDescSpec("a", "fp16", (128, 64), "tma", ("a", "b"), elem_size=2, elem_type=6, swizzle=3)


def test_triton_3_6_decomposes_with_one_flag():
    names = ("a_base", "a_shape0", "a_stride0", "a_padding_nan", "a_dshape0", "a_dstride0")
    spec = TensorDescSpec("a", "fp32", (64,), "decomposed", names, flags=("padding_nan",))
    assert encode_args(spec, 0x1000, (10,), (1,)).values == (0x1000, 10, 1, False, 10, 1)
    assert TensorDescSpec.from_json(spec.to_json()) == spec
