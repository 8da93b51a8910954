"""Argument adapters: torch tensors, ``__cuda_array_interface__`` objects and DLPack producers as one view.

A :class:`TensorView` is what every check and the packer need: data pointer, element type, shape and strides in
elements, and the CUDA device. torch is never imported here; a tensor is recognised only when torch is already
loaded. The C extension reads torch tensors itself (through the optional torch bridge); this module serves the
pure-Python path and every other kind of array.
"""

from __future__ import annotations

import ctypes
import operator
import sys
from collections.abc import Iterable
from typing import Any

from ..core.abi import DType
from ..core.errors import LaunchError
from ..core.records import record
from ..launch import codes
from .errors import ArgumentTypeError, ArgumentValueError

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13


@record(slots=True)
class TensorView:
    """What the runtime reads of one tensor argument (:func:`as_view`): pointer, element type, shape, strides,
    device."""

    ptr: int
    dtype: DType | None  # None: an element type the ABI cannot name (complex, fnuz fp8, ...)
    dtype_label: Any  # the producer's dtype (its str() is the name used in messages)
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    device: int | None  # CUDA ordinal; None when the memory is not CUDA device memory
    device_label: Any  # str() gives "cuda:0", "cpu", ...
    source: str  # "torch", "cuda_array_interface" or "dlpack"

    def __init__(self, ptr: int, dtype: DType | None, dtype_label: Any, shape: tuple[int, ...],
                 strides: tuple[int, ...], device: int | None, device_label: Any, source: str) -> None:
        # written out: one is made per tensor argument of each call (records.py's generic one is ~1 us slower)
        self.ptr, self.dtype, self.dtype_label, self.shape = ptr, dtype, dtype_label, shape
        self.strides, self.device, self.device_label, self.source = strides, device, device_label, source

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


@record(slots=True)
class ListView:
    """A list (or tuple) of arrays given for a tensor-list parameter: a view of each, in order."""

    items: tuple[TensorView, ...]

    def __init__(self, items: tuple[TensorView, ...]) -> None:  # one per list argument of each call
        self.items = items

    @property
    def source(self) -> str:
        """"torch" when some element is a torch tensor (the launch then reads torch's current stream)."""
        return next((v.source for v in self.items if v.source == "torch"), self.items[0].source)

    def describe(self) -> str:
        shown = ", ".join(f"{v.dtype_name}{list(v.shape)}" for v in self.items[:4])
        more = f", ... ({len(self.items)} tensors)" if len(self.items) > 4 else ""
        return f"list of {len(self.items)} tensor{'s' * (len(self.items) != 1)} ({shown}{more})"


INT32_MAX = 2**31 - 1  # the most tensors a list may hold (its count is a 32-bit kernel parameter)


def list_view(obj: Any, pointer_device: Any, owner: str, where: str) -> ListView:
    """The views of a list or tuple of arrays for a tensor-list parameter (``owner`` "kernel k", ``where``
    "parameter 0 'xs'" name it in errors): ArgumentTypeError for anything else or an element that is no array,
    ArgumentValueError for an empty list (as cuTile's own launch refuses one: its kernels index the list by block)."""
    if not isinstance(obj, (list, tuple)):
        raise ArgumentTypeError(f"{owner}: {where}: expected a list of tensors, got {type(obj).__name__}")
    if not obj:
        raise ArgumentValueError(f"{owner}: {where}: the list is empty; a tensor list takes 1 to {INT32_MAX} tensors")
    if len(obj) > INT32_MAX:
        raise ArgumentValueError(f"{owner}: {where}: a list of {len(obj)} tensors; a tensor list takes at most "
                                 f"{INT32_MAX}")
    items = []
    torch = torch_module()
    tensor = torch.Tensor if torch is not None else ()
    for k, x in enumerate(obj):
        try:
            v = torch_view(x) if isinstance(x, tensor) else as_view(x, pointer_device)
        except PRODUCER_ERRORS as e:
            err = refusal(e, x, owner, f"{where}: element {k}")
            raise err from err.__cause__
        if v is None:
            raise ArgumentTypeError(f"{owner}: {where}: element {k} is {type(x).__name__}, not a tensor")
        items.append(v)
    return ListView(tuple(items))


class _Testing:
    cpu_as_cuda = False  # no GPU (tests, a dry run: runtime/dryrun.py): host memory read as memory of cuda:0


testing = _Testing()

# ---------------------------------------------------------------- torch

_TORCH_DTYPES: dict[Any, DType] = {}


def torch_module() -> Any:
    """torch if it is already imported (never imports it)."""
    return sys.modules.get("torch")


def _torch_dtypes(torch: Any) -> dict[Any, DType]:
    if not _TORCH_DTYPES:
        names = {name: dt for dt, (name, _) in codes.TORCH_DTYPES.items()}
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
# every (kind, size) a typestr may name: the ABI's types above, and element types the ABI cannot name (complex,
# long double, datetimes) which only an untyped (void*) pointer parameter accepts; V (raw bytes, e.g. bfloat16 as
# '<V2') may have any size
_TYPESTR_SIZES = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8, 16), "c": (8, 16, 32), "m": (8,),
                  "M": (8,)}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INT_ONLY = frozenset((int,))
_TYPESTR_SEEN: dict[str, tuple[DType | None, int, str]] = {}  # typestrs already checked (a few per program)


def _index(value: Any) -> int | None:
    """``value`` as an int when it is one (an int or an integer type with __index__), else None: a float, a bool
    or a str is never silently truncated into an address or an extent."""
    if type(value) is int:
        return value
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        return None
    return operator.index(value)


def _got(value: Any) -> str:
    return f"{type(value).__name__} {value!r:.60}"


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)):
        raise ArgumentTypeError(f"{what} must be a tuple of ints, got {_got(value)}")
    if _INT_ONLY.issuperset(map(type, value)):  # the common case, without a Python-level loop
        return tuple(value)
    out = []
    for i, v in enumerate(value):
        n = _index(v)
        if n is None:
            raise ArgumentTypeError(f"{what}[{i}] must be an int, got {_got(v)} ({what} {value!r:.80})")
        out.append(n)
    return tuple(out)


def checked_extents(shape: tuple[int, ...], strides: tuple[int, ...], where: str) -> None:
    """Extents in [0, 2**63) and strides (in elements) in int64, one stride per mode: what every tensor must
    satisfy before a check compares it with a parameter (a negative extent is always a lie; a negative stride can
    be a real view, and the parameter's own stride range decides)."""
    if len(strides) == len(shape) and (not shape or (min(shape) >= 0 and max(shape) <= INT64_MAX and min(strides)
                                                     >= INT64_MIN and max(strides) <= INT64_MAX)):
        return
    if len(strides) != len(shape):
        raise ArgumentValueError(f"{where}: {len(strides)} strides {list(strides)} for {len(shape)} modes (shape "
                                 f"{list(shape)}); one stride per mode is required")
    for i, n in enumerate(shape):
        if not 0 <= n <= INT64_MAX:
            raise ArgumentValueError(f"{where}: shape[{i}] = {n} is {'negative' if n < 0 else 'beyond int64'}; an "
                                     f"extent must be in [0, 2**63) (shape {list(shape)})")
    for i, n in enumerate(strides):
        if not INT64_MIN <= n <= INT64_MAX:
            raise ArgumentValueError(f"{where}: stride[{i}] = {n} elements does not fit int64 (strides "
                                     f"{list(strides)})")


def _typestr(value: Any) -> tuple[DType | None, int, str]:
    """The element type, size and name (for messages) a typestr names: little-endian '<' (or any byte order for
    1-byte elements, '|' meaning "not applicable"), a kind and a size that exist (_TYPESTR_SIZES)."""
    known = _TYPESTR_SEEN.get(value) if type(value) is str else None
    if known is not None:
        return known
    where = "__cuda_array_interface__['typestr']"
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{where} must be a str such as '<f4', got {_got(value)}")
    order, kind, digits = value[:1], value[1:2], value[2:]
    size = int(digits) if digits.isascii() and digits.isdigit() else -1
    if not order or order not in "<>|" or not kind.isalpha() or size < 1:
        why = f"element size {size} bytes" if size == 0 else "not of the form <byte order><kind><size>"
        raise ArgumentValueError(f"{where} is {value!r}: {why}; expected a byte order ('<', or '|' for 1-byte "
                                 f"elements), a kind and a size of at least 1 byte, as '<f4'")
    sizes = _TYPESTR_SIZES.get(kind)
    if (sizes is None and kind != "V") or (sizes is not None and size not in sizes):
        raise ArgumentValueError(f"{where} is {value!r}: not an element type an array can hold (kinds b, i, u, f, c, "
                                 f"m, M, V with their sizes)")
    if size > 1 and order != "<":
        what = "big-endian" if order == ">" else "of no byte order ('|')"
        raise ArgumentValueError(f"{where} is {value!r}: {what}, but a {size}-byte element on a CUDA device is "
                                 f"little-endian; expected '<{kind}{size}'")
    dtype = _TYPESTR.get(f"{kind}{size}")
    known = dtype, size, dtype.value if dtype is not None else f"typestr {value!r}"
    if type(value) is str and len(_TYPESTR_SEEN) < 256:
        _TYPESTR_SEEN[value] = known
    return known


def _data_pointer(data: Any) -> int:
    where = "__cuda_array_interface__['data']"
    if not isinstance(data, tuple) or len(data) != 2:
        raise ArgumentTypeError(f"{where} must be a tuple (pointer: int, read_only: bool), got {_got(data)}")
    ptr = _index(data[0])
    if ptr is None:
        raise ArgumentTypeError(f"{where}[0], the device pointer, must be an int, got {_got(data[0])}")
    if not 0 <= ptr < 1 << 64:
        raise ArgumentValueError(f"{where}[0], the device pointer, is {ptr}: outside [0, 2**64)")
    if not isinstance(data[1], bool):
        raise ArgumentTypeError(f"{where}[1], the read-only flag, must be a bool, got {_got(data[1])}")
    return ptr


def cai_view(obj: Any, cai: dict[str, Any], pointer_device: Any) -> TensorView:
    """A view of a ``__cuda_array_interface__`` (version 3): anything that does not describe an array honestly --
    a pointer or extent that is not an int, a negative extent, strides for another rank, a byte order other than
    little-endian, an unknown element type, a mask -- raises ArgumentTypeError / ArgumentValueError saying which
    entry is wrong (the caller adds the kernel and the parameter)."""
    try:
        data, raw_shape, typestr = cai["data"], cai["shape"], cai["typestr"]
    except KeyError as e:
        raise ArgumentTypeError(f"__cuda_array_interface__ has no {e} entry (entries: {sorted(cai)})") from None
    ptr = _data_pointer(data)
    shape = _ints(raw_shape, "__cuda_array_interface__['shape']")
    dtype, itemsize, label = _typestr(typestr)
    if cai.get("mask") is not None:
        raise ArgumentValueError("__cuda_array_interface__ has a mask; masked arrays are not supported (kernels "
                                 "would read the masked elements)")
    if cai.get("strides") is None:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        elem_strides = tuple(reversed(strides))
    else:
        byte_strides = _ints(cai["strides"], "__cuda_array_interface__['strides']")
        if len(byte_strides) != len(shape):
            n = len(byte_strides)
            raise ArgumentValueError(f"__cuda_array_interface__['strides'] has {n} entr{'y' if n == 1 else 'ies'} "
                                     f"{list(byte_strides)} for the {len(shape)} modes of shape {list(shape)}; one "
                                     f"stride per mode is required")
        if any(s % itemsize for s in byte_strides):
            raise ArgumentValueError(f"__cuda_array_interface__['strides'] {list(byte_strides)} (bytes) are not "
                                     f"multiples of the {itemsize}-byte element ({typestr!r})")
        elem_strides = tuple(s // itemsize for s in byte_strides)
    checked_extents(shape, elem_strides, "__cuda_array_interface__")
    device = _dlpack_device(obj)
    if device is None:
        ordinal = pointer_device(ptr) if ptr else None
        name = f"cuda:{ordinal}" if ordinal is not None else "cuda"
    else:
        ordinal, name = device
    return TensorView(ptr, dtype, label, shape, elem_strides, ordinal, name, "cuda_array_interface")


def _dlpack_device(obj: Any) -> tuple[int | None, str] | None:
    fn = getattr(obj, "__dlpack_device__", None)
    if fn is None:
        return None
    kind, index = fn()
    kind, index = int(kind), int(index)
    if kind in (KDL_CUDA, KDL_CUDA_MANAGED):
        return index, f"cuda:{index}"
    if kind == KDL_CPU and testing.cpu_as_cuda:
        return 0, "cpu (as cuda:0)"
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

_DL_CODES = {code: dt for dt, code in codes.DLPACK_DTYPES.items()}
# DLPack's other 8-bit float codes (dlpack.h 1.1+), named in messages; none is an NVIDIA format kernelpack names
_DL_FP8_NAMES = {7: "float8_e3m4", 8: "float8_e4m3 (IEEE-style, with infinities)", 9: "float8_e4m3b11fnuz",
                 11: "float8_e4m3fnuz", 13: "float8_e5m2fnuz", 14: "float8_e8m0fnu"}


MAX_DLPACK_NDIM = 64  # numpy's own limit; a larger ndim is a producer's error, never read past


def dlpack_view(obj: Any) -> TensorView:
    """Peek at a DLPack capsule without consuming it: the producer's capsule destructor frees it, and ``obj``
    keeps the memory alive for the call."""
    capsule = obj.__dlpack__()
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    ndim = t.ndim
    if not 0 <= ndim <= MAX_DLPACK_NDIM:
        raise ArgumentValueError(f"DLPack tensor has ndim {ndim}; expected 0 to {MAX_DLPACK_NDIM}")
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
    elif lanes == 1 and bits == 8 and code in _DL_FP8_NAMES:
        name = f"dlpack {_DL_FP8_NAMES[code]} (code={code})"
    kind, index = t.device.type, t.device.id
    if kind in (KDL_CUDA, KDL_CUDA_MANAGED):
        ordinal: int | None = index
        dev_name = f"cuda:{index}"
    elif kind == KDL_CPU and testing.cpu_as_cuda:
        ordinal, dev_name = 0, "cpu (as cuda:0)"
    else:
        ordinal, dev_name = None, {KDL_CPU: "cpu", KDL_CUDA_HOST: "cuda_host"}.get(kind, f"DLPack device {kind}")
    ptr = (t.data or 0) + t.byte_offset
    del capsule
    if ptr >= 1 << 64:
        raise ArgumentValueError(f"DLPack tensor: data pointer 0x{t.data or 0:x} + byte_offset {t.byte_offset} is "
                                 f"beyond 2**64")
    checked_extents(shape, strides, "DLPack tensor")
    return TensorView(ptr, dtype, name, shape, strides, ordinal, dev_name, "dlpack")


def launch_device(owner: str, views: Iterable[tuple[str, TensorView | ListView | None]], *, kind: str = "parameter",
                  needs: str = "kernels") -> int | None:
    """The CUDA device every array of one launch is on (None when no argument is an array).

    ``owner`` names the callee in messages ("kernel add", "host program gemm"), ``kind`` its arguments
    ("parameter", "argument"), ``needs`` what needs device memory ("kernels", "host programs"). Memory that is not
    on a CUDA device, or arrays on two devices: ArgumentValueError naming the arguments."""
    ordinal: int | None = None
    first = ""
    for i, (name, view) in enumerate(views):
        if view is None:
            continue
        items = view.items if isinstance(view, ListView) else (view,)
        for k, v in enumerate(items):
            what = f"{kind} {i} '{name}'" + (f" element {k}" if isinstance(view, ListView) else "")
            if v.device is None:
                raise ArgumentValueError(f"{owner}: {what} is a {v.describe()}; {needs} need CUDA device memory "
                                         f"(move it with .cuda())")
            if ordinal is None:
                ordinal, first = v.device, what
            elif v.device != ordinal:
                raise ArgumentValueError(f"{owner}: {first} is on cuda:{ordinal} but {what} is on cuda:{v.device}; "
                                         f"all tensors of a launch must be on one device")
    return ordinal


# what a producer's own code may raise while it describes an array (its properties, __dlpack__, ...)
PRODUCER_ERRORS = (AttributeError, TypeError, ValueError, LookupError, ArithmeticError, BufferError)


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


def refusal(e: Exception, obj: Any, owner: str, where: str) -> LaunchError:
    """The error to raise when reading array argument ``where`` of ``owner`` ("kernel add", "parameter 0 'x'")
    raised ``e`` (one of :data:`PRODUCER_ERRORS`): the adapters' own ArgumentTypeError / ArgumentValueError with both
    named, or ArgumentTypeError for what a producer's own code raised (its ``__cause__``: raise it ``from
    err.__cause__``). Callers build the names only on this error path: reading an array stays cheap."""
    if isinstance(e, (ArgumentTypeError, ArgumentValueError)):
        return type(e)(f"{owner}: {where}: {e.message}")
    err: LaunchError = ArgumentTypeError(f"{owner}: {where}: cannot read the array of type {type(obj).__name__}: "
                            f"{type(e).__name__}: {e}")
    err.__cause__ = e
    return err
