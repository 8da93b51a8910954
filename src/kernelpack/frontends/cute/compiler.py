"""Compile CuTe DSL ``@cute.jit`` functions ahead of time, without a GPU, for every requested arch.

    bundle = kernelpack.cute.compile(elementwise_add, a, b, c, arch=["sm_80", "sm_90a"], name="ew_add",
                                     variant="f32")                       # kernel-level artifacts
    program = kernelpack.cute.export(gemm, a, b, c, arch="sm_90a", name="gemm", variant="f16")  # host program
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import inspect
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...bundle.artifact import KernelArtifact, Provenance
from ...bundle.kpack import Bundle
from ...core.abi import Abi, Param
from ...core.arch import Arch, parse_archs
from ...core.binary import Binary
from ...core.cubin import read_cubin
from ...core.diagnostics import chain_log, headline
from ...core.errors import CompileError, KernelpackError
from ...core.launchspec import LaunchSpec
from .capture import Launch, capture_launches
from .derive import Leaf, leaves, to_abi
from .examples import to_global
from .llvm import check_host_abi, host_arg_types, launch_smem_bytes
from .scope import check_target, plain_host_abi, target_arch, without_tvm_ffi
from .types import mlir_ir, tensor_checks

if TYPE_CHECKING:
    from ...bundle.host_program import HostProgram

ArchSpec = str | Arch | Sequence[str | Arch]


@dataclass
class _Traced:
    arch: Arch
    compiled: Any
    launches: list[Launch]
    cubin: bytes
    ptx: bytes = b""  # kept for a virtual arch (compute_XY): what ships


def dsl_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nvidia-cutlass-dsl")
    except PackageNotFoundError:  # pragma: no cover - a source checkout of the DSL
        return "unknown"


def _cute_arch(a: Arch) -> str:
    """CuTe's --gpu-arch: the SASS name (compute_80 compiles for sm_80 and keeps the PTX)."""
    return str(a.real)


def _compile_arch(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], arch: Arch,
                  options: str) -> _Traced:
    import cutlass.cute as cute

    src = _source_file(fn)
    if src is None or not os.path.isfile(src):
        raise CompileError(f"{_fn_name(fn)}: CuTe needs kernel source in a real .py file (got {src!r})")
    check_target(arch, _fn_name(fn))
    try:
        with tempfile.TemporaryDirectory(prefix="kp-cute-") as dump, capture_launches() as launches, \
                target_arch(arch.real):
            # --keep-cubin writes <function>.<arch>.cubin files: keep them out of the caller's directory
            keep = "--keep-cubin --keep-ptx" if arch.virtual else "--keep-cubin"
            opts = f"--gpu-arch {_cute_arch(arch)} {keep} --dump-dir={dump} {options}".strip()
            compiled = cute.compile(fn, *args, **kwargs, options=opts)
    except KernelpackError:
        raise
    except Exception as e:  # the DSL's errors (CompilerDiagnosticError, DSLUserCodeError...) and the user's own
        raise CompileError(f"{_fn_name(fn)}: CuTe compile for {arch} failed: {headline(e)}", log=chain_log(e)) from e
    cubin = compiled.__cubin__
    if isinstance(cubin, str):
        cubin = cubin.encode("latin-1")
    if not cubin:
        raise CompileError(f"{_fn_name(fn)} ({arch}): CuTe kept no cubin (is the function launching a kernel?)")
    return _Traced(arch, compiled, launches, bytes(cubin), _kept_ptx(fn, compiled, arch) if arch.virtual else b"")


def _kept_ptx(fn: Any, compiled: Any, arch: Arch) -> bytes:
    """The PTX CuTe kept for a virtual arch; it must be for that arch's target (CuTe writes ``sm_XYa`` PTX where
    the kernel needs arch-specific instructions: then only ``compute_XYa`` can have it)."""
    from ...core.ptx import ptx_target

    ptx = getattr(compiled, "__ptx__", None)
    if isinstance(ptx, bytes):
        ptx = ptx.decode(errors="replace")
    if not ptx:
        raise CompileError(f"{_fn_name(fn)} ({arch}): CuTe kept no PTX for {arch}")
    ptx = ptx.rstrip("\0")
    target = ptx_target(ptx)
    if target != arch.real:
        raise CompileError(f"{_fn_name(fn)} ({arch}): CuTe wrote PTX for .target {target}, so it cannot be {arch} "
                           f"PTX; ask for {target.ptx_name} (runs where {target} SASS runs) or an older virtual arch")
    return ptx.encode()


def _source_file(fn: Any) -> str | None:
    try:
        return inspect.getsourcefile(inspect.unwrap(_target(fn)))
    except (TypeError, CompileError):
        return None


def _fn_name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(type(fn), "__qualname__", repr(fn)))


def _target(fn: Any) -> Callable[..., Any]:
    """The Python function whose signature the host parameters follow (a jit object's __call__ for receivers)."""
    if inspect.isfunction(fn) or inspect.ismethod(fn):
        return fn
    if not callable(fn):
        raise CompileError(f"{fn!r} is not callable")
    return type(fn).__call__.__get__(fn)


def _source_hash(fn: Any) -> str:
    src = _source_file(fn)
    try:
        return hashlib.sha256(Path(src).read_bytes()).hexdigest() if src else ""
    except OSError:
        return ""


def _provenance(fn: Any, options: str) -> Provenance:
    v = dsl_version()
    return Provenance("cute", v, f"nvidia-cutlass-dsl {v}", tuple(options.split()), _source_hash(fn))


def _host_types(obj: Any) -> list[str]:
    """MLIR type spellings of an example argument outside tracing (a scratch MLIR context and module)."""
    ir = mlir_ir()
    from cutlass.base_dsl.typing import get_mlir_types

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            return [str(t) for t in get_mlir_types(obj)]


def host_leaves(fn: Any, args: Sequence[Any], kwargs: dict[str, Any] | None = None) -> list[Leaf]:
    """The C parameters of the ``@cute.jit`` function called with these example arguments."""
    args, kw = to_global(args, dict(kwargs or {}), _fn_name(fn))
    return leaves(_target(fn), args, kw, _host_types)


def compile(  # noqa: A001 - the frontend verb, as kernelpack.cuda.compile
    fn: Callable[..., Any],
    *args: Any,
    arch: ArchSpec,
    name: str | None = None,
    variant: str = "",
    options: str = "",
    kwargs: dict[str, Any] | None = None,
) -> Bundle:
    """Compile ``fn(*args, **kwargs)`` for every arch and return each kernel it launches as a verified artifact.

    The kernel's ABI is derived from the DSL values the function hands to ``.launch()``; its grid is recorded as
    a formula of those arguments when it is one (else callers pass the grid). ``name`` defaults to the function
    name; when the function launches several kernels they become ``name_<kernel>``.
    """
    archs = parse_archs(arch)
    args, kw = to_global(args, dict(kwargs or {}), _fn_name(fn))
    traced = [_compile_arch(fn, args, kw, a, options) for a in archs]
    base = name or re.sub(r"\W", "_", _fn_name(fn).split(".")[-1]).strip("_") or "kernel"
    launches = _unique_launches(traced[0].launches)
    if not launches:
        raise CompileError(f"{_fn_name(fn)}: traced no kernel launch")
    prov = _provenance(fn, options)
    out = []
    for i, rec in enumerate(launches):
        if rec.error:
            raise CompileError(f"{_fn_name(fn)}: kernel {rec.kernel} has no kernel-level C form ({rec.error}); use "
                               f"kernelpack.cute.export for its host program")
        kname = base if len(launches) == 1 else f"{base}_{rec.kernel}"
        binaries = []
        for t in traced:
            other = _unique_launches(t.launches)[i]
            if other.symbol != rec.symbol or [p.type for p in other.params] != [p.type for p in rec.params]:
                raise CompileError(f"kernel {kname}: {t.arch} traced {other.symbol} with a different signature than "
                                   f"{traced[0].arch}")
            binaries.append(Binary(t.arch, _kernel_ptx(t.ptx, rec.symbol, kname), "ptx") if t.arch.virtual else
                            Binary(t.arch, _kernel_cubin(t.cubin, rec.symbol, kname)))
        smem = rec.smem if rec.smem is not None else _smem(traced[0], rec, len(launches))
        spec = LaunchSpec(block=rec.block, dynamic_smem=smem, cluster=rec.cluster, grid=rec.grid, pdl=rec.pdl,
                          cooperative=rec.cooperative)
        out.append(KernelArtifact(kname, rec.symbol, to_abi(rec.params), tuple(binaries), spec, prov, variant))
    return Bundle(tuple(out))


def _unique_launches(launches: list[Launch]) -> list[Launch]:
    seen, out = set(), []
    for rec in launches:
        if rec.symbol not in seen:
            seen.add(rec.symbol)
            out.append(rec)
    return out


def _kernel_cubin(cubin: bytes, symbol: str, kname: str) -> bytes:
    names = [k.name for k in read_cubin(cubin).kernels]
    if symbol not in names:
        raise CompileError(f"kernel {kname}: entry {symbol} is not in the cubin (entries: {names})")
    return cubin


def _kernel_ptx(ptx: bytes, symbol: str, kname: str) -> bytes:
    from ...core.ptx import ptx_entries

    names = list(ptx_entries(ptx.decode()))
    if symbol not in names:
        raise CompileError(f"kernel {kname}: entry {symbol} is not in the PTX (entries: {names})")
    return ptx


def _smem(t: _Traced, rec: Launch, nlaunch: int) -> int | None:
    if nlaunch != 1:
        return None
    return launch_smem_bytes(str(t.compiled.ir_module), t.compiled.function_name)


# ---------------------------------------------------------------------------------------------- host programs


@functools.cache
def _load_cute_runtime() -> None:
    """export_to_c needs CuTe's runtime library loaded (only here, at build time; never at deploy)."""
    import cutlass

    libs = cutlass.runtime.find_runtime_libraries(enable_tvm_ffi=False)
    if not libs:
        raise CompileError("CuTe's runtime library was not found; export_to_c needs it at build time")
    ctypes.CDLL(libs[0], mode=ctypes.RTLD_GLOBAL)


def export(
    fn: Callable[..., Any],
    *args: Any,
    arch: ArchSpec,
    name: str | None = None,
    variant: str = "",
    options: str = "",
    kwargs: dict[str, Any] | None = None,
    zero_extent: str = "skip",
) -> HostProgram:
    """Compile ``fn`` with its host logic (TMA descriptors, cluster launch, grid math) into a HostProgram.

    Parameters are derived from the example arguments and checked, byte by byte, against the host function CuTe
    lowered; the object of each arch is checked for a known format. Link with ``kernelpack.Library``.
    """
    from ...bundle.host_program import HostObject, HostParam, HostProgram

    archs = parse_archs(arch)
    args, kw = to_global(args, dict(kwargs or {}), _fn_name(fn))
    # CuTe's TVM-FFI host ABI imports TVM-FFI's and CuTe's runtimes; the export is compiled with its plain C ABI
    # (the same kernels; an environment stream becomes the entry's stream parameter)
    options, _ = without_tvm_ffi(options)
    base = name or re.sub(r"\W", "_", _fn_name(fn).split(".")[-1]).strip("_")
    virtual = [str(a) for a in archs if a.virtual]
    if virtual:
        raise CompileError(f"host program {base}{f'[{variant}]' if variant else ''} ({', '.join(virtual)}): CuTe's "
                           f"export_to_c object embeds SASS (a cubin) and loads it itself, so a host program cannot "
                           f"carry PTX; use kernelpack.cute.compile (kernel-level) for {virtual[0]}, or sm_XY targets "
                           f"here")
    params = host_leaves(fn, args, kw)
    _load_cute_runtime()
    objects, kernels = [], []
    for a in archs:
        with plain_host_abi():
            t = _compile_arch(fn, args, kw, a, options)
        check_host_abi(_fn_name(fn), [p.name for p in params], [p.type for p in params],
                       host_arg_types(t.compiled.ir_module, t.compiled.function_name))
        if getattr(t.compiled, "total_added_arguments", 0):
            raise CompileError(f"{_fn_name(fn)}: CuTe added {t.compiled.total_added_arguments} workspace argument(s) "
                               f"to the host entry; kernelpack does not allocate them yet")
        prefix = f"kpcute_{base}_{variant or 'default'}_{a}"
        # the object half of export_to_c (its header half refuses custom argument objects; we generate our own)
        data = t.compiled.dump_to_object(prefix)
        objects.append(HostObject(a, data, prefix))
        kernels += [k for k in _host_kernels(t, base, variant, _provenance(fn, options))]
    hparams = tuple(HostParam(p.name, p.type, p.stream, tensor_checks(p.mlir_type)) for p in params)
    return HostProgram(base, hparams, tuple(objects),
                       _provenance(fn, options), variant, _merge_arch_kernels(kernels), zero_extent)


def _host_kernels(t: _Traced, base: str, variant: str, prov: Provenance) -> list[KernelArtifact]:
    """Kernels of a host program as artifacts for inspection; a kernel whose parameters have no derived C form
    (TMA descriptors), or whose derived parameters the cubin contradicts (the host program launches it, not a C
    entry), is described by the cubin's sizes only."""
    from ...core.abi import Opaque
    from ...core.errors import AbiMismatch

    cubin = read_cubin(t.cubin)
    out = []
    for i, k in enumerate(cubin.kernels):
        rec = next((r for r in t.launches if r.symbol == k.name and not r.error), None)
        opaque = Abi(tuple(Param(f"p{j}", Opaque(kp.size, _pow2_align(k.param_base + kp.offset, kp.size)))
                           for j, kp in enumerate(k.params)))
        kname = f"{base}_k{i}" if len(cubin.kernels) > 1 else f"{base}_kernel"
        binaries = (Binary(t.arch, t.cubin),)
        try:
            out.append(KernelArtifact(kname, k.name, to_abi(rec.params) if rec is not None else opaque, binaries,
                                      LaunchSpec(), prov, variant))
        except AbiMismatch:
            if rec is None:
                raise
            out.append(KernelArtifact(kname, k.name, opaque, binaries, LaunchSpec(), prov, variant))
    return out


def _pow2_align(addr: int, size: int) -> int:
    a = 1
    while a < 128 and addr % (a * 2) == 0 and size % (a * 2) == 0:
        a *= 2
    return a


def _merge_arch_kernels(kernels: list[KernelArtifact]) -> tuple[KernelArtifact, ...]:
    merged: dict[str, KernelArtifact] = {}
    for k in kernels:
        if k.name in merged:
            m = merged[k.name]
            try:
                merged[k.name] = KernelArtifact(m.name, m.entry, m.abi, m.binaries + k.binaries, m.launch,
                                                m.provenance, m.variant)
            except KernelpackError:
                continue  # per-arch offsets differ for opaque params: keep the first arch's description
        else:
            merged[k.name] = k
    return tuple(merged.values())
