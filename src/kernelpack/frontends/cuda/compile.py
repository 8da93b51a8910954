"""CUDA C++ frontend: source + kernel names (or template name expressions) -> verified KernelArtifacts.

    bundle = kernelpack.cuda.compile("kernels.cu", ["axpy", "scale<float>", "scale<__half>"],
                                     arch=["sm_80", "sm_90a"])

Parameter types come from the mangled symbol for C++ kernels, and for ``extern "C"`` kernels from a probe
kernel ``__kp_probe<i, decltype(kernel)>`` whose mangled name spells the kernel's function type, so macros,
typedefs and templates are resolved by the compiler itself. Parameter names come from the declaration.
Every ABI is verified against the cubin of every arch. A virtual arch (``compute_80``) ships PTX for the driver to
JIT on that arch and newer ones; its ABI is verified against the PTX ``.entry`` (sizes: PTX has no signedness), its
types are derived from a cubin for the same SM that is built and not shipped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...bundle.artifact import KernelArtifact, Provenance
from ...bundle.kpack import Bundle
from ...core.abi import Abi
from ...core.arch import Arch, parse_archs
from ...core.binary import Binary
from ...core.cache import CompileCache, cache_key
from ...core.cubin import Cubin, CubinKernel, read_cubin
from ...core.deps import cuda_includes, include_digest
from ...core.errors import AbiError, CompileError, KernelpackError
from ...core.launchspec import LaunchSpec
from ...core.ptx import ptx_entries
from ...core.suggest import hint
from ...core.version import __version__
from .cxxtypes import abi_from_cxx, abi_from_params, declared_param_names
from .demangle import Demangled, FunctionType, demangle, is_mangled, spell
from .toolkit import CompileOutput, CudaOptions, backend_version, choose_backend, compile_cubin

PROBE = "template <int I, class T> __global__ void __kp_probe() {}\n"

ArchSpec = str | Arch | Sequence[str | Arch]


@dataclass(frozen=True)
class _Request:
    name: str  # artifact (family) name
    expr: str  # name expression given to the compiler
    variant: str


def compile(  # noqa: A001 - the frontend verb, as in cuda.core's Program.compile
    source: str | os.PathLike[str],
    kernels: str | Sequence[str] | Mapping[str, str],
    *,
    arch: ArchSpec,
    options: Sequence[str] = (),
    defines: Mapping[str, str | int | None] | None = None,
    include_dirs: Sequence[str | os.PathLike[str]] = (),
    maxrregcount: int | None = None,
    lineinfo: bool = False,
    signatures: Mapping[str, str | Abi] | None = None,
    launch: LaunchSpec | Mapping[str, LaunchSpec] | None = None,
    pdl: bool | Sequence[str] = False,
    cooperative: bool | Sequence[str] = False,
    compiler: str | None = None,
    cache: CompileCache | None = None,
    ranges: Mapping[str, Any] | None = None,
) -> Bundle:
    """Compile CUDA C++ kernels for every arch in ``arch`` and return them as a bundle: a cubin for each ``sm_XY``
    (``sm_90a``, ``sm_100f``), PTX for each ``compute_XY`` (which any newer GPU runs after a JIT on first load).

    ``kernels``: kernel names, C++ name expressions (``"gemm<float, 128>"``), or ``{name: expression}``.
    Template instantiations of one kernel become variants of one family (``scale`` with variants
    ``float`` and ``__half``). ``signatures``: per kernel name, an :class:`Abi` or a C parameter list
    (``"float a, const float* x, float* y, int n"``) overriding the derived one. ``options``: extra
    compiler flags (``-O3``, ``--use_fast_math``...). ``compiler``: ``nvrtc`` or ``nvcc`` (default: the
    ``KERNELPACK_CUDA_COMPILER`` knob, NVRTC when installed).
    ``pdl``/``cooperative``: launch flags of the kernels (True: all, or a list of kernel names), set in their
    LaunchSpec: ``pdl`` launches with programmatic dependent launch (the kernel calls
    ``cudaGridDependencySynchronize`` / ``griddepcontrol.wait`` before reading what the previous kernel wrote);
    ``cooperative`` launches cooperatively (the kernel synchronizes its whole grid), refused when the grid does not
    fit on the device at once. ``ranges``: shape-range dispatch constraints per
    kernel label (``{"gemm[small]": ["M in [1, 64]"]}``; :mod:`kernelpack.launch.ranges`, ``Bundle.with_ranges``).
    """
    archs = parse_archs(arch)
    text, filename, src_dir = _read_source(source)
    requests = _requests(kernels)
    flagged = {f: _flagged(f, v, requests) for f, v in (("pdl", pdl), ("cooperative", cooperative))}
    opts = CudaOptions(
        defines=tuple((k, None if v is None else str(v)) for k, v in sorted((defines or {}).items())),
        include_dirs=tuple(str(d) for d in ([src_dir] if src_dir else []) + list(include_dirs)),
        maxrregcount=maxrregcount,
        lineinfo=lineinfo,
        extra=tuple(options),
    )
    backend = compiler or choose_backend()
    if backend not in ("nvrtc", "nvcc"):
        raise CompileError(f"compiler must be 'nvrtc' or 'nvcc' (got {backend!r})")
    version = backend_version(backend)
    cache = cache if cache is not None else CompileCache.default()
    exprs = [r.expr for r in requests]

    outputs = {a: _compile_cached(text, filename, a, opts, exprs, backend, version, cache) for a in archs}
    # types come from a cubin: the first SASS arch's, else one built for the first PTX arch's SM and not shipped
    sass = [a for a in archs if not a.virtual]
    first = sass[0] if sass else archs[0].real
    if not sass:
        outputs[first] = _compile_cached(text, filename, first, opts, exprs, backend, version, cache)
    shared = {a: Binary(a, outputs[a].cubin, "ptx" if a.virtual else "cubin") for a in archs}  # one per arch
    cubins = {a: shared[a].cubin for a in sass} if sass else {first: read_cubin(outputs[first].cubin)}
    symbols = {r.expr: _symbol(r, outputs[first], cubins[first]) for r in requests}
    for a in archs:
        if a == first:
            continue
        for r in requests:
            other = _symbol(r, outputs[a], cubins[a]) if not a.virtual else _ptx_symbol(r, outputs[a], symbols[r.expr])
            if other != symbols[r.expr]:
                raise CompileError(f"kernel {r.name}: {r.expr!r} is {symbols[r.expr]} on {first} but {other} on {a}")
    unmangled = [r for r in requests if not is_mangled(symbols[r.expr]) and r.name not in (signatures or {})]
    probed = _probe(text, filename, first, opts, unmangled, backend, version, cache) if unmangled else {}

    provenance = Provenance("cuda", version, version, _portable_flags(opts, src_dir),
                            hashlib.sha256(text.encode()).hexdigest())
    artifacts = []
    for r in requests:
        symbol = symbols[r.expr]
        ck = cubins[first].kernel(symbol)
        user_sig = (signatures or {}).get(r.name)
        abi = _abi(r, symbol, ck, text, user_sig, probed.get(r.expr), opts.include_dirs)
        spec = launch.get(r.name, LaunchSpec()) if isinstance(launch, Mapping) else (launch or LaunchSpec())
        if r.name in flagged["pdl"] or r.name in flagged["cooperative"]:
            spec = dataclasses.replace(spec, pdl=spec.pdl or r.name in flagged["pdl"],
                                       cooperative=spec.cooperative or r.name in flagged["cooperative"])
        binaries = tuple(shared[a] for a in archs)
        artifacts.append(KernelArtifact(r.name, symbol, abi, binaries, spec, provenance, r.variant))
    bundle = Bundle(tuple(artifacts))
    try:
        return bundle.with_ranges(ranges) if ranges else bundle
    except KernelpackError as e:
        raise CompileError(e.message) from None


def _portable_flags(opts: CudaOptions, src_dir: str | None) -> tuple[str, ...]:
    """The flags as provenance records them: include folders inside the source's folder relative to it (``-I.``,
    ``-Iinclude``), so the same project built in another folder (an unpacked sdist, a CI checkout) gives the same
    bundle bytes."""
    portable = opts
    if src_dir is not None:
        base = Path(src_dir)
        rel = [Path(d).relative_to(base).as_posix() if Path(d).is_relative_to(base) else d for d in opts.include_dirs]
        portable = replace(opts, include_dirs=tuple(rel))
    return tuple(portable.common_flags()) + opts.extra


def _flagged(option: str, value: bool | Sequence[str], requests: list[_Request]) -> set[str]:
    """The kernel names a launch-flag option (``pdl``, ``cooperative``) applies to."""
    names = {r.name for r in requests}
    if isinstance(value, bool):
        return names if value else set()
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise CompileError(f"{option} must be True, False or a list of kernel names (got {value!r})")
    unknown = sorted(set(value) - names)
    if unknown:
        raise CompileError(f"{option} names {', '.join(unknown)}, which is no kernel of this compile (kernels: "
                           f"{', '.join(sorted(names))})")
    return set(value)


def _read_source(source: str | os.PathLike[str]) -> tuple[str, str, str | None]:
    is_path = isinstance(source, os.PathLike) or ("\n" not in source and source.endswith((".cu", ".cuh", ".h")))
    if not is_path:
        return str(source), "kernel.cu", None
    path = Path(source)
    try:
        return path.read_text(), path.name, str(path.resolve().parent)
    except OSError as e:
        raise CompileError(f"cannot read CUDA source {path}: {e.strerror}") from None


_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _requests(kernels: str | Sequence[str] | Mapping[str, str]) -> list[_Request]:
    if isinstance(kernels, str):
        kernels = [kernels]
    pairs = list(kernels.items()) if isinstance(kernels, Mapping) else [(None, k) for k in kernels]
    if not pairs:
        raise CompileError("no kernels named: pass kernel names or name expressions")
    out = []
    for name, expr in pairs:
        expr = expr.strip()
        base = expr.split("<", 1)[0].strip().split("::")[-1]
        targs = expr[len(expr.split("<", 1)[0]):]
        variant = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", targs)).strip("_")
        family = name if name is not None else base
        if not _IDENT_RE.match(family):
            raise CompileError(f"kernel name {family!r} (from {expr!r}) is not a C identifier; pass {{name: expr}}")
        out.append(_Request(family, expr, variant))
    labels = [(r.name, r.variant) for r in out]
    if len(set(labels)) != len(labels):
        raise CompileError(f"two kernels would get the same name and variant: {labels}")
    return out


def _compile_cached(text: str, filename: str, arch: Arch, opts: CudaOptions, exprs: list[str], backend: str,
                    version: str, cache: CompileCache) -> CompileOutput:
    # local headers are part of the input: a changed header must not be served a stale cubin
    # nvcc outputs carry the symbols its lowering probes gave (cudacc._lowered_from_probes): "lower" versions them
    key = cache_key(frontend="cuda", kernelpack=__version__, compiler=version, source=text, arch=str(arch),
                    lower=2 if backend == "nvcc" else 0,
                    flags=opts.common_flags() + list(opts.extra), exprs=exprs,
                    headers=include_digest(None, text, opts.include_dirs))
    hit = cache.get(key)
    if hit is not None:
        return CompileOutput(hit.data, dict(hit.meta["lowered"]), hit.meta["log"], hit.meta["compiler"])
    try:
        out = compile_cubin(text, arch, opts, exprs, backend, filename=filename)
    except CompileError as e:
        raise _unknown_kernel(e, text, filename, exprs) or e from None
    cache.put(key, {"lowered": out.lowered, "log": out.log, "compiler": out.compiler}, out.cubin)
    return out


_UNDEFINED = re.compile(r'identifier "([A-Za-z_][A-Za-z0-9_]*)" is undefined')
_GLOBAL = re.compile(r"__global__[^;{}()]*?\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def _unknown_kernel(e: CompileError, text: str, filename: str, exprs: list[str]) -> CompileError | None:
    """A compile that failed because a kernel named is not in the source (``axpi`` for ``axpy``): the error naming
    the kernel and the nearest ``__global__`` function (the compiler's log kept); None for any other failure."""
    log = e.log or ""
    if any("error" in line and not line.startswith("__nv_name_map") for line in log.splitlines()[:-1]):
        return None  # the source itself does not compile: the compiler's message says why
    undefined = set(_UNDEFINED.findall(log))
    for expr in exprs:
        head = expr.split("<", 1)[0].strip().split("::")[-1]
        if head in undefined:
            kernels = sorted(set(_GLOBAL.findall(text)))
            return CompileError(f"{filename}: kernel {expr!r}: no __global__ function {head!r} in the source"
                                f"{hint(head, kernels)} (its kernels: {', '.join(kernels) or 'none found'})",
                                log=e.log)
    return None


def _symbol(r: _Request, out: CompileOutput, cubin: Cubin) -> str:
    """The cubin symbol of a name expression: NVRTC says it; for nvcc, match demangled names."""
    lowered = out.lowered.get(r.expr, "")
    names = [k.name for k in cubin.kernels]
    if lowered:
        if lowered not in names:
            raise CompileError(f"kernel {r.name}: {r.expr!r} lowered to {lowered}, which is not a kernel entry "
                               f"(is it __global__?); entries: {names}")
        return lowered
    if r.expr in names:
        return r.expr
    wanted = re.sub(r"\s+", "", r.expr)
    matches, same_base = [], []
    for n in names:
        if not is_mangled(n):
            continue
        try:
            d = demangle(n)
        except KernelpackError:
            continue
        full = d.name + (f"<{','.join(spell(t) for t in d.template_args)}>" if d.template_args else "")
        if re.sub(r"\s+", "", full) in (wanted, wanted.lstrip(":")) or re.sub(r"\s+", "", full).endswith("::" + wanted):
            matches.append(n)
        if d.name.split("::")[-1] == r.expr.split("<")[0].strip().split("::")[-1]:
            same_base.append(n)
    if len(matches) == 1:
        return matches[0]
    if not matches and len(same_base) == 1:
        return same_base[0]
    raise CompileError(f"kernel {r.name}: cannot find {r.expr!r} among the cubin's kernels {names} "
                       f"(is it __global__ and spelled as the compiler spells it?)")


def _ptx_symbol(r: _Request, out: CompileOutput, symbol: str) -> str:
    """The entry of a name expression in PTX: NVRTC says it; for nvcc, the cubin's symbol when the PTX has it."""
    entries = ptx_entries(out.cubin.decode(errors="replace"))
    got = out.lowered.get(r.expr) or symbol
    if got not in entries:
        raise CompileError(f"kernel {r.name}: {r.expr!r} ({got}) is not an .entry of the PTX; entries: {list(entries)}")
    return got


def _probe(text: str, filename: str, arch: Arch, opts: CudaOptions, reqs: list[_Request], backend: str,
           version: str, cache: CompileCache) -> dict[str, FunctionType]:
    """Compile probe kernels whose mangled names spell the function types of extern "C" kernels."""
    exprs = [f"__kp_probe<{i}, decltype({r.expr})>" for i, r in enumerate(reqs)]
    out = _compile_cached(text + "\n" + PROBE, filename, arch, opts, exprs, backend, version, cache)
    symbols = [k.name for k in read_cubin(out.cubin).kernels]
    result: dict[str, FunctionType] = {}
    for i, (r, e) in enumerate(zip(reqs, exprs)):
        sym = out.lowered.get(e) or next((s for s in symbols if s.startswith(f"_Z10__kp_probeILi{i}E")), "")
        try:
            d = demangle(sym)
            ftype = d.template_args[1]
        except (KernelpackError, IndexError):
            raise CompileError(f"kernel {r.name}: could not derive its parameter types (probe symbol {sym!r}); "
                               f"pass signatures={{'{r.name}': 'type name, ...'}}") from None
        if not isinstance(ftype, FunctionType):
            raise CompileError(f"kernel {r.name}: probe gave {spell(ftype)}, not a function type")
        result[r.expr] = ftype
    return result


def _abi(r: _Request, symbol: str, ck: CubinKernel, source: str, user: str | Abi | None,
         probed: FunctionType | None, include_dirs: Sequence[str] = ()) -> Abi:
    if isinstance(user, Abi):
        return user
    if isinstance(user, str):
        return _abi_from_text(r, user, ck)
    if probed is not None:
        cxx_params, fname = probed.params, r.expr
    else:
        d: Demangled = demangle(symbol)
        cxx_params, fname = d.params, d.name
    base = fname.split("<")[0].split("::")[-1]
    names = declared_param_names(source, base)
    if names is None:  # declared in a header the source includes (a library's kernels instantiated from a .cu)
        names = _names_in_headers(source, include_dirs, base)
    if names is None or len(names) != len(cxx_params):
        names = [f"p{i}" for i in range(len(cxx_params))]
    try:
        return abi_from_cxx(cxx_params, names, ck, r.name, f"pass signatures={{'{r.name}': ...}}")
    except AbiError as e:
        raise CompileError(e.message) from None


def _names_in_headers(source: str, include_dirs: Sequence[str], function: str) -> list[str] | None:
    """Parameter names of ``function`` declared in exactly one of the local headers ``source`` includes."""
    found = []
    for path in cuda_includes(None, source, include_dirs):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if function in text:
            names = declared_param_names(text, function)
            if names is not None:
                found.append(names)
    return found[0] if len(found) == 1 else None


def _abi_from_text(r: _Request, text: str, ck: CubinKernel) -> Abi:
    try:
        return abi_from_params(text, ck, r.name)
    except AbiError as e:
        raise CompileError(e.message) from None
