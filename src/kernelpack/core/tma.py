"""Tensor-descriptor arguments (TMA): what the host must compute before a launch, as pure functions.

A Triton kernel parameter of type ``tensordesc<fp16[64, 32]>`` is not one kernel parameter. On sm_90+ Triton
lowers it to a 128-byte ``CUtensorMap`` (``.align 64``) followed by ``shape[rank]`` (i32) and ``stride[rank]``
(i64, in elements); where the target has no TMA (sm_80) it decomposes it into ``base pointer, shape[rank] (i64),
stride[rank] (i64), flags (i1 each), shape[rank] (i32), stride[rank] (i64)``, the flags being ``padding_nan``
(Triton 3.6) and also ``round_tf32`` (3.9).
Which lowering a binary uses is in Triton's ``tensordesc_meta`` (empty: decomposed); the encoding facts the host
needs (element type, box shape, swizzle) are recorded in a :class:`TensorDescSpec` in the artifact's
:class:`~kernelpack.core.launchspec.LaunchSpec`.

:func:`encode_args` turns a spec and a tensor (pointer, shape, strides) into the exact arguments of
``cuTensorMapEncodeTiled`` plus the values of the other params the descriptor fills. It is pure Python with no
driver, so the C library generator can port it line by line and tests can check it without a GPU;
:func:`encode_tensor_map` performs the encoding through the driver (ctypes) for Python launchers.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .abi import Abi, DType, Opaque, Pointer, Scalar
from .errors import AbiError, KernelpackError, LaunchError

TENSOR_MAP = Opaque(128, 64, "CUtensorMap")  # Triton emits `.param .align 64 .b8 [128]`
LOWERINGS = ("tma", "decomposed")
FLAGS = ("padding_nan", "round_tf32")

# CUtensorMapDataType (host enum); Triton's device-side enum differs for 8, 9 and 10 (driver.py:
# TMA_DTYPE_DEVICE_TO_HOST), so specs store the host value.
_DEVICE_TO_HOST = {**{i: i for i in range(16)}, 8: 10, 9: 8, 10: 9}
TMA_TFLOAT32 = 11
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}  # CUtensorMapSwizzle -> bytes
INTERLEAVE_NONE = 0
L2_PROMOTION_128B = 2
OOB_FILL_NONE, OOB_FILL_NAN_REQUEST_ZERO_FMA = 0, 1

# The element type names a TensorDescSpec stores (the .kpack format; they are Triton's, the first frontend to emit
# descriptors) -> kernelpack dtypes (None: no kernelpack dtype, e.g. the non-NVIDIA fp8 variants fp8e4b15 (bias 15)
# and the fnuz fp8e4b8/fp8e5b16; such pointers become void*)
ELEMENT_TYPES: dict[str, DType | None] = {
    "i1": DType.bool, "u1": DType.bool, "i8": DType.i8, "i16": DType.i16, "i32": DType.i32, "i64": DType.i64,
    "u8": DType.u8, "u16": DType.u16, "u32": DType.u32, "u64": DType.u64,
    "fp16": DType.f16, "bf16": DType.bf16, "fp32": DType.f32, "f32": DType.f32, "fp64": DType.f64,
    "fp8e4nv": DType.f8e4m3, "fp8e5": DType.f8e5m2, "fp8e4b15": None, "fp8e4b8": None, "fp8e5b16": None,
}


@dataclass(frozen=True)
class TensorDescSpec:
    """How the host fills the kernel params of one tensor-descriptor argument.

    ``arg``: the kernel's parameter name; ``params``: the kernel params it fills, in order (their names are
    ``arg``, ``arg_shape{i}``, ``arg_stride{i}``... as the frontend chose). ``block_shape``: the box to encode,
    outermost dimension first: Triton's ``block_size``, which can be smaller than the block the kernel declares
    (inner dims clamp to the swizzle span: ``fp16[64, 128]`` with 128-byte swizzle encodes a 64 x 64 box).
    ``elem_type``: ``CUtensorMapDataType`` (host enum); ``swizzle``: ``CUtensorMapSwizzle``.
    Encoding fields are unused for the ``decomposed`` lowering; ``flags`` name its i1 params (in order).
    """

    arg: str
    dtype: str  # Triton's element type name, e.g. "fp16"
    block_shape: tuple[int, ...]
    lowering: str
    params: tuple[str, ...]
    elem_size: int = 0
    elem_type: int = 0
    swizzle: int = 0
    fp4_padded: bool = False
    flags: tuple[str, ...] = ("padding_nan", "round_tf32")

    @property
    def element_dtype(self) -> DType | None:
        """The kernelpack dtype of the elements (None: one kernelpack has no dtype for, e.g. fp8e4b15)."""
        return ELEMENT_TYPES.get(self.dtype)

    def __post_init__(self) -> None:
        object.__setattr__(self, "block_shape", tuple(int(b) for b in self.block_shape))
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "flags", tuple(self.flags))
        if not set(self.flags) <= set(FLAGS):
            raise AbiError(f"tensor descriptor {self.arg}: unknown flags {self.flags} (known: {FLAGS})")
        if self.lowering not in LOWERINGS:
            raise AbiError(f"tensor descriptor {self.arg}: lowering {self.lowering!r} is not one of {LOWERINGS}")
        if not 1 <= self.rank <= 5 or any(b < 1 for b in self.block_shape):
            raise AbiError(f"tensor descriptor {self.arg}: block shape {self.block_shape} must be 1 to 5 dims >= 1")
        want = len(expected_params(self.lowering, self.rank, len(self.flags)))
        if len(self.params) != want:
            raise AbiError(f"tensor descriptor {self.arg}: {self.lowering} lowering of rank {self.rank} fills {want} "
                           f"params, the spec names {len(self.params)}")
        if self.lowering == "tma" and (self.elem_size not in (1, 2, 4, 8) or self.swizzle not in SWIZZLE_BYTES):
            raise AbiError(f"tensor descriptor {self.arg}: elem_size {self.elem_size} / swizzle {self.swizzle} "
                           f"are not valid TMA settings")

    @property
    def rank(self) -> int:
        return len(self.block_shape)

    @classmethod
    def from_triton(cls, arg: str, dtype: str, block_shape: Sequence[int], params: Sequence[str],
                    meta: Mapping[str, Any] | None, flags: Sequence[str] = ("padding_nan", "round_tf32")
                    ) -> TensorDescSpec:
        """From one entry of Triton's ``metadata.tensordesc_meta`` (None or empty: the decomposed lowering)."""
        if not meta:
            return cls(arg, dtype, tuple(block_shape), "decomposed", tuple(params), flags=tuple(flags))
        if meta.get("is_im2col"):
            raise KernelpackError(f"tensor descriptor {arg}: im2col descriptors are not supported")
        return cls(arg, dtype, tuple(meta.get("block_size") or block_shape), "tma", tuple(params),
                   int(meta["elem_size"]), _DEVICE_TO_HOST[int(meta["elem_type"])], int(meta["swizzle"]),
                   bool(meta.get("fp4_padded", False)))

    def check(self, abi: Abi, kernel: str) -> None:
        """Raise AbiError unless the ABI has this descriptor's params, consecutive and of the expected types."""
        names = [p.name for p in abi.params]
        if self.params[0] not in names:
            raise AbiError(f"kernel {kernel}: tensor descriptor {self.arg} names param {self.params[0]!r}, "
                           f"which the ABI does not have")
        start = names.index(self.params[0])
        got = abi.params[start:start + len(self.params)]
        for p, name, (kind, dt) in zip(got, self.params, expected_params(self.lowering, self.rank, len(self.flags))):
            ok = p.name == name and (isinstance(p.type, Opaque) and p.type.size == 128 if kind == "map"
                                     else isinstance(p.type, Pointer) if kind == "ptr"
                                     else isinstance(p.type, Scalar) and p.type.dtype == dt)
            if not ok:
                raise AbiError(f"kernel {kernel}: tensor descriptor {self.arg}: param {p.name} ({p.type.c_type}) "
                               f"is not the expected {name} ({kind} {dt.value if dt else ''})")
        if len(got) != len(self.params):
            raise AbiError(f"kernel {kernel}: tensor descriptor {self.arg}: the ABI ends before its params do")

    def to_json(self) -> dict[str, Any]:
        out = {"arg": self.arg, "dtype": self.dtype, "block_shape": list(self.block_shape),
               "lowering": self.lowering, "params": list(self.params), "elem_size": self.elem_size,
               "elem_type": self.elem_type, "swizzle": self.swizzle, "fp4_padded": self.fp4_padded}
        if self.lowering == "decomposed":
            out["flags"] = list(self.flags)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TensorDescSpec:
        try:
            return cls(str(d["arg"]), str(d["dtype"]), tuple(d["block_shape"]), str(d["lowering"]),
                       tuple(d["params"]), int(d.get("elem_size", 0)), int(d.get("elem_type", 0)),
                       int(d.get("swizzle", 0)), bool(d.get("fp4_padded", False)),
                       tuple(d.get("flags", ("padding_nan", "round_tf32"))))
        except (KeyError, TypeError, ValueError) as e:
            raise AbiError(f"malformed tensor descriptor spec {dict(d)!r}: {e!r}") from None


def expected_params(lowering: str, rank: int, nflags: int = 2) -> list[tuple[str, DType | None]]:
    """(kind, dtype) of each kernel param a descriptor of this lowering and rank fills (``nflags``: decomposed)."""
    i32: tuple[str, DType | None] = ("int", DType.i32)
    i64: tuple[str, DType | None] = ("int", DType.i64)
    flag: tuple[str, DType | None] = ("int", DType.bool)
    tail = [i32] * rank + [i64] * rank
    if lowering == "tma":
        return [("map", None), *tail]
    return [("ptr", None), *[i64] * (2 * rank), *[flag] * nflags, *tail]


@dataclass(frozen=True)
class EncodeTiled:
    """The arguments of ``cuTensorMapEncodeTiled``, innermost dimension first as the driver wants them."""

    data_type: int
    rank: int
    global_address: int
    global_dim: tuple[int, ...]  # cuuint64_t[rank]
    global_strides: tuple[int, ...]  # cuuint64_t[rank - 1], bytes
    box_dim: tuple[int, ...]  # cuuint32_t[rank]
    element_strides: tuple[int, ...]  # cuuint32_t[rank]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int
    clear_bit21: bool  # after encoding, clear bit 21 of the map's second u64 (see encode_args)


@dataclass(frozen=True)
class DescArgs:
    """What one descriptor argument contributes to a launch: ``values[i]`` for ``spec.params[i]``.

    For the ``tma`` lowering ``values[0]`` is None: it is the 128-byte map that ``encode`` describes.
    """

    encode: EncodeTiled | None
    values: tuple[Any, ...]


def encode_args(spec: TensorDescSpec, ptr: int, shape: Sequence[int], strides: Sequence[int], *,
                padding: str = "zero", round_f32_to_tf32: bool = False, driver_version: int = 0,
                kernel: str = "kernel") -> DescArgs:
    """The launch values for a tensor of ``shape``/``strides`` (in elements, outermost first) at ``ptr``.

    Mirrors Triton 3.9's ``make_tensordesc_arg``/``fillTMADescriptorTiled``: innermost stride must be 1, the
    driver gets dims innermost first and byte strides of the outer dims, element strides 1, no interleave,
    L2 promotion 128B, OOB fill NaN only for ``padding="nan"``. ``driver_version`` (``cuDriverGetVersion``)
    <= 13010 with a tensor spanning < 128 KiB sets ``clear_bit21``: Triton 3.9 (after CUTLASS) clears bit 21 of
    the second 64-bit word of the map on those drivers.
    """
    where = f"kernel {kernel}: tensor descriptor {spec.arg}"
    shape, strides = [int(s) for s in shape], [int(s) for s in strides]
    if len(shape) != spec.rank or len(strides) != spec.rank:
        raise LaunchError(f"{where}: expected a rank-{spec.rank} tensor, got shape {shape} strides {strides}")
    if padding not in ("zero", "nan"):
        raise LaunchError(f"{where}: padding must be 'zero' or 'nan' (got {padding!r})")
    if spec.lowering == "decomposed":
        flag = {"padding_nan": padding == "nan", "round_tf32": bool(round_f32_to_tf32)}
        values = [ptr, *shape, *strides, *(flag[f] for f in spec.flags), *shape, *strides]
        return DescArgs(None, tuple(values))
    if strides[-1] != 1:
        raise LaunchError(f"{where}: the innermost stride must be 1 for TMA (got strides {strides})")
    if ptr % 16:
        raise LaunchError(f"{where}: TMA needs a 16-byte aligned base address (got {ptr:#x})")
    byte_strides = [s * spec.elem_size for s in strides[:-1]]
    bad = [b for b in byte_strides if b % 16 or b <= 0]
    if bad:
        raise LaunchError(f"{where}: TMA needs positive strides that are multiples of 16 bytes (got {byte_strides} "
                          f"bytes for strides {strides} of {spec.elem_size}-byte elements)")
    dims = list(shape)
    if spec.fp4_padded:
        dims[-1] *= 2
    if any(d < 1 or d >= 1 << 32 for d in dims):
        raise LaunchError(f"{where}: dims must be in [1, 2^32) (got {dims})")
    elem_type = TMA_TFLOAT32 if round_f32_to_tf32 else spec.elem_type
    last_byte = sum((d - 1) * b for d, b in zip(dims[::-1], [spec.elem_size] + byte_strides[::-1]))
    enc = EncodeTiled(
        data_type=elem_type, rank=spec.rank, global_address=ptr, global_dim=tuple(dims[::-1]),
        global_strides=tuple(byte_strides[::-1]), box_dim=spec.block_shape[::-1], element_strides=(1,) * spec.rank,
        interleave=INTERLEAVE_NONE, swizzle=spec.swizzle, l2_promotion=L2_PROMOTION_128B,
        oob_fill=OOB_FILL_NAN_REQUEST_ZERO_FMA if padding == "nan" else OOB_FILL_NONE,
        clear_bit21=0 < driver_version <= 13010 and last_byte + 1 < 128 * 1024)
    return DescArgs(enc, (None, *shape, *strides))


def encode_tensor_map(enc: EncodeTiled, libcuda: Any = None) -> bytes:
    """Run ``cuTensorMapEncodeTiled`` through the driver (ctypes) and apply ``clear_bit21``: 128 bytes."""
    lib = libcuda if libcuda is not None else ctypes.CDLL("libcuda.so.1")
    out = (ctypes.c_uint64 * 16)()
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    r = lib.cuTensorMapEncodeTiled(
        out, ctypes.c_int(enc.data_type), u32(enc.rank), ctypes.c_void_p(enc.global_address),
        (u64 * enc.rank)(*enc.global_dim), (u64 * max(1, enc.rank - 1))(*enc.global_strides),
        (u32 * enc.rank)(*enc.box_dim), (u32 * enc.rank)(*enc.element_strides), ctypes.c_int(enc.interleave),
        ctypes.c_int(enc.swizzle), ctypes.c_int(enc.l2_promotion), ctypes.c_int(enc.oob_fill))
    if r != 0:
        raise LaunchError(f"cuTensorMapEncodeTiled failed with CUresult {r} for {enc}")
    if enc.clear_bit21:
        out[1] &= ~(1 << 21)
    return bytes(out)
