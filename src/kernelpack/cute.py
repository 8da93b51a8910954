"""CuTe DSL frontend, the public verbs (the frontend lives in :mod:`kernelpack.frontends.cute`): ``@cute.jit``
functions compiled ahead of time, without a GPU, with derived typed ABIs.

* :func:`compile` -> :class:`~kernelpack.bundle.Bundle` of kernel-level artifacts (cubin + typed signature +
  launch config, the grid recorded as a formula of the arguments when it is one);
* :func:`export` -> :class:`~kernelpack.clib.host.HostProgram` (CuTe's host launcher object + derived entry
  parameters), linked with kernelpack's driver shim by ``kernelpack.Library(lib, *programs)`` (alone or with kernels);
* :func:`capture_compiles` / :func:`recording_compiles`: the ``cute.compile`` calls a package's own interface makes,
  recorded (:class:`CompileCall`) for export;
* :func:`target_arch` (a block in which the DSL targets an arch, construction included) and :func:`per_arch` (a
  build run once per arch, each in its block).
"""

from __future__ import annotations

from .frontends.cute.compiler import compile, dsl_version, export, host_leaves
from .frontends.cute.derive import Leaf, to_abi
from .frontends.cute.intercept import CompileCall, capture_compiles, recording_compiles
from .frontends.cute.scope import current_target, per_arch, target_arch

__all__ = ["CompileCall", "Leaf", "capture_compiles", "compile", "current_target", "dsl_version", "export",
           "host_leaves", "per_arch", "recording_compiles", "target_arch", "to_abi"]
