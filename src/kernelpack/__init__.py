"""kernelpack: ship GPU kernels written in Python DSLs and CUDA C++ without Python, JIT or vendor runtimes."""

from __future__ import annotations

from .abi import Abi, DType, Field, Opaque, Param, Pointer, Scalar, Struct, TensorSpec
from .arch import Arch
from .errors import (
    AbiError,
    AbiMismatch,
    BundleError,
    CacheError,
    CompileError,
    CubinError,
    KernelpackError,
    LaunchError,
)

__version__ = "0.1.0"


def load(source):  # type: ignore[no-untyped-def]
    """Load a ``.kpack`` bundle or a built ``libNAME.so`` for launching from Python (see kernelpack.runtime.load)."""
    from .runtime import load as _load

    return _load(source)



def __getattr__(name: str):  # type: ignore[no-untyped-def]  # lazy: the C library generator imports the cubin reader
    if name == "Library":
        from .clib import Library

        return Library
    raise AttributeError(f"module 'kernelpack' has no attribute {name!r}")


__all__ = [
    "Abi",
    "AbiError",
    "AbiMismatch",
    "Arch",
    "BundleError",
    "CacheError",
    "CompileError",
    "CubinError",
    "DType",
    "Field",
    "KernelpackError",
    "Library",
    "LaunchError",
    "Opaque",
    "Param",
    "Pointer",
    "Scalar",
    "Struct",
    "TensorSpec",
    "__version__",
    "load",
]
