"""cuTile's signature-from-arguments (``KernelSignature.from_kernel_args``) on a machine without a GPU.

cuTile derives the signature its JIT would compile in its C extension, which opens ``libcuda.so.1`` (and asks
for the driver version) and accepts only device arrays. Here, where there is no driver:

* a stub ``libcuda.so.1`` is built and loaded first (every entry point "succeeds" doing nothing;
  ``cuDriverGetVersion`` says 13.0). It serves only that derivation: nothing is launched, and kernelpack never
  sees it (its runtime loads the driver on first launch, which the build machine never does);
* each CPU tensor is handed over as a ``__cuda_array_interface__`` view (the derivation reads pointer, shape and
  strides; none is dereferenced). The interface has no bfloat16/fp8 type strings, so those go as the unsigned
  type of the same width and the constraint's dtype is put back afterwards -- every property cuTile derives
  (alignment, divisibility in elements, index width) depends on the element size only.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

_STUB = r"""
#include <stddef.h>
#include <string.h>
static int ok(void) { return 0; }
static int version(int* v) { *v = 13000; return 0; }
int cuGetProcAddress_v2(const char* s, void** p, int v, unsigned long long f, int* st) {
    (void)v; (void)f;
    if (p) *p = strcmp(s, "cuDriverGetVersion") == 0 ? (void*)version : (void*)ok;
    if (st) *st = 0;
    return 0;
}
"""


def _has_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


@functools.cache
def ensure_driver() -> str:
    """'real' when a driver is present, else build and load the stub (once per process)."""
    if _has_driver():
        return "real"
    d = Path(tempfile.gettempdir()) / f"kp-corpus-stubcuda-{os.getuid()}"
    d.mkdir(exist_ok=True)
    lib = d / "libcuda.so.1"
    if not lib.exists():
        (d / "stub.c").write_text(_STUB)
        tmp = d / f"libcuda.so.1.{os.getpid()}"
        subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(tmp),
                        str(d / "stub.c")], check=True, capture_output=True)
        os.replace(tmp, lib)
    ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
    return "stub"


_TYPESTR = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "bfloat16": "<u2", "int8": "|i1", "int16": "<i2",
            "int32": "<i4", "int64": "<i8", "uint8": "|u1", "bool": "|b1", "float8_e4m3fn": "|u1",
            "float8_e5m2": "|u1"}


class DeviceView:
    """A CPU tensor as cuTile's C extension reads a device array."""

    def __init__(self, t: Any) -> None:
        name = str(t.dtype).removeprefix("torch.")
        self.dtype_name = name
        self.__cuda_array_interface__ = {
            "shape": tuple(t.shape), "strides": tuple(s * t.element_size() for s in t.stride()),
            "typestr": _TYPESTR[name], "data": (t.data_ptr(), False), "version": 3}


def _fix(constraint: Any, view: DeviceView) -> Any:
    import cuda.tile as ct

    if view.dtype_name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return dataclasses.replace(constraint, dtype=getattr(ct, view.dtype_name))
    return constraint


def signature_from_args(kernel: Any, args: tuple[Any, ...]) -> Any:
    """The ``KernelSignature`` (cutile_python_v2) cuTile's JIT would compile for these (CPU) arguments."""
    import torch
    from cuda.tile.compilation import CallingConvention, KernelSignature

    ensure_driver()
    views: list[Any] = []

    def wrap(a: Any) -> Any:
        if isinstance(a, torch.Tensor) and a.device.type == "cpu":
            v = DeviceView(a)
            views.append(v)
            return v
        if isinstance(a, tuple):
            return tuple(wrap(x) for x in a)
        if isinstance(a, list):
            return [wrap(x) for x in a]
        return a

    wrapped = tuple(wrap(a) for a in args)
    sig = KernelSignature.from_kernel_args(kernel, wrapped, CallingConvention.cutile_python_v2())
    fixed = [_fix_tree(c, a) for c, a in zip(sig.parameters, wrapped)]
    if fixed != list(sig.parameters):
        sig = KernelSignature(fixed, sig.calling_convention).with_mangled_symbol(
            kernel._annotated_function.pyfunc.__name__)
    return sig


def _fix_tree(c: Any, a: Any) -> Any:
    from cuda.tile.compilation import ArrayConstraint, TupleConstraint

    if isinstance(a, DeviceView) and isinstance(c, ArrayConstraint):
        return _fix(c, a)
    if isinstance(a, (tuple, list)) and isinstance(c, TupleConstraint):
        return dataclasses.replace(c, items=tuple(_fix_tree(ci, ai) for ci, ai in zip(c.items, a)))
    return c
