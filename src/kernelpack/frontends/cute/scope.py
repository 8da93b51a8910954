"""Scopes over the CuTe DSL's process-wide state that a build must control: the target arch (seen while the user's
objects are constructed, not only at ``cute.compile``) and the host ABI of an export (plain, never TVM-FFI).

The DSL answers "which arch?" (``BaseDSL._get_dsl().get_arch_enum()``, which kernels and libraries read in their
constructors) from the compile's ``--gpu-arch`` while ``cute.compile`` runs, and otherwise from each DSL singleton's
``envar.arch`` (``CUTE_DSL_ARCH``, else the local GPU, else sm_100a on a machine with none). Some libraries read
``CUTE_DSL_ARCH`` from the environment themselves. :func:`target_arch` sets both for the duration of a block.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from ...core.arch import Arch, parse_archs
from ...core.errors import CompileError
from .device import answering, check_device

_ENV = "CUTE_DSL_ARCH"
_LOCK = threading.RLock()
_LOCAL = threading.local()  # .active: the target_arch blocks this thread is in, innermost last
T = TypeVar("T")
_TVM_FFI = re.compile(r"(?<!\S)--enable-tvm-ffi(?:=\S*)?(?!\S)")


def _dsl_singletons() -> list[Any]:
    from cutlass.base_dsl.dsl import BaseDSL, DSLSingletonMeta

    BaseDSL._get_dsl()  # the CuTe DSL exists once cutlass is imported; make sure
    return [d for d in list(DSLSingletonMeta._instances.values()) if hasattr(d, "envar")]


def current_target() -> Arch | None:
    """The arch of the innermost :func:`target_arch` block around this call, if any."""
    active: list[tuple[Arch, dict[str, Any]]] = getattr(_LOCAL, "active", [])
    return active[-1][0] if active else None


def current_device() -> dict[str, Any]:
    """The target device's properties of the innermost :func:`target_arch` block ({} outside one)."""
    active: list[tuple[Arch, dict[str, Any]]] = getattr(_LOCAL, "active", [])
    return dict(active[-1][1]) if active else {}


@contextlib.contextmanager
def target_arch(arch: str | Arch, device: Mapping[str, Any] | None = None) -> Iterator[Arch]:
    """Within the block the CuTe DSL targets ``arch``: objects constructed here (kernel classes that read the DSL's
    arch in ``__init__``, tiled MMAs, copy atoms) and compiles run here see it, as ``CUTE_DSL_ARCH`` would make them.

        with kernelpack.cute.target_arch("sm_90a"):
            kernel = MyKernel(...)                       # reads the DSL's arch: sm_90a
            program = kernelpack.cute.export(kernel, *args, arch="sm_90a")

    ``device``: the target device's properties (``{"sm_count": 148}``, see :mod:`.device`), answered to kernels that
    ask ``cutlass.utils.HardwareInfo`` while traced, in place of the build machine's GPU; a block of the same arch
    inside keeps them. Restores the previous arch (and ``CUTE_DSL_ARCH``) on exit. Blocks nest; one thread at a time
    holds them.
    """
    a = Arch.parse(arch)
    if a.virtual:
        raise CompileError(f"target_arch({str(a)!r}): the CuTe DSL targets a real arch; use {a.real} (the PTX of a "
                           f"virtual arch is compiled for its real one)")
    name = str(a.real)
    outer = current_target()
    if device is not None:
        dev = check_device(device, f"target_arch({name!r})")
    else:
        dev = current_device() if outer is not None and outer.real == a.real else {}
    with _LOCK:
        saved = [(d, d.envar._arch) for d in _dsl_singletons()]
        env = os.environ.get(_ENV)
        active: list[tuple[Arch, dict[str, Any]]] = _LOCAL.__dict__.setdefault("active", [])
        active.append((a, dev))
        try:
            for d, _ in saved:
                d.envar.arch = name
            os.environ[_ENV] = name
            with answering(name, dev):
                yield a
        finally:
            active.pop()
            for d, old in saved:
                d.envar._arch = old
            if env is None:
                os.environ.pop(_ENV, None)
            else:
                os.environ[_ENV] = env


def per_arch(arch: str | Arch | Sequence[str | Arch], build: Callable[[Arch], T]) -> list[T]:
    """``build(a)`` for each arch ``a``, each inside :func:`target_arch` ``(a)``: the per-arch build step.

        programs = kernelpack.cute.per_arch(["sm_90a", "sm_100a"], lambda a: kernelpack.cute.export(
            MyKernel(...), *example_args(), arch=a, name="fwd"))
        kernelpack.Library("attn", *programs).build("out")   # one entry, one object per arch
    """
    out = []
    for a in parse_archs(arch):
        with target_arch(a):
            out.append(build(a))
    return out


def check_target(arch: Arch, what: str) -> None:
    """Refuse compiling for ``arch`` inside a :func:`target_arch` block of another arch: the objects built there were
    built for that one."""
    cur = current_target()
    if cur is not None and cur.real != arch.real:
        raise CompileError(f"{what}: compiling for {arch} inside kernelpack.cute.target_arch({str(cur)!r}); objects "
                           f"built in that block were built for {cur}. Build each arch's objects in its own block "
                           f"(kernelpack.cute.target_arch(arch)) and pass arch=that arch")


def without_tvm_ffi(options: str) -> tuple[str, bool]:
    """``options`` with ``--enable-tvm-ffi`` removed, and whether it was there."""
    stripped = _TVM_FFI.sub(" ", options)
    return " ".join(stripped.split()), stripped != options


@contextlib.contextmanager
def plain_host_abi() -> Iterator[None]:
    """Within the block the DSL compiles host functions with its plain C ABI even where ``CUTE_DSL_ENABLE_TVM_FFI``
    asks for TVM-FFI (an export object must not import TVM-FFI's runtime)."""
    with _LOCK:
        saved = [(d, d.envar.enable_tvm_ffi) for d in _dsl_singletons()]
        try:
            for d, _ in saved:
                d.envar.enable_tvm_ffi = False
            yield
        finally:
            for d, old in saved:
                d.envar.enable_tvm_ffi = old
