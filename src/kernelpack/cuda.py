"""CUDA C++ frontend, the public verb: ``kernelpack.cuda.compile(source, kernels, arch=...) -> Bundle``.

    bundle = kernelpack.cuda.compile("kernels.cu", ["axpy", "scale<float>", "scale<__half>"],
                                     arch=["sm_80", "sm_90a"])

The frontend lives in :mod:`kernelpack.frontends.cuda`.
"""

from __future__ import annotations

from .frontends.cuda.compile import ArchSpec, compile

__all__ = ["ArchSpec", "compile"]
