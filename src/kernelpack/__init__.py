"""kernelpack: ship GPU kernels written in Python DSLs and CUDA C++ without Python, JIT or vendor runtimes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core.abi import Abi, DType, Field, Opaque, Param, Pointer, Scalar, Struct, TensorSpec
from .core.errors import (
    AbiError,
    AbiMismatch,
    BundleError,
    CacheError,
    CompileError,
    CubinError,
    KernelpackError,
    LaunchError,
)

if TYPE_CHECKING:
    import os

    from . import argtypes as argtypes
    from . import cuda as cuda
    from . import cute as cute
    from . import cutile as cutile
    from . import prebuilt as prebuilt
    from . import project as project
    from . import testing as testing
    from . import triton as triton
    from . import tuning as tuning
    from .argtypes import Kernel as Kernel
    from .bundle.artifact import KernelArtifact as KernelArtifact
    from .bundle.kpack import Bundle as Bundle
    from .capture import Capture as capture
    from .clib import Library as Library
    from .core.arch import Arch as Arch
    from .runtime.errors import ArgumentError as ArgumentError
    from .runtime.errors import ArgumentTypeError as ArgumentTypeError
    from .runtime.errors import ArgumentValueError as ArgumentValueError
    from .runtime.errors import DriverError as DriverError
    from .runtime.errors import NoBinaryForDevice as NoBinaryForDevice
    from .runtime.errors import NoMatchingSpecialization as NoMatchingSpecialization
    from .runtime.module import KernelModule as KernelModule

from ._aliases import install as _install_aliases
from .core.version import __version__

_install_aliases()  # kernelpack.core.abi and the other paths of the layout before 2026-12 (kernelpack._aliases)

# the frontends and the public modules, imported on first use: `import kernelpack` imports none of them, and no
# frontend imports its DSL before a compile needs it (tests/test_runtime_imports.py)
_FRONTENDS = ("cuda", "triton", "cutile", "cute", "prebuilt")
_MODULES = (*_FRONTENDS, "argtypes", "capture", "project", "testing", "tuning")
# the public classes, from where they live (imported on first use; Arch too: loading a library of CuTe host programs
# needs none)
_CLASSES = {"Bundle": "bundle.kpack", "KernelArtifact": "bundle.artifact", "KernelModule": "runtime.module",
            "Kernel": "argtypes", "Library": "clib", "Arch": "core.arch",
            **dict.fromkeys(("ArgumentError", "ArgumentTypeError", "ArgumentValueError", "DriverError",
                             "NoBinaryForDevice", "NoMatchingSpecialization"), "runtime.errors")}


def load(source: str | os.PathLike[str] | Bundle, *, verify: bool = False) -> KernelModule:
    """Load a ``.kpack`` bundle or a built ``libNAME.so`` for launching from Python (see kernelpack.runtime.load):
    a module whose attributes are its kernels (:class:`kernelpack.Kernel`); ``verify=True`` verifies every kernel's
    binaries now instead of at each one's first use."""
    from .runtime import load as _load

    return _load(source, verify=verify)


def __getattr__(name: str) -> Any:  # PEP 562: what `import kernelpack` does not import
    if name in _MODULES:  # the submodule (importing it binds it here: this runs once per name)
        from .core._lazy import submodule

        return submodule(__name__, name)
    where = _CLASSES.get(name)
    if where is not None:
        import importlib

        value = getattr(importlib.import_module(f".{where}", __name__), name)
        globals()[name] = value
        return value
    from ._aliases import resolve

    moved = resolve(name)  # kernelpack.core.abi as an attribute, as before the folders
    if moved is not None:
        return moved
    raise AttributeError(f"module 'kernelpack' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names: the API (``__all__``) and the public modules."""
    return sorted({*__all__, *_MODULES})


__all__ = [
    "Abi",
    "AbiError",
    "AbiMismatch",
    "ArgumentError",
    "ArgumentTypeError",
    "ArgumentValueError",
    "Arch",
    "Bundle",
    "BundleError",
    "CacheError",
    "CompileError",
    "CubinError",
    "DType",
    "DriverError",
    "Field",
    "Kernel",
    "KernelArtifact",
    "KernelModule",
    "KernelpackError",
    "Library",
    "LaunchError",
    "NoBinaryForDevice",
    "NoMatchingSpecialization",
    "Opaque",
    "Param",
    "Pointer",
    "Scalar",
    "Struct",
    "TensorSpec",
    "__version__",
    "capture",
    "load",
]
