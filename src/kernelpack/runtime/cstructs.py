"""``ctypes`` mirrors of the C library's public structs (``kp_launch``, ``kp_tensor``), for Python code that calls a
built library through ``ctypes`` (tests, the corpus's GPU checks, benchmarks). One definition, checked against the
generated header's ``sizeof``/``offsetof`` by tests/test_clib_structs.py, so a field added to the header (as
``kp_launch.flags`` was) cannot leave a stale copy that passes garbage in the bytes after it."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from ..launch.codes import MAX_RANK

Dim3 = ctypes.c_uint32 * 3


class KpLaunch(ctypes.Structure):
    """``kp_launch``: grid, block, dynamic_smem, cluster, stream, flags (a zero field: the kernel's own)."""

    _fields_ = [("grid", Dim3), ("block", Dim3), ("dynamic_smem", ctypes.c_uint32), ("cluster", Dim3),
                ("stream", ctypes.c_void_p), ("flags", ctypes.c_uint32)]


class KpTensor(ctypes.Structure):
    """``kp_tensor``: data, dtype (a ``kp_dtype`` code), rank, shape and stride (elements) of up to MAX_RANK modes."""

    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_RANK), ("stride", ctypes.c_int64 * MAX_RANK)]


def dim3(v: int | Sequence[int]) -> ctypes.Array[ctypes.c_uint32]:
    """``(x, y, z)`` from an int or a sequence of up to three (missing ones 1; an empty sequence: all 0)."""
    t = (v,) if isinstance(v, int) else tuple(v)
    return Dim3(*((t + (1, 1, 1))[:3] if t else (0, 0, 0)))


def launch(grid: int | Sequence[int], block: int | Sequence[int] = (), *, smem: int = 0,
           cluster: int | Sequence[int] = (), stream: int | None = None, flags: int = 0) -> KpLaunch:
    """A ``kp_launch`` (block and cluster default to ``{0,0,0}``: the kernel's own)."""
    return KpLaunch(dim3(grid), dim3(block), smem, dim3(cluster), ctypes.c_void_p(stream), flags)




def kp_tensor(obj: Any) -> KpTensor:
    """The ``kp_tensor`` of a tensor (torch, ``__cuda_array_interface__`` or DLPack), read as the runtime reads it
    (element type from the same table, strides in elements)."""
    from ..launch.codes import DTYPE_CODE
    from .adapters import as_view

    view = as_view(obj, None)
    if view is None or view.dtype is None:
        raise ValueError(f"not a tensor of a kernelpack element type: {type(obj).__name__}")
    rank = len(view.shape)
    if rank > MAX_RANK:
        raise ValueError(f"kp_tensor holds rank <= {MAX_RANK}, got {rank}")
    pad = (0,) * (MAX_RANK - rank)
    return KpTensor(view.ptr, DTYPE_CODE[view.dtype], rank, (ctypes.c_int64 * MAX_RANK)(*view.shape, *pad),
                    (ctypes.c_int64 * MAX_RANK)(*view.strides, *pad))


__all__ = ["KpLaunch", "KpTensor", "dim3", "kp_tensor", "launch"]
