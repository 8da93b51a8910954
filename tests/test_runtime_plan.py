"""The runtime's pieces that need no driver: packing plans from the ABI, argument adapters, launch-configuration
checks, dispatch order and the arch rule."""

from __future__ import annotations

import ctypes
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelpack.core.abi import Abi, DType, Opaque, Param, Pointer, Scalar, Struct, TensorSpec
from kernelpack.core.arch import Arch
from kernelpack.core.binary import Binary
from kernelpack.core.errors import LaunchError
from kernelpack.core.packing import pack_params
from kernelpack.launch.family import plan_specificity as specificity
from kernelpack.launch.plan import KP_DYN, OP_BYTES, OP_NULL, OP_PTR, OP_SCALAR, OP_TENSOR, Plan
from kernelpack.runtime import adapters, checks
from kernelpack.runtime.driver import DeviceInfo
from kernelpack.runtime.errors import ArgumentTypeError, ArgumentValueError
from kernelpack.runtime.loader import LaunchFacts, binary_quality
from kernelpack.runtime.packer import pack

ROWS = Struct.tensor_descriptor("Rows", TensorSpec(DType.f16, (None, 64), (None, 1), DType.i32, DType.i64, align=16))
ABI = Abi((
    Param("x", Pointer(DType.f32, const=True), divisibility=16),
    Param("t", ROWS),
    Param("flag", Scalar(DType.bool)),
    Param("h", Scalar(DType.f16)),
    Param("m", Opaque(128, 64, "CUtensorMap")),
    Param("n", Scalar(DType.i64), divisibility=8),
    Param("scratch", Pointer(), role="global_scratch"),
))
DEV = DeviceInfo(0, 9, 0, 1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535), 232448, True, 132, 0x10)


def test_plan_follows_the_abi():
    plan = Plan.of(ABI)
    assert [s.op for s in plan.slots] == [OP_PTR, OP_TENSOR, OP_SCALAR, OP_SCALAR, OP_BYTES, OP_SCALAR, OP_NULL]
    assert [s.offset for s in plan.slots] == list(ABI.offsets(0))
    assert plan.nargs == 6 and plan.slots[-1].arg == -1
    assert plan.slots[0].align == 16 and plan.slots[5].divisor == 8
    t = plan.slots[1].tensor
    assert t is not None and t.shape == (8, -1) and t.stride == (16, -1)
    c = plan.to_c()
    assert c[1][7][0] == (KP_DYN, 64) and c[1][7][1] == (KP_DYN, 1)
    assert plan.slots[1].align == 16


def test_pack_matches_the_reference_packer():
    plan = Plan.of(ABI)
    tmap = bytes(range(128))
    values = [0x1000, (0x2000, (5, 64), (64, 1)), True, 0.333, tmap, -(2**40)]
    buf, ptrs = pack(plan, values)
    ref = pack_params(ABI, [0x1000, {"data": 0x2000, "shape0": 5, "stride0": 64}, True, 0.333, tmap, -(2**40), 0])
    assert bytes(buf)[:len(ref)] == ref
    base = ctypes.addressof(buf)
    assert [ptrs[i] - base for i in range(len(plan.slots))] == list(ABI.offsets(0))


@given(st.floats(allow_nan=False, width=64))
def test_f16_and_bf16_scalars_match_the_reference(v):
    for dt in (DType.f16, DType.bf16, DType.f32):
        abi = Abi((Param("v", Scalar(dt)),))
        try:
            ref = pack_params(abi, [v])
        except Exception:  # noqa: BLE001 - overflow: the check must refuse it too
            with pytest.raises(ArgumentValueError, match="overflows"):
                checks.check_arg("k", Plan.of(abi).slots[0], v, None)
            continue
        packed = checks.check_arg("k", Plan.of(abi).slots[0], v, None)
        buf, _ = pack(Plan.of(abi), [packed])
        assert bytes(buf)[:dt.size] == ref


def test_specificity_orders_narrower_first():
    base = Abi((Param("x", Pointer(DType.f32)), Param("n", Scalar(DType.i32))))
    aligned = Abi((Param("x", Pointer(DType.f32), 16), Param("n", Scalar(DType.i32), 4)))
    assert specificity(Plan.of(aligned)) > specificity(Plan.of(base)) == (0, 0, 0)
    static = Abi((Param("t", Struct.tensor_descriptor("T", TensorSpec(DType.f32, (None, 64), (64, 1)))),))
    assert specificity(Plan.of(static)) == (1, 3, 0)


@pytest.mark.parametrize("arch,kind,cc,quality", [
    ("sm_90a", "cubin", (9, 0), 3000), ("sm_90a", "cubin", (10, 0), 0), ("sm_80", "cubin", (9, 0), 0),
    ("sm_80", "cubin", (8, 6), 2000), ("sm_86", "cubin", (8, 0), 0), ("sm_80", "ptx", (9, 0), 1080),
    ("sm_90a", "ptx", (10, 0), 0), ("sm_100f", "cubin", (10, 3), 2000),
])
def test_binary_quality(arch, kind, cc, quality):
    data = b"\x7fELF" if kind == "cubin" else b".version 8.0"
    b = Binary.__new__(Binary)
    object.__setattr__(b, "arch", Arch.parse(arch))
    object.__setattr__(b, "kind", kind)
    object.__setattr__(b, "data", data)
    assert binary_quality(b, *cc) == quality


def test_dims_and_grid_checks():
    assert checks.dims(5, "grid", "k") == (5, 1, 1)
    assert checks.dims([2, 3], "grid", "k") == (2, 3, 1)
    for bad in ((), (1, 2, 3, 4), 1.0, True, "4", (1, None)):
        with pytest.raises(ArgumentTypeError, match="kernel k: grid must be an int or a tuple of 1 to 3 ints"):
            checks.dims(bad, "grid", "k")
    with pytest.raises(LaunchError, match=r"grid\[2\] is 0"):
        checks.check_grid((1, 1, 0), DEV, "k")
    with pytest.raises(LaunchError, match=r"grid\[0\] = 2147483648 exceeds device 0's limit 2147483647"):
        checks.check_grid(2**31, DEV, "k")
    with pytest.raises(LaunchError, match="grid is required"):
        checks.check_grid(None, DEV, "k")


def test_block_smem_cluster_checks():
    facts = LaunchFacts(None, None, 256, None, None, 1000, 0)
    assert checks.check_block(128, facts, DEV, "k") == (128, 1, 1)
    with pytest.raises(LaunchError, match="at most 256 \\(__launch_bounds__\\)"):
        checks.check_block(512, facts, DEV, "k")
    with pytest.raises(LaunchError, match=r"block\[2\] = 65 exceeds"):
        checks.check_block((1, 1, 65), facts, DEV, "k")
    assert checks.check_smem(None, facts, DEV, "k") == 0
    with pytest.raises(LaunchError, match="smem 232000 \\+ static 1000 bytes"):
        checks.check_smem(232000, facts, DEV, "k")
    with pytest.raises(ArgumentTypeError):
        checks.check_smem(1.5, facts, DEV, "k")
    assert checks.check_cluster(None, (4, 1, 1), facts, DEV, "k") is None
    assert checks.check_cluster(2, (4, 1, 1), facts, DEV, "k") == (2, 1, 1)
    explicit = LaunchFacts(None, None, 0, (2, 1, 1), None, 0, 0)
    assert checks.check_cluster(None, (4, 1, 1), explicit, DEV, "k") is None
    with pytest.raises(LaunchError, match="not a multiple"):
        checks.check_cluster(None, (3, 1, 1), explicit, DEV, "k")


def test_cuda_array_interface_view():
    class A:
        __cuda_array_interface__ = {"data": (4096, False), "shape": (4, 6), "typestr": "<f2", "strides": (12, 2),
                                    "version": 3}

        def __dlpack_device__(self):
            return (2, 3)

    v = adapters.as_view(A(), lambda p: None)
    assert v is not None
    assert (v.ptr, v.dtype, v.shape, v.strides, v.device) == (4096, DType.f16, (4, 6), (6, 1), 3)
    assert v.contiguous
    A.__cuda_array_interface__ = {**A.__cuda_array_interface__, "strides": (2, 8)}
    assert not adapters.as_view(A(), lambda p: None).contiguous


@pytest.mark.parametrize("typestr, dtype", [
    ("<f4", DType.f32), ("<f2", DType.f16), ("<i8", DType.i64), ("|u1", DType.u8), ("<u1", DType.u8),
    (">i1", DType.i8), ("|b1", DType.bool), ("<c8", None), ("<V2", None), ("<f16", None), ("<M8", None),
])
def test_typestrs_an_array_can_have(typestr, dtype):
    v = adapters.as_view(_cai(typestr=typestr), lambda p: None)
    assert v is not None and v.dtype == dtype
    assert v.dtype_name == (dtype.value if dtype else f"typestr {typestr!r}")


@pytest.mark.parametrize("typestr, why", [
    (">f4", "big-endian"), ("|f4", "of no byte order"), (">c8", "big-endian"), ("<f0", "element size 0 bytes"),
    ("=f4", "not of the form"), ("f4", "not of the form"), ("<f", "not of the form"), ("<f-4", "not of the form"),
    ("<4f", "not of the form"), ("", "not of the form"), ("<f3", "not an element type"), ("<x4", "not an element type"),
    ("<O8", "not an element type"), ("<i٣", "not of the form"),
])
def test_typestrs_refused(typestr, why):
    with pytest.raises(ArgumentValueError, match=f"'typestr'\\] is {typestr!r}: {why}".replace("|", "\\|")):
        adapters.as_view(_cai(typestr=typestr), lambda p: None)
    with pytest.raises(ArgumentTypeError, match="must be a str such as '<f4', got bytes"):
        adapters.as_view(_cai(typestr=b"<f4"), lambda p: None)


@pytest.mark.parametrize("entries, error, message", [
    ({"data": [4096, False]}, ArgumentTypeError, r"\['data'\] must be a tuple \(pointer: int, read_only: bool\), "
                                                 r"got list"),
    ({"data": (4096,)}, ArgumentTypeError, r"\['data'\] must be a tuple"),
    ({"data": (None, False)}, ArgumentTypeError, r"device pointer, must be an int, got NoneType"),
    ({"data": ("4096", False)}, ArgumentTypeError, r"device pointer, must be an int, got str"),
    ({"data": (4096, 0)}, ArgumentTypeError, r"read-only flag, must be a bool, got int 0"),
    ({"data": (2**64, False)}, ArgumentValueError, r"is 18446744073709551616: outside \[0, 2\*\*64\)"),
    ({"shape": 8}, ArgumentTypeError, r"\['shape'\] must be a tuple of ints, got int 8"),
    ({"shape": (8, False)}, ArgumentTypeError, r"\['shape'\]\[1\] must be an int, got bool False"),
    ({"shape": (2**63,)}, ArgumentValueError, r"shape\[0\] = 9223372036854775808 is beyond int64"),
    ({"shape": (4, -1)}, ArgumentValueError, r"shape\[1\] = -1 is negative"),
    ({"strides": (4.0,)}, ArgumentTypeError, r"\['strides'\]\[0\] must be an int, got float 4.0"),
    ({"strides": (4, 4)}, ArgumentValueError, r"has 2 entries \[4, 4\] for the 1 modes of shape \[8\]"),
    ({"strides": (6,)}, ArgumentValueError, r"not multiples of the 4-byte element"),
    ({"strides": (2**66,)}, ArgumentValueError, r"stride\[0\] = 18446744073709551616 elements does not fit int64"),
    ({"mask": object()}, ArgumentValueError, r"has a mask; masked arrays are not supported"),
])
def test_array_interface_lies_refused(entries, error, message):
    with pytest.raises(error, match=message):
        adapters.as_view(_cai(**entries), lambda p: None)


def test_array_interface_without_an_entry_and_failing_producers():
    class NoData:
        __cuda_array_interface__ = {"shape": (8,), "typestr": "<f4", "version": 3}

    with pytest.raises(ArgumentTypeError, match="has no 'data' entry"):
        adapters.as_view(NoData(), lambda p: None)

    class Broken:
        def __dlpack__(self, stream=None):
            raise BufferError("cannot export a tensor that requires grad")

        def __dlpack_device__(self):
            return (2, 0)

    def read(obj):  # type: ignore[no-untyped-def]
        try:
            return adapters.as_view(obj, lambda p: None)
        except adapters.PRODUCER_ERRORS as e:
            err = adapters.refusal(e, obj, "kernel k", "parameter 2 'x'")
            raise err from err.__cause__

    with pytest.raises(ArgumentTypeError, match="kernel k: parameter 2 'x': cannot read the array of type Broken: "
                                                "BufferError: cannot export") as info:
        read(Broken())
    assert isinstance(info.value.__cause__, BufferError)
    with pytest.raises(ArgumentValueError, match="^kernel k: parameter 2 'x': __cuda_array_interface__: shape") as info:
        read(_cai(shape=(-5,)))
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_dlpack_lies_refused():
    from runtime_support import DLPackArray

    v = adapters.as_view(DLPackArray(4096, (3, 0), strides=(-1, 1)), lambda p: None)
    assert v is not None and (v.shape, v.strides) == ((3, 0), (-1, 1))
    with pytest.raises(ArgumentValueError, match=r"DLPack tensor: shape\[1\] = -2 is negative"):
        adapters.as_view(DLPackArray(4096, (3, -2)), lambda p: None)
    for ndim in (-1, 65, 2**30):
        with pytest.raises(ArgumentValueError, match=f"DLPack tensor has ndim {ndim}; expected 0 to 64"):
            adapters.as_view(DLPackArray(4096, (3, 2), ndim=ndim), lambda p: None)
    with pytest.raises(ArgumentValueError, match=r"data pointer 0xfffffffffffffff0 \+ byte_offset 16 is beyond"):
        big = DLPackArray(2**64 - 16, (3,))
        big._t.byte_offset = 16
        adapters.as_view(big, lambda p: None)


def _cai(**entries):  # type: ignore[no-untyped-def]
    from runtime_support import CaiArray

    return CaiArray(**entries)


def test_dlpack_view_of_a_torch_tensor():
    torch = pytest.importorskip("torch")
    t = torch.zeros(3, 8, dtype=torch.bfloat16)[:, 2:]

    class Wrapped:  # not a torch tensor: only the DLPack protocol
        def __dlpack__(self, stream=None):
            return t.__dlpack__()

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    v = adapters.as_view(Wrapped(), lambda p: None)
    assert v is not None
    assert (v.ptr, v.dtype, v.shape, v.strides, v.device, v.device_name) == (t.data_ptr(), DType.bf16, (3, 6),
                                                                               (8, 1), None, "cpu")
    assert not v.contiguous


def test_struct_from_fields_and_bad_bytes():
    s = Struct("P", (kernelpack_field("a", Scalar(DType.f32)), kernelpack_field("b", Scalar(DType.i32))))
    slot = Plan.of(Abi((Param("p", s),))).slots[0]
    assert checks.check_arg("k", slot, {"a": 1.0, "b": 2}, None) == struct.pack("<fi", 1.0, 2)
    assert checks.check_arg("k", slot, (1.0, 2), None) == struct.pack("<fi", 1.0, 2)
    with pytest.raises(ArgumentTypeError, match="missing fields"):
        checks.check_arg("k", slot, {"a": 1.0}, None)
    with pytest.raises(ArgumentValueError, match="expected 8 bytes for P, got 7"):
        checks.check_arg("k", slot, b"1234567", None)


def kernelpack_field(name, t):
    from kernelpack.core.abi import Field

    return Field(name, t)
