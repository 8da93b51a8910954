"""kernelpack: ship GPU kernels written in Python DSLs and CUDA C++ without Python, JIT or vendor runtimes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .core.abi import Abi, DType, Field, Opaque, Param, Pointer, Scalar, Struct, TensorSpec
from .core.arch import Arch
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
    from . import cuda as cuda
    from . import cute as cute
    from . import cutile as cutile
    from . import prebuilt as prebuilt
    from . import triton as triton
    from .capture import Capture as capture
    from .clib import Library as Library

from ._aliases import install as _install_aliases
from .core.version import __version__

_install_aliases()  # kernelpack.core.abi and the other paths of the layout before 2026-12 (kernelpack._aliases)

# the frontends, imported on first use: `import kernelpack` imports none of them, and none imports its DSL before a
# compile needs it (tests/test_runtime_imports.py)
_FRONTENDS = ("cuda", "triton", "cutile", "cute", "prebuilt")


def load(source, *, verify=False):  # type: ignore[no-untyped-def]
    """Load a ``.kpack`` bundle or a built ``libNAME.so`` for launching from Python (see kernelpack.runtime.load);
    ``verify=True`` verifies every kernel's binaries now instead of at each one's first use."""
    from .runtime import load as _load

    return _load(source, verify=verify)


def __getattr__(name: str):  # type: ignore[no-untyped-def]  # PEP 562: what `import kernelpack` does not import
    if name in _FRONTENDS:  # the submodule (importing it binds it here: this runs once per name)
        from .core._lazy import submodule

        return submodule(__name__, name)
    if name == "capture":  # kernelpack.capture(device=...): the package, callable (kernelpack/capture/__init__.py)
        from .core._lazy import submodule

        return submodule(__name__, name)
    if name == "Library":  # the C library generator imports the cubin reader and the builders
        from .clib import Library

        return Library
    from ._aliases import resolve

    moved = resolve(name)  # kernelpack.core.abi as an attribute, as before the folders
    if moved is not None:
        return moved
    raise AttributeError(f"module 'kernelpack' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FRONTENDS) | {"Library", "capture"})


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
    "capture",
    "load",
]
