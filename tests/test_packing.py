"""The reference packer writes each value at the ABI offset with its exact width, or refuses it clearly."""

from __future__ import annotations

import struct

import pytest

from kernelpack.core.abi import Abi, DType, Opaque, Param, Pointer, Scalar, Struct, TensorSpec
from kernelpack.core.errors import KernelpackError
from kernelpack.core.packing import bf16_bits, pack_params


def test_fp32_scalars_stay_four_bytes_and_land_at_their_offsets():
    abi = Abi((Param("alpha", Scalar(DType.f32)), Param("x", Pointer(DType.f32)), Param("n", Scalar(DType.i32))))
    buf = pack_params(abi, [1.5, 0xDEAD0000, 7], kernel="axpy")
    assert len(buf) == 20
    assert struct.unpack_from("<f", buf, 0)[0] == 1.5
    assert struct.unpack_from("<Q", buf, 8)[0] == 0xDEAD0000
    assert struct.unpack_from("<i", buf, 16)[0] == 7


def test_tensor_descriptor_struct_and_aligned_opaque_follow_the_param_base():
    spec = TensorSpec(DType.f16, (None, 64), (None, 1), DType.i32, DType.i64)
    abi = Abi((Param("t", Struct.tensor_descriptor("t2", spec)), Param("c", Scalar(DType.i8)),
               Param("m", Opaque(128, 128, "CUtensorMap"))))
    buf = pack_params(abi, [{"data": 0x1000, "shape0": 3, "stride0": 64}, -1, bytes(range(128))], base=0x210)
    assert struct.unpack_from("<QiIq", buf, 0) == (0x1000, 3, 0, 64)
    assert struct.unpack_from("<b", buf, 24)[0] == -1
    off = abi.offsets(0x210)[2]
    assert (0x210 + off) % 128 == 0 and buf[off:off + 128] == bytes(range(128))


def test_half_types_are_packed_as_their_bits():
    abi = Abi((Param("h", Scalar(DType.f16)), Param("b", Scalar(DType.bf16))))
    buf = pack_params(abi, [1.0, 1.0])
    assert buf == struct.pack("<e", 1.0) + struct.pack("<H", 0x3F80)
    assert bf16_bits(3.140625) == 0x4049 and bf16_bits(float("inf")) == 0x7F80


def test_bad_values_are_refused_naming_kernel_and_parameter():
    abi = Abi((Param("n", Scalar(DType.u8)), Param("x", Pointer(DType.f32)), Param("m", Opaque(16, 8))))
    with pytest.raises(KernelpackError, match="kernel k: parameter 0 'n': 300 does not fit uint8_t"):
        pack_params(abi, [300, 0, bytes(16)], kernel="k")
    with pytest.raises(KernelpackError, match="parameter 1 'x': expected a device pointer"):
        pack_params(abi, [1, "ptr", bytes(16)], kernel="k")
    with pytest.raises(KernelpackError, match="parameter 2 'm': expected 16 bytes.*got 3 bytes"):
        pack_params(abi, [1, 0, b"abc"], kernel="k")
    with pytest.raises(KernelpackError, match="expected 3 arguments"):
        pack_params(abi, [1], kernel="k")
    with pytest.raises(KernelpackError, match="expected an int for uint8_t, got float"):
        pack_params(abi, [1.0, 0, bytes(16)], kernel="k")
