"""cuTile frontend: a ``@ct.kernel`` + cuTile ``KernelSignature`` constraints -> verified KernelArtifacts, no GPU.

    bundle = kernelpack.cutile.compile(vadd, [[arr(ct.float32, 1), arr(ct.float32, 1), arr(ct.float32, 1), 1024]],
                                       arch=["sm_80", "sm_90a"])
    bundle = kernelpack.cutile.compile(vadd, example_args=(a, b, c, 1024), arch="sm_90a")  # as cuTile's JIT would

A signature can be derived from example arguments (torch meta or CPU tensors, numpy arrays, Python scalars) by
cuTile's own ``KernelSignature.from_kernel_args``: :func:`signature_from_args` (see
:mod:`kernelpack.frontends.cutile.signature`).

Each signature is exported with ``cuda.tile.compilation.export_kernel(..., output_format="cubin")`` for every
arch and becomes one artifact (a variant of the family ``name``); each artifact binary is its own cubin, since
every cuTile cubin defines the global ``___NV_TILE_LAUNCH_META_DATA___``.

The calling convention is ``cutile_python_v2``: an array parameter ``a`` of rank n becomes the kernel params
``a`` (pointer), ``a_shape0..n-1`` and ``a_stride0..n-1`` (the index dtype, strides in elements), all passed even
where the signature fixes them (``shape_constant``/``stride_constant``: the caller must pass those values);
``base_addr_divisible_by``/``shape_divisible_by``/``stride_divisible_by`` become ``Param.divisibility``
(the pointer's in bytes). Scalars keep their width; tuples flatten to ``name_0, name_1...``; constants
(``ct.Constant`` params) leave the signature. A list of arrays (``ListConstraint``) is two kernel params: a pointer
to one descriptor per array in global memory -- ``1 + 2n`` 64-bit words each: the data pointer, every extent,
every stride, static ones too -- and the number of arrays (int32): a :class:`~kernelpack.core.abi.TensorList`
``name`` and its count ``name_count``; the caller passes a list of tensors and the launcher builds the descriptors
in device memory for each launch (docs/abi.md). The block shape is the cubin's REQNTID (the driver accepts only
that or (1,1,1)), which tileiras picks per arch (a 128x256x64 fp16 matmul: 128 threads on sm_80, 256 on sm_90a):
each arch's binary carries its own (``KernelArtifact.per_arch``).
"""

from __future__ import annotations

import hashlib
import inspect
import io
from collections.abc import Mapping, Sequence
from typing import Any

from ...bundle.artifact import KernelArtifact, Provenance
from ...bundle.kpack import Bundle
from ...core.abi import LIST_MAX_RANK, Abi, DType, Param, Pointer, Scalar, TensorList, TensorSpec
from ...core.arch import Arch, parse_archs
from ...core.binary import Binary
from ...core.cache import CompileCache, cache_key
from ...core.cubin import read_cubin
from ...core.diagnostics import chain_log
from ...core.errors import CompileError, KernelpackError
from ...core.launchspec import LaunchSpec, split_per_arch
from ...core.version import __version__
from .diagnose import is_tileiras_failure, tileiras_failure
from .signature import signature_from_args, signature_source

__all__ = ["compile", "signature_from_args", "signature_source"]

ArchSpec = str | Arch | Sequence[str | Arch]

CUTILE_DTYPES: dict[str, DType | None] = {
    "bool_": DType.bool, "int8": DType.i8, "int16": DType.i16, "int32": DType.i32, "int64": DType.i64,
    "uint8": DType.u8, "uint16": DType.u16, "uint32": DType.u32, "uint64": DType.u64,
    "float16": DType.f16, "bfloat16": DType.bf16, "float32": DType.f32, "float64": DType.f64,
    # fp8: arrays only (f8e4m3/f8e5m2 pointers); scalars of these are rejected
    "float8_e4m3fn": DType.f8e4m3, "float8_e5m2": DType.f8e5m2,
    # no kernelpack dtype: arrays of these become void* pointers; scalars of these are rejected
    "tfloat32": None, "float8_e5m3fnu": None,
    "float8_e8m0fnu": None, "float4_e2m1fn": None,
}


def compile(  # noqa: A001 - the frontend verb, as in cuda.core's Program.compile
    kernel: Any,
    signatures: Sequence[Any] | Mapping[str, Any] | None = None,
    *,
    arch: ArchSpec,
    example_args: Sequence[Any] | Mapping[str, Sequence[Any]] | None = None,
    name: str | None = None,
    cache: CompileCache | None = None,
) -> Bundle:
    """Compile a cuTile kernel for every signature and arch and return the artifacts as a bundle.

    ``signatures``: ``KernelSignature`` objects (calling convention ``cutile_python_v2``) or lists of
    parameter constraints (``ArrayConstraint``, ``ScalarConstraint``, constants, tuples); a dict
    ``{variant: signature}`` names the variants (otherwise ``s0``, ``s1``... when there are several).
    ``example_args`` (instead of ``signatures``): the arguments of one call (a tuple), or ``{variant: arguments}``;
    each gives the signature cuTile's JIT would derive for that call (:func:`signature_from_args`).
    """
    import cuda.tile as ct  # type: ignore[import-untyped]

    pyfunc = _pyfunc(kernel)
    kname = name or pyfunc.__name__
    if example_args is not None:
        if signatures is not None:
            raise CompileError(f"kernel {kname}: give signatures or example_args, not both")
        signatures = ({k: signature_from_args(kernel, v) for k, v in example_args.items()}
                      if isinstance(example_args, Mapping) else [signature_from_args(kernel, example_args)])
    elif signatures is None:
        raise CompileError(f"kernel {kname}: give signatures or example_args")
    names = list(inspect.signature(pyfunc).parameters)
    items = list(signatures.items()) if isinstance(signatures, Mapping) else [
        ("" if len(signatures) == 1 else f"s{i}", s) for i, s in enumerate(signatures)]
    if not items:
        raise CompileError(f"kernel {kname}: no signatures given")
    archs = parse_archs(arch)
    virtual = [a for a in archs if a.virtual]
    if virtual:
        raise CompileError(f"kernel {kname} ({', '.join(map(str, virtual))}): cuTile cannot embed PTX: its toolchain "
                           f"(tileiras) writes SASS cubins (or TileIR bytecode, which kernelpack does not ship), never "
                           f"PTX; ask for the SASS of each GPU to run on ({', '.join(str(a.real) for a in virtual)})")
    cache = cache if cache is not None else CompileCache.default()
    try:
        source = inspect.getsource(pyfunc)
    except (OSError, TypeError):
        source = pyfunc.__qualname__
    version = str(getattr(ct, "__version__", "unknown"))
    artifacts = []
    for variant, raw in items:
        label = f"{kname}[{variant}]" if variant else kname
        sig = _signature(raw, pyfunc.__name__, label)
        if len(sig.parameters) != len(names):
            raise CompileError(f"kernel {label}: the signature has {len(sig.parameters)} constraints for "
                               f"{len(names)} parameters {names}")
        params: list[Param] = []
        for i, (n, c) in enumerate(zip(names, sig.parameters)):
            params += _params(label, i, n, c)
        abi = Abi(tuple(params))
        cubins = _export_all(kernel, sig, archs, label, source + _module_text(pyfunc), version, cache,
                             abi.param_bytes())
        abi, launch, per_arch = split_per_arch(
            [(a, abi, LaunchSpec(block=b.cubin.kernel(sig.symbol).reqntid)) for a, b in cubins])
        provenance = Provenance("cutile", version, f"tileiras {cubins[0][1].cubin.toolkit_version}",
                                (f"signature={sig.symbol}",), hashlib.sha256(source.encode()).hexdigest())
        artifacts.append(KernelArtifact(kname, sig.symbol, abi, tuple(b for _, b in cubins), launch, provenance,
                                        variant, per_arch))
    return Bundle(tuple(artifacts))


def _module_text(pyfunc: Any) -> str:
    """The kernel's whole module, for the cache key: helpers (``@ct.function``) and constants it uses live there."""
    try:
        return "\n# module\n" + inspect.getsource(inspect.getmodule(pyfunc))  # type: ignore[arg-type]
    except (OSError, TypeError):
        return ""


def _pyfunc(kernel: Any) -> Any:
    af = getattr(kernel, "_annotated_function", None)
    fn = getattr(af, "pyfunc", None)
    if fn is None:
        raise CompileError(f"kernelpack.cutile.compile needs a @ct.kernel function (got {type(kernel).__name__})")
    return fn


def _signature(raw: Any, fname: str, label: str) -> Any:
    from cuda.tile.compilation import CallingConvention, KernelSignature  # type: ignore[import-untyped]

    if not isinstance(raw, KernelSignature):
        if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
            raise CompileError(f"kernel {label}: a signature must be a KernelSignature or a list of constraints "
                               f"(got {type(raw).__name__})")
        try:
            raw = KernelSignature(list(raw), CallingConvention.cutile_python_v2())
        except (TypeError, ValueError) as e:
            raise CompileError(f"kernel {label}: invalid cuTile signature: {e}") from None
    if raw.calling_convention.name != "cutile_python_v2":
        raise CompileError(f"kernel {label}: calling convention {raw.calling_convention.name} is not supported "
                           f"(use CallingConvention.cutile_python_v2())")
    return raw if raw.symbol else raw.with_mangled_symbol(fname)


def _params(label: str, index: int, name: str, c: Any) -> list[Param]:
    from cuda.tile.compilation import (  # type: ignore[import-untyped]
        ArrayConstraint,
        ConstantConstraint,
        ListConstraint,
        ScalarConstraint,
        TupleConstraint,
    )

    where = f"kernel {label}: parameter {index} '{name}'"
    if isinstance(c, ConstantConstraint):
        return []
    if isinstance(c, ScalarConstraint):
        return [Param(name, Scalar(_dtype(c.dtype, where, scalar=True)))]
    if isinstance(c, TupleConstraint):
        return [p for i, item in enumerate(c.items) for p in _params(label, index, f"{name}_{i}", item)]
    if isinstance(c, ArrayConstraint):
        idx = _dtype(c.index_dtype, where, scalar=True)
        out = [Param(name, Pointer(_dtype(c.dtype, where, scalar=False)), c.base_addr_divisible_by)]
        out += [Param(f"{name}_shape{i}", Scalar(idx), _div(c.shape_divisible_by[i])) for i in range(c.ndim)]
        out += [Param(f"{name}_stride{i}", Scalar(idx), _div(c.stride_divisible_by[i])) for i in range(c.ndim)]
        return out
    if isinstance(c, ListConstraint) and isinstance(c.element, ArrayConstraint):
        return [Param(name, _tensor_list(c.element, where)), Param(f"{name}_count", Scalar(DType.i32),
                                                                    role="list_count")]
    raise CompileError(f"{where}: {type(c).__name__} parameters are not supported (arrays, lists of arrays, "
                       f"scalars, tuples and constants are)")


def _tensor_list(e: Any, where: str) -> TensorList:
    """What every array of a list parameter must be, from its element's ArrayConstraint (each shape and stride a
    64-bit word the kernel reads as the index dtype)."""
    dt = _dtype(e.dtype, where, scalar=False)
    if dt is None:
        raise CompileError(f"{where}: a list of {e.dtype} arrays: kernelpack has no dtype for {e.dtype} (a list's "
                           f"arrays are checked against one)")
    if not 1 <= e.ndim <= LIST_MAX_RANK:
        raise CompileError(f"{where}: a list of rank-{e.ndim} arrays: kernelpack takes ranks 1 to {LIST_MAX_RANK}")
    idx = _dtype(e.index_dtype, where, scalar=True)
    lower = tuple(getattr(e, "stride_lower_bound_incl", ()) or (None,) * e.ndim)
    return TensorList(TensorSpec(dt, tuple(e.shape_constant), tuple(e.stride_constant), idx, idx,
                                 _div(e.base_addr_divisible_by)),
                      tuple(_div(d) for d in e.shape_divisible_by), tuple(_div(d) for d in e.stride_divisible_by),
                      lower)


def _div(d: int) -> int:
    return d if d > 1 else 1


def _dtype(dt: Any, where: str, *, scalar: bool) -> Any:
    name = getattr(dt, "name", str(dt))
    dt = CUTILE_DTYPES.get(name)
    if name not in CUTILE_DTYPES or (scalar and (dt is None or dt.is_fp8)):
        what = "scalar" if scalar else "array element"
        raise CompileError(f"{where}: unsupported {what} dtype {name}")
    return CUTILE_DTYPES[name]


def _gpu_code(a: Arch) -> str:
    return f"sm_{a.sm}"  # tileiras takes sm_90 and emits an sm_90a cubin; the cubin says what it is


def _export_all(kernel: Any, sig: Any, archs: tuple[Arch, ...], label: str, source: str, version: str,
                cache: CompileCache, param_bytes: int) -> list[tuple[Arch, Binary]]:
    out: dict[Arch, Binary] = {}
    for a in archs:
        data = _export(kernel, sig, a, label, source, version, cache, param_bytes)
        real = read_cubin(data).arch
        if real.sm != a.sm:
            raise CompileError(f"kernel {label}: asked for {a}, tileiras produced a {real} cubin")
        if real in out:
            continue  # sm_90 and sm_90a both give the sm_90a cubin
        out[real] = Binary(real, data)
    return list(out.items())


def _export(kernel: Any, sig: Any, a: Arch, label: str, source: str, version: str, cache: CompileCache,
            param_bytes: int) -> bytes:
    from cuda.tile.compilation import export_kernel  # type: ignore[import-untyped]

    key = cache_key(frontend="cutile", kernelpack=__version__, cutile=version, tileiras=_tileiras_version(),
                    source=source, signature=repr(sig), arch=a.sm)
    hit = cache.get(key)
    if hit is not None:
        return hit.data
    buf = io.BytesIO()
    try:
        export_kernel(kernel, [sig], buf, gpu_code=_gpu_code(a), output_format="cubin")
    except Exception as e:  # cuTile raises TileError subclasses, ValueError, RuntimeError from tileiras...
        if is_tileiras_failure(e):  # tileiras' own diagnostics, which cuTile drops (.diagnose)
            message, log = tileiras_failure(kernel, sig, _gpu_code(a), f"kernel {label} ({a})", e, param_bytes)
            raise CompileError(message, log=log + "\n\n" + chain_log(e)) from None
        text = str(e).strip()
        first = text.splitlines()[0] if text else type(e).__name__
        raise CompileError(f"kernel {label} ({a}): cuTile failed: {type(e).__name__}: {first}",
                           log=chain_log(e)) from None
    data = buf.getvalue()
    try:
        read_cubin(data).kernel(sig.symbol)
    except KernelpackError as e:
        raise CompileError(f"kernel {label} ({a}): the exported cubin is unusable: {e.message}") from None
    cache.put(key, {"symbol": sig.symbol}, data)
    return data


def _tileiras_version() -> str:
    try:
        from importlib.metadata import version

        return version("nvidia-cuda-tileiras")
    except Exception:  # not installed as a distribution: the cubin's toolkit version still lands in provenance
        return "unknown"


