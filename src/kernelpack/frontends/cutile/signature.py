"""A cuTile kernel's ``KernelSignature`` from example arguments, exactly as cuTile's JIT would derive it for that call.

    sig = kernelpack.cutile.signature_from_args(vadd, (a, b, c, 1024))     # a KernelSignature, cuTile's own type
    print(kernelpack.cutile.signature_source({"f32": sig}))                 # freeze it into a Python module

cuTile derives a launch's signature in its C extension (``KernelSignature.from_kernel_args``, the function its JIT
dispatch uses): array dtype and rank, 32-bit index type unless annotated otherwise, a stride equal to 1 and a shape
equal to 1 made constants, 16-byte divisibility of the base address, of each stride (in bytes) and of each shape,
non-negative strides, elements that never overlap, no aliasing between arrays; scalars by their Python type and the
parameter's annotation; ``ct.Constant`` parameters by value. We call that function -- no rule is restated here.

It reads arrays through DLPack or ``__cuda_array_interface__`` and asks the CUDA driver for the array's context, so
without a GPU the arguments and the driver are stood in for:

* a torch **meta** tensor is passed as is (cuTile reads its ``data_ptr()``, shape and strides; the address of a meta
  tensor is its storage offset in bytes, from a base of 0); a CPU tensor becomes the meta tensor of the same shape,
  strides and address modulo 256 (torch aligns CPU storage to 64 bytes, the GPU caching allocator to 512: the same
  divisibility either way); a CUDA tensor is passed as is;
* a numpy array becomes an object with a ``__cuda_array_interface__`` at its host address (numpy aligns data to at
  least 16 bytes); numpy scalars become Python numbers;
* where no CUDA 13 driver can be initialized, cuTile's driver loader (``cuda.tile._load_libcuda``) is given a
  stand-in ``cuGetProcAddress`` whose ``cuInit`` succeeds, whose ``cuPointerGetAttribute`` reports "not device
  memory" (cuTile ignores the answer) and whose every other entry point fails with ``CUDA_ERROR_NO_DEVICE``. cuTile
  keeps the driver it loaded first for the life of the process: on such a machine a later ``ct.launch`` fails with
  "no CUDA-capable device", as it would have anyway.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import types
from collections.abc import Mapping, Sequence
from typing import Any

from ...core.diagnostics import chain_log, headline
from ...core.errors import CompileError

_STANDIN_VERSION = 99000  # a driver "new enough" for any cuTile's minimum (13.0 in cuda-tile 1.7)
_CUDA_ERROR_INVALID_VALUE = 1
_CUDA_ERROR_NO_DEVICE = 100
_LOCK = threading.Lock()
_STANDIN: dict[str, Any] = {}  # the stand-in driver's ctypes objects, kept alive for the life of the process


def signature_from_args(kernel: Any, example_args: Sequence[Any]) -> Any:
    """The ``KernelSignature`` (calling convention ``cutile_python_v2``) cuTile's JIT would compile ``kernel`` with
    for ``ct.launch(stream, grid, kernel, example_args)``."""
    from cuda.tile.compilation import CallingConvention, KernelSignature  # type: ignore[import-untyped]

    from .compile import _pyfunc

    kname = _pyfunc(kernel).__name__
    if isinstance(example_args, (str, bytes, Mapping)) or not isinstance(example_args, Sequence):
        raise CompileError(f"kernel {kname}: example_args must be a tuple or list of the arguments of one call "
                           f"(got {type(example_args).__name__})")
    args = tuple(_stand_in(a) for a in example_args)
    _ensure_driver()
    try:
        return KernelSignature.from_kernel_args(kernel, args, CallingConvention.cutile_python_v2())
    except Exception as e:  # cuTile raises TypeError/ValueError/TileError for arguments it cannot take
        raise CompileError(f"kernel {kname}: cuTile cannot derive a signature from the example arguments: "
                           f"{headline(e)}", log=chain_log(e)) from None


def signature_source(signatures: Any, name: str = "SIGNATURES") -> str:
    """Python source defining ``name`` as these signatures (a ``KernelSignature``, a list, or ``{variant: sig}``),
    for a module a ``[[cutile]]`` entry references with ``signatures = "sigs.py:SIGNATURES"``."""
    from cuda.tile.compilation import KernelSignature

    def one(sig: Any) -> str:
        if not isinstance(sig, KernelSignature):
            raise CompileError(f"signature_source takes KernelSignature objects (got {type(sig).__name__})")
        if sig.calling_convention.name != "cutile_python_v2":
            raise CompileError(f"calling convention {sig.calling_convention.name} is not supported")
        params = ",\n        ".join(_constraint_source(c) for c in sig.parameters)
        return f"KernelSignature([\n        {params},\n    ], CallingConvention.cutile_python_v2())"

    if isinstance(signatures, Mapping):
        body = "{\n" + "".join(f"    {k!r}: {one(v)},\n" for k, v in signatures.items()) + "}"
    elif isinstance(signatures, Sequence):
        body = "[\n" + "".join(f"    {one(v)},\n" for v in signatures) + "]"
    else:
        body = "[\n    " + one(signatures) + ",\n]"
    return ("import cuda.tile as ct\n"
            "from cuda.tile.compilation import (ArrayConstraint, CallingConvention, KernelSignature, ListConstraint,\n"
            "                                   ScalarConstraint)\n\n"
            f"{name} = {body}\n")


def _constraint_source(c: Any) -> str:
    from cuda.tile.compilation import (  # type: ignore[import-untyped]
        ArrayConstraint,
        ConstantConstraint,
        ListConstraint,
        ScalarConstraint,
        TupleConstraint,
    )

    if isinstance(c, ConstantConstraint):
        return repr(c.value)
    if isinstance(c, ScalarConstraint):
        return f"ScalarConstraint({_dtype(c.dtype)})"
    if isinstance(c, TupleConstraint):
        items = ", ".join(_constraint_source(x) for x in c.items)
        return f"({items},)" if len(c.items) == 1 else f"({items})"
    if isinstance(c, ListConstraint):
        return (f"ListConstraint({_constraint_source(c.element)}, alias_groups={c.alias_groups!r}, "
                f"elements_may_alias={c.elements_may_alias!r})")
    if isinstance(c, ArrayConstraint):
        pad = "\n" + " " * 12
        return (f"ArrayConstraint({_dtype(c.dtype)}, {c.ndim}, index_dtype={_dtype(c.index_dtype)}, "
                f"alias_groups={c.alias_groups!r}, may_alias_internally={c.may_alias_internally!r},{pad}"
                f"stride_lower_bound_incl={c.stride_lower_bound_incl!r}, stride_constant={c.stride_constant!r}, "
                f"shape_constant={c.shape_constant!r},{pad}stride_divisible_by={c.stride_divisible_by!r}, "
                f"shape_divisible_by={c.shape_divisible_by!r}, base_addr_divisible_by={c.base_addr_divisible_by!r})")
    raise CompileError(f"{type(c).__name__} constraints have no source form in kernelpack")


def _dtype(dt: Any) -> str:
    return f"ct.{dt.name}"


# ------------------------------------------------------------------------------------------------ the arguments


def _stand_in(a: Any) -> Any:
    """An example argument as cuTile can read it without a GPU (see the module docstring)."""
    mod = type(a).__module__
    if mod.startswith("torch"):
        import torch

        if isinstance(a, torch.Tensor) and a.device.type == "cpu":
            return torch.empty(0, dtype=a.dtype, device="meta").as_strided(
                a.shape, a.stride(), (a.data_ptr() % 256) // max(a.element_size(), 1))
        return a
    if mod == "numpy":
        import numpy as np

        if isinstance(a, np.ndarray):
            return _HostArray(a)
        if isinstance(a, np.bool_):
            return bool(a)
        if isinstance(a, np.integer):
            return int(a)
        if isinstance(a, np.floating):
            return float(a)
    if isinstance(a, list):
        return [_stand_in(x) for x in a]
    if isinstance(a, tuple) and not hasattr(a, "_fields"):
        return tuple(_stand_in(x) for x in a)
    return a


class _HostArray:
    """A numpy array as a ``__cuda_array_interface__`` at its host address."""

    def __init__(self, a: Any) -> None:
        self.__cuda_array_interface__ = {"shape": tuple(a.shape), "strides": tuple(a.strides),
                                         "typestr": a.dtype.str, "data": (int(a.ctypes.data), False), "version": 3}


# ------------------------------------------------------------------------------------------------ the driver


def _ensure_driver() -> None:
    """Let cuTile load the real driver where one initializes (CUDA 13+), else give it the stand-in."""
    with _LOCK:
        if "cuda.tile._load_libcuda" in sys.modules or _real_driver_works():
            return
        sys.modules["cuda.tile._load_libcuda"] = _standin_module()


def _real_driver_works() -> bool:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        return lib.cuInit(0) == 0 and lib.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value >= 13000
    except (OSError, AttributeError):
        return False


def _standin_module() -> types.ModuleType:
    res = ctypes.c_int
    fail = ctypes.CFUNCTYPE(res)(lambda: _CUDA_ERROR_NO_DEVICE)
    message = ctypes.c_char_p(b"no CUDA driver (kernelpack's stand-in, for deriving signatures without a GPU)")

    @ctypes.CFUNCTYPE(res, ctypes.POINTER(ctypes.c_int))
    def driver_version(out: Any) -> int:
        out[0] = _STANDIN_VERSION
        return 0

    @ctypes.CFUNCTYPE(res, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))
    def error_string(_code: int, out: Any) -> int:
        out[0] = message.value
        return 0

    table = {
        b"cuInit": ctypes.CFUNCTYPE(res, ctypes.c_uint)(lambda _flags: 0),
        b"cuDriverGetVersion": driver_version,
        b"cuGetErrorString": error_string,
        b"cuGetErrorName": error_string,
        b"cuPointerGetAttribute": ctypes.CFUNCTYPE(res)(lambda: _CUDA_ERROR_INVALID_VALUE),
    }

    @ctypes.CFUNCTYPE(res, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64,
                      ctypes.c_void_p)
    def get_proc_address(symbol: bytes, out: Any, _version: int, _flags: int, status: int | None) -> int:
        out[0] = ctypes.cast(table.get(symbol, fail), ctypes.c_void_p).value
        if status:
            ctypes.cast(status, ctypes.POINTER(ctypes.c_int))[0] = 0  # CU_GET_PROC_ADDRESS_SUCCESS
        return 0

    pointer = ctypes.c_void_p(ctypes.cast(get_proc_address, ctypes.c_void_p).value)
    _STANDIN.update(fail=fail, message=message, table=table, get_proc_address=get_proc_address, pointer=pointer)
    mod = types.ModuleType("cuda.tile._load_libcuda", "kernelpack's stand-in for cuTile's driver loader (no GPU)")
    mod.cuGetProcAddress_v2_ptrptr = ctypes.addressof(pointer)  # type: ignore[attr-defined]
    return mod
