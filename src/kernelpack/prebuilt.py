"""Prebuilt binaries as kernelpack bundles: cubins, fatbins and objects with device code from any nvcc/ptxas build,
their kernels typed by a C parameter list (or an Abi) and verified against every cubin.

    from kernelpack import prebuilt
    bundle = prebuilt.compile(["kernels.fatbin"], {"add": "const float* x, const float* y, float* out, int n"})

The frontend lives in :mod:`kernelpack.frontends.prebuilt` (one module: the verb and its ``[[cubin]]`` entry).
"""

from __future__ import annotations

from .frontends.prebuilt.entry import Image, Kernel, compile, read_binaries

__all__ = ["Image", "Kernel", "compile", "read_binaries"]
