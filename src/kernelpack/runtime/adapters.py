"""Argument adapters: torch tensors, ``__cuda_array_interface__`` objects and DLPack producers as one view.

A :class:`TensorView` is what every check and the packer need: data pointer, element type, shape and strides in
elements, and the CUDA device. torch is never imported here; a tensor is recognised only when torch is already
loaded. The C extension reads torch tensors itself (through the optional torch bridge); this module serves the
pure-Python path and every other kind of array.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..abi import DType
from .errors import ArgumentValueError

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13


@dataclass(slots=True)
class TensorView:
    ptr: int
    dtype: DType | None  # None: an element type the ABI cannot name (complex, fp8, ...)
    dtype_label: Any  # the producer's dtype (its str() is the name used in messages)
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    device: int | None  # CUDA ordinal; None when the memory is not CUDA device memory
    device_label: Any  # str() gives "cuda:0", "cpu", ...
    source: str  # "torch", "cuda_array_interface" or "dlpack"

    @property
    def dtype_name(self) -> str:
        return str(self.dtype_label).replace("torch.", "")

    @property
    def device_name(self) -> str:
        return str(self.device_label)

    @property
    def contiguous(self) -> bool:
        if 0 in self.shape:
            return True
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def describe(self) -> str:
        return f"{self.dtype_name} tensor of shape {list(self.shape)} on {self.device_name}"


class _Testing:
    cpu_as_cuda = False  # tests without a GPU: treat CPU torch tensors as tensors on cuda:0


testing = _Testing()

# ---------------------------------------------------------------- torch

_TORCH_DTYPES: dict[Any, DType] = {}


def torch_module() -> Any:
    """torch if it is already imported (never imports it)."""
    return sys.modules.get("torch")


def _torch_dtypes(torch: Any) -> dict[Any, DType]:
    if not _TORCH_DTYPES:
        names = {"int8": DType.i8, "int16": DType.i16, "int32": DType.i32, "int64": DType.i64, "uint8": DType.u8,
                 "uint16": DType.u16, "uint32": DType.u32, "uint64": DType.u64, "float16": DType.f16,
                 "bfloat16": DType.bf16, "float32": DType.f32, "float64": DType.f64, "bool": DType.bool}
        for name, dt in names.items():
            if hasattr(torch, name):
                _TORCH_DTYPES[getattr(torch, name)] = dt
    return _TORCH_DTYPES


def is_torch_tensor(obj: Any) -> bool:
    torch = torch_module()
    return torch is not None and isinstance(obj, torch.Tensor)


def torch_view(t: Any) -> TensorView:
    dev = t.device
    if dev.type == "cuda":
        ordinal: int | None = dev.index if dev.index is not None else torch_module().cuda.current_device()
    elif dev.type == "cpu" and testing.cpu_as_cuda:
        ordinal = 0
    else:
        ordinal = None
    dtypes = _TORCH_DTYPES or _torch_dtypes(torch_module())
    return TensorView(t.data_ptr(), dtypes.get(t.dtype), t.dtype, tuple(t.shape), t.stride(), ordinal, dev, "torch")


# ---------------------------------------------------------------- __cuda_array_interface__

_TYPESTR = {"i1": DType.i8, "i2": DType.i16, "i4": DType.i32, "i8": DType.i64, "u1": DType.u8, "u2": DType.u16,
            "u4": DType.u32, "u8": DType.u64, "f2": DType.f16, "f4": DType.f32, "f8": DType.f64, "b1": DType.bool}


def cai_view(obj: Any, cai: dict[str, Any], pointer_device: Any) -> TensorView:
    ptr = int(cai["data"][0] or 0)
    shape = tuple(int(s) for s in cai["shape"])
    typestr = str(cai["typestr"])
    dtype = _TYPESTR.get(typestr[1:])
    itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 1
    if cai.get("strides") is None:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        elem_strides = tuple(reversed(strides))
    else:
        byte_strides = tuple(int(s) for s in cai["strides"])
        if any(s % itemsize for s in byte_strides):
            raise ValueError(f"strides {list(byte_strides)} (bytes) are not multiples of the {itemsize}-byte element")
        elem_strides = tuple(s // itemsize for s in byte_strides)
    device = _dlpack_device(obj)
    if device is None:
        ordinal = pointer_device(ptr) if ptr else None
        name = f"cuda:{ordinal}" if ordinal is not None else "cuda"
    else:
        ordinal, name = device
    return TensorView(ptr, dtype, typestr, shape, elem_strides, ordinal, name, "cuda_array_interface")


def _dlpack_device(obj: Any) -> tuple[int | None, str] | None:
    fn = getattr(obj, "__dlpack_device__", None)
    if fn is None:
        return None
    kind, index = fn()
    kind, index = int(kind), int(index)
    if kind in (KDL_CUDA, KDL_CUDA_MANAGED):
        return index, f"cuda:{index}"
    names = {KDL_CPU: "cpu", KDL_CUDA_HOST: "cuda_host (pinned host memory)"}
    return None, names.get(kind, f"DLPack device type {kind}")


# ---------------------------------------------------------------- DLPack


class _DLDevice(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int32), ("id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = (ctypes.py_object, ctypes.c_char_p)

_DL_CODES = {(0, 8): DType.i8, (0, 16): DType.i16, (0, 32): DType.i32, (0, 64): DType.i64, (1, 8): DType.u8,
             (1, 16): DType.u16, (1, 32): DType.u32, (1, 64): DType.u64, (2, 16): DType.f16, (2, 32): DType.f32,
             (2, 64): DType.f64, (4, 16): DType.bf16, (6, 8): DType.bool}


def dlpack_view(obj: Any) -> TensorView:
    """Peek at a DLPack capsule without consuming it: the producer's capsule destructor frees it, and ``obj``
    keeps the memory alive for the call."""
    capsule = obj.__dlpack__()
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    ndim = t.ndim
    shape = tuple(t.shape[i] for i in range(ndim))
    if t.strides:
        strides = tuple(t.strides[i] for i in range(ndim))
    else:
        acc, rev = 1, []
        for s in reversed(shape):
            rev.append(acc)
            acc *= s
        strides = tuple(reversed(rev))
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    dtype = _DL_CODES.get((code, bits)) if lanes == 1 else None
    name = f"dlpack(code={code}, bits={bits}{'' if lanes == 1 else f', lanes={lanes}'})"
    if dtype is not None:
        name = dtype.value
    kind, index = t.device.type, t.device.id
    if kind in (KDL_CUDA, KDL_CUDA_MANAGED):
        ordinal: int | None = index
        dev_name = f"cuda:{index}"
    else:
        ordinal, dev_name = None, {KDL_CPU: "cpu", KDL_CUDA_HOST: "cuda_host"}.get(kind, f"DLPack device {kind}")
    ptr = (t.data or 0) + t.byte_offset
    del capsule
    return TensorView(ptr, dtype, name, shape, strides, ordinal, dev_name, "dlpack")


def launch_device(owner: str, views: Iterable[tuple[str, TensorView | None]], *, kind: str = "parameter",
                  needs: str = "kernels") -> int | None:
    """The CUDA device every array of one launch is on (None when no argument is an array).

    ``owner`` names the callee in messages ("kernel add", "host program gemm"), ``kind`` its arguments
    ("parameter", "argument"), ``needs`` what needs device memory ("kernels", "host programs"). Memory that is not
    on a CUDA device, or arrays on two devices: ArgumentValueError naming the arguments."""
    ordinal: int | None = None
    first = ""
    for i, (name, v) in enumerate(views):
        if v is None:
            continue
        if v.device is None:
            raise ArgumentValueError(f"{owner}: {kind} {i} '{name}' is a {v.describe()}; {needs} need "
                                     f"CUDA device memory (move it with .cuda())")
        if ordinal is None:
            ordinal, first = v.device, f"{kind} {i} '{name}'"
        elif v.device != ordinal:
            raise ArgumentValueError(f"{owner}: {first} is on cuda:{ordinal} but {kind} {i} '{name}' is on "
                                     f"cuda:{v.device}; all tensors of a launch must be on one device")
    return ordinal


def as_view(obj: Any, pointer_device: Any) -> TensorView | None:
    """A view of ``obj`` when it is an array of any supported kind, else None."""
    if is_torch_tensor(obj):
        return torch_view(obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if isinstance(cai, dict):
        return cai_view(obj, cai, pointer_device)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return dlpack_view(obj)
    return None
