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
    "LaunchError",
    "Opaque",
    "Param",
    "Pointer",
    "Scalar",
    "Struct",
    "TensorSpec",
    "__version__",
]
