"""Triton frontend: a ``@triton.jit`` function + a typed signature -> verified KernelArtifacts, with no GPU.

    bundle = kernelpack.triton.compile(add_kernel, {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32"},
                                       constexprs={"BLOCK": 1024}, arch=["sm_80", "sm_90a"],
                                       specializations=[{}, {"divisibility": "all", "variant": "aligned"}])
    bundle = kernelpack.triton.compile(add_kernel, example_args=(x, y, out, 4096), constexprs={"BLOCK": 1024},
                                       arch="sm_90a")   # the signature Triton's JIT would pick for that call

The signature can be derived from example arguments (torch CPU or meta tensors, numpy arrays, Python scalars) by
Triton's own JIT binder: :func:`signature_from_args` (see :mod:`kernelpack.frontends.triton.signature`).

Each specialization (constexpr values, divisibility hints, num_warps/num_stages) is compiled with
``triton.compile(ASTSource(...), target=GPUTarget("cuda", sm, 32))`` for every arch and becomes one artifact
(a variant of the family ``name``). Scalars keep their exact width (``fp32`` is a 4-byte float, never a
double); Triton's two hidden trailing pointers become params of role ``global_scratch``/``profile_scratch``
with their per-CTA sizes in the :class:`LaunchSpec`; tensor descriptors (``tensordesc<fp16[64, 32]>``)
expand to the params Triton lowers them to, with the encoding facts in ``LaunchSpec.tensor_descs``
(see :mod:`kernelpack.core.tma`). Where archs disagree on launch facts (dynamic shared memory, scratch) or lower a
tensor descriptor differently (a CUtensorMap on sm_90a, pointer/shape/strides on sm_80), each arch's binary carries
its own (``KernelArtifact.per_arch``): one artifact, one caller-visible signature, for every arch. Every ABI is
verified against the cubin of its arch. A virtual arch (``compute_80``, ``compute_90a``) ships Triton's PTX for the
driver to JIT (verified against its ``.entry``); Triton writes arch-specific PTX (``sm_90a``) from sm_90 on, so plain
``compute_90`` and newer is accepted only where ptxas assembles that PTX for the plain target.

``device_args`` (``{"NUM_SMS": "sm_count"}``) makes runtime parameters hidden ones the launcher fills from the
launch device; a specialization's ``requires`` (``{"sm_count": 132}``) builds it for devices with that property
(a constexpr computed from the SM count, say), dispatched by the device (:mod:`kernelpack.launch.device`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...bundle.artifact import KernelArtifact, Provenance, over_limits
from ...bundle.kpack import Bundle
from ...bundle.pruned import check_pruned
from ...core.abi import DTYPE_ALIASES, Abi, Param, Pointer, Scalar
from ...core.arch import Arch, parse_archs
from ...core.binary import Binary
from ...core.cache import CompileCache, cache_key
from ...core.cubin import read_cubin
from ...core.diagnostics import chain_log
from ...core.errors import CompileError, ConfigDropped, KernelpackError
from ...core.launchspec import LaunchSpec, bind_constexprs, split_per_arch
from ...core.suggest import close
from ...core.tma import ELEMENT_TYPES as TRITON_DTYPES  # Triton's element names are the descriptors'
from ...core.tma import TENSOR_MAP, TensorDescSpec, expected_params
from ...core.version import __version__
from .signature import DerivedSignature, missing_constexpr, signature_from_args

__all__ = ["DerivedSignature", "Specialization", "compile", "signature_from_args"]

ArchSpec = str | Arch | Sequence[str | Arch]
_DESC = re.compile(r"^tensordesc<\s*(\w+)\s*\[([\d,\s]+)\]\s*>$")
_SPEC_KEYS = ("signature", "constexprs", "divisibility", "num_warps", "num_stages", "num_ctas", "variant", "requires",
             "ranges")


@dataclass(frozen=True)
class Specialization:
    """One compiled specialization. ``None`` fields take the values given to :func:`compile`.

    ``divisibility``: params Triton may assume divisible (``tt.divisibility``): a pointer's address, an
    integer's value. A list of names (each divisible by 16, as Triton's JIT assumes), ``{name: power of two}``,
    or ``"all"`` (every pointer and integer). They become dispatch constraints (``Param.divisibility``). None (not
    given): those the JIT derived from ``example_args``, else none.
    ``signature``: types overriding those given to :func:`compile` (``{"x": "*fp16"}`` for an fp16 variant).
    ``requires``: device properties it is built for (``{"sm_count": 132}``); it launches only on such devices, ahead
    of specializations that require less.
    ``ranges``: shape-range dispatch constraints on integer arguments (``["n_cols <= 4096", "M in [1, 64]"]`` or
    ``{"M": (1, 64)}``; :mod:`kernelpack.launch.ranges`): it is chosen only for calls inside them, ahead of
    specializations with wider ranges.
    """

    signature: Mapping[str, str] = field(default_factory=dict)
    constexprs: Mapping[str, Any] = field(default_factory=dict)
    divisibility: Mapping[str, int] | Sequence[str] | str | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    num_ctas: int | None = None
    variant: str | None = None
    requires: Mapping[str, int] = field(default_factory=dict)
    ranges: Sequence[str] | Mapping[str, Any] = ()


@dataclass(frozen=True)
class _Arg:
    name: str
    index: int  # position among all the function's params (Triton's attrs are keyed by it)
    ty: str  # Triton type string; "constexpr" for compile-time params


@dataclass(frozen=True)
class _Output:
    cubin: bytes
    meta: dict[str, Any]


def compile(  # noqa: A001 - the frontend verb, as in cuda.core's Program.compile
    fn: Any,
    signature: Mapping[str, str] | Sequence[str] | None = None,
    *,
    arch: ArchSpec,
    example_args: Sequence[Any] | Mapping[str, Any] | None = None,
    constexprs: Mapping[str, Any] | None = None,
    num_warps: int = 4,
    num_stages: int = 3,
    num_ctas: int = 1,
    specializations: Sequence[Specialization | Mapping[str, Any]] | None = None,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
    device_args: Mapping[str, str] | None = None,
    grid: Sequence[Any] | Callable[[Mapping[str, Any]], Sequence[Any]] | None = None,
    prune: bool | None = None,
    cache: CompileCache | None = None,
) -> Bundle:
    """Compile a Triton kernel for every arch and specialization and return the artifacts as a bundle.

    ``signature``: Triton type per parameter (``*fp16``, ``*kfp32`` for a const pointer, ``i32``, ``fp32``,
    ``tensordesc<fp16[64, 32]>``, ``constexpr``), as ``{name: type}`` or in parameter order; params given in
    ``constexprs`` may be left out. ``example_args``: arguments of one call (a tuple, or a dict by parameter name;
    torch CPU/meta tensors, numpy arrays, Python scalars): the signature, constexprs and divisibility are those
    Triton's JIT would specialize that call with (:func:`signature_from_args`); ``signature`` and ``constexprs``
    then override what was derived, and a specialization without ``divisibility`` takes the derived one.
    ``options``: extra Triton compile options (``maxnreg``, ``debug``...).
    ``device_args``: parameters the launcher fills from the launch device instead of the caller, by role
    (``{"NUM_SMS": "sm_count"}``; roles: ``sm_count``, ``max_dynamic_smem``, ``max_active_clusters:<cluster size>``).
    ``grid``: three grid formulas (:func:`kernelpack.core.launchspec.evaluate_grid`) over integer runtime parameters,
    the device-derived ones included (``(("arg", "NUM_SMS", None), 1, 1)``), each as nested tuples or as text
    (``"ceil_div(n, BLOCK)"``, a constexpr's name taking each specialization's value:
    :func:`kernelpack.core.launchspec.parse_grid_text`): the grid of a launch that gives none; a tuple operand may
    name a constexpr too (``("ceil_div", ("arg", "n", None), "BLOCK")``); or a function of a specialization's
    constexprs returning them, as Triton's ``grid=lambda META: ...`` (each config of an autotuned kernel then
    computes its own grid: ``lambda m: ((("mul", ("ceil_div", ("arg", "M", None), m["BLOCK_M"]), ("ceil_div",
    ("arg", "N", None), m["BLOCK_N"]))), 1, 1)``).
    An ``@triton.autotune`` kernel given no ``specializations`` compiles every config as a specialization of one
    family (variants ``c0``, ``c1``...; :func:`autotune_specializations`); ``kernelpack tune`` then picks one per
    problem shape ahead of time (kernelpack.tuning).

    Every (specialization, arch) must fit the arch's limits (its shared memory, static and dynamic, within the opt-in
    maximum per block: :mod:`kernelpack.launch.limits`), else it is refused (CompileError naming the kernel, the
    specialization, the arch, what it needs and the limit). ``prune``: the specializations are interchangeable
    configs of one kernel, so one that does not fit an arch is left out for it instead, as Triton's autotuner prunes
    it (a :class:`~kernelpack.core.errors.ConfigDropped` warning says which, and why; dispatch on that arch picks
    another config); refused only when no config fits an arch asked for. Default: True for an ``@triton.autotune``
    kernel's own configs, else False.
    """
    bundle, dropped = _compile(fn, signature, arch=arch, example_args=example_args, constexprs=constexprs,
                               num_warps=num_warps, num_stages=num_stages, num_ctas=num_ctas,
                               specializations=specializations, name=name, options=options, device_args=device_args,
                               grid=grid, prune=prune, cache=cache)
    try:
        check_pruned(bundle, dropped)
    except KernelpackError as e:
        raise CompileError(e.message) from None
    for w in dropped:
        warnings.warn(w, stacklevel=2)
    return bundle


def _compile(  # noqa: PLR0913 - compile's arguments
    fn: Any, signature: Mapping[str, str] | Sequence[str] | None, *, arch: ArchSpec,
    example_args: Sequence[Any] | Mapping[str, Any] | None, constexprs: Mapping[str, Any] | None, num_warps: int,
    num_stages: int, num_ctas: int, specializations: Sequence[Specialization | Mapping[str, Any]] | None,
    name: str | None, options: Mapping[str, Any] | None, device_args: Mapping[str, str] | None,
    grid: Sequence[Any] | Callable[[Mapping[str, Any]], Sequence[Any]] | None, prune: bool | None,
    cache: CompileCache | None,
) -> tuple[Bundle, list[ConfigDropped]]:
    """:func:`compile` but for the check that some config fits each arch: the bundle, and each (config, arch) left
    out (what a ``kernelpack build`` step returns: its family is whole only when all its steps are built)."""
    import triton  # type: ignore[import-untyped]

    jit = _unwrap(fn)
    kname = name or jit.__name__
    auto = autotune_specializations(fn) if specializations is None else None
    if auto:  # an @triton.autotune kernel: every config, a specialization of one family
        specializations = auto
    prune = bool(auto) if prune is None else prune
    dropped: list[ConfigDropped] = []
    specs = [_spec(s, kname) for s in specializations] if specializations else [Specialization()]
    if example_args is not None:  # each specialization's constexprs (an autotune config's) complete its call
        specs, signature = derive_specs(fn, example_args, signature, constexprs, specs)
        base_consts: dict[str, Any] = {}
    elif signature is None:
        raise CompileError(f"kernel {kname}: give a signature or example_args")
    else:
        base_consts = dict(constexprs or {})
    archs = parse_archs(arch)
    cache = cache if cache is not None else CompileCache.default()
    variants = _variant_names(kname, specs, base_consts, num_warps, num_stages)
    source_sha = hashlib.sha256(jit.src.encode()).hexdigest()
    artifacts: list[KernelArtifact] = []
    for spec, variant in zip(specs, variants):
        consts = {**base_consts, **spec.constexprs}
        args = _parse_signature(kname, jit, _merge(kname, jit, signature, spec.signature), consts)
        divs = _divisibility(kname, args, spec.divisibility)
        opts = {"num_warps": spec.num_warps or num_warps, "num_stages": spec.num_stages or num_stages,
                "num_ctas": spec.num_ctas or num_ctas, "enable_fp_fusion": True, **(options or {})}
        label = f"{kname}[{variant}]" if variant else kname
        outs = {a: _compile_cached(jit, args, consts, divs, opts, a, label, cache) for a in archs}
        spec_grid = _grid(label, grid, consts)
        per = [(a, *_abi_and_launch(label, args, divs, outs[a], opts["num_warps"], device_args or {}, spec_grid))
               for a in archs]
        bins = {a: Binary(a, outs[a].cubin, "ptx" if a.virtual else "cubin") for a in archs}
        if prune:  # a config that cannot launch on an arch is left out for it (as Triton's autotuner prunes it)
            unfit = {a: why for a, _, ls in per if (why := over_limits(outs[a].meta["name"], ls, bins[a]))}
            dropped += [ConfigDropped(kname, label, str(a), why) for a, why in unfit.items()]
            per = [p for p in per if p[0] not in unfit]
            if not per:
                continue
        kept = [a for a, _, _ in per]
        abi, launch, per_arch = split_per_arch(per)
        ptxas = ", ".join(sorted({str(bins[a].cubin.toolkit_version) for a in kept if not a.virtual})) or "PTX only"
        provenance = Provenance("triton", triton.__version__, f"triton {triton.__version__} (ptxas {ptxas})",
                                _provenance_options(opts, consts, divs), source_sha)
        try:
            artifacts.append(KernelArtifact(kname, outs[kept[0]].meta["name"], abi, tuple(bins[a] for a in kept),
                                            launch, provenance, variant, per_arch, spec.requires, spec.ranges))
        except KernelpackError as e:
            raise CompileError(e.message) from None
    return Bundle(tuple(artifacts)), dropped


def _from_example(derived: DerivedSignature, signature: Mapping[str, str] | Sequence[str] | None,
                  constexprs: Mapping[str, Any] | None) -> tuple[dict[str, str], dict[str, Any], tuple[str, ...]]:
    """The derived signature with the caller's ``signature``/``constexprs`` over it: a parameter given a type stops
    being a constant, one given a value stops being typed; divisibility stays where the type can take it."""
    if signature is not None and not isinstance(signature, Mapping):
        raise CompileError(f"kernel {derived.kernel}: with example_args, signature overrides must be a dict "
                           f"{{param: type}} (got {type(signature).__name__})")
    types = {**derived.signature, **dict(signature or {})}
    consts = {k: v for k, v in derived.constexprs.items() if k not in (signature or {})}
    consts.update(constexprs or {})
    types = {k: v for k, v in types.items() if k not in consts}
    divs = tuple(n for n in derived.divisibility if n in types and _hintable(types[n]))
    return types, consts, divs


def derive_specs(fn: Any, example_args: Sequence[Any] | Mapping[str, Any],
                 signature: Mapping[str, str] | Sequence[str] | None, constexprs: Mapping[str, Any] | None,
                 specs: Sequence[Specialization]) -> tuple[list[Specialization], dict[str, str]]:
    """Each specialization with what Triton's JIT derives for the example call completed by its own constexprs (an
    autotune config's ``BLOCK``, which heuristics may read): its constexprs become all the call's compile-time
    values, its divisibility (when not given) the derived one; returns them and the derived signature's types.
    Specializations whose derived types differ keep their own as signature overrides."""
    base: dict[str, str] | None = None
    out: list[Specialization] = []
    for s in specs:
        derive = {**(constexprs or {}), **s.constexprs}
        types, consts, div = _from_example(signature_from_args(fn, example_args, constexprs=derive), signature,
                                           derive)
        if base is None:
            base = types
        over = {k: v for k, v in types.items() if base.get(k) != v}
        out.append(replace(s, constexprs=consts, signature={**over, **s.signature},
                           divisibility=div if s.divisibility is None else s.divisibility))
    assert base is not None  # specs is never empty
    return out, base


def autotune_specializations(fn: Any) -> list[Specialization] | None:
    """One specialization per config of an ``@triton.autotune`` kernel (variants ``c0``, ``c1``... in config
    order: its constexprs, num_warps, num_stages, num_ctas); None for a kernel that is not autotuned. Tune them
    ahead of time with ``kernelpack tune`` (kernelpack.tuning)."""
    configs = getattr(fn, "configs", None)
    if not isinstance(fn, _autotuner_types()) or not configs:
        return None
    out = []
    for i, c in enumerate(configs):
        out.append(Specialization(constexprs=dict(c.kwargs), num_warps=c.num_warps, num_stages=c.num_stages,
                                  num_ctas=getattr(c, "num_ctas", None) or None, variant=f"c{i}"))
    return out


def autotune_key(fn: Any) -> list[str]:
    """The arguments an ``@triton.autotune`` kernel re-tunes on (its ``key``): what ``kernelpack tune`` varies."""
    return list(getattr(fn, "keys", None) or [])


def _autotuner_types() -> tuple[type, ...]:
    try:
        from triton.runtime.autotuner import Autotuner  # type: ignore[import-untyped]
    except ImportError:
        return ()
    return (Autotuner,)


def _unwrap(fn: Any) -> Any:
    from triton.runtime.jit import JITFunction  # type: ignore[import-untyped]

    inner = fn
    while not isinstance(inner, JITFunction) and hasattr(inner, "fn"):  # Autotuner, Heuristics
        inner = inner.fn
    if not isinstance(inner, JITFunction):
        raise CompileError(f"kernelpack.triton.compile needs a @triton.jit function (got {type(fn).__name__})")
    return inner


def _spec(s: Specialization | Mapping[str, Any], kname: str) -> Specialization:
    if isinstance(s, Specialization):
        return s
    if not isinstance(s, Mapping):
        raise CompileError(f"kernel {kname}: a specialization must be a Specialization or a dict (got {s!r})")
    unknown = sorted(set(s) - set(_SPEC_KEYS))
    if unknown:
        raise CompileError(f"kernel {kname}: unknown specialization key(s) {unknown}; expected {list(_SPEC_KEYS)}")
    return Specialization(**dict(s))


def _parse_signature(kname: str, jit: Any, signature: Mapping[str, str] | Sequence[str],
                     consts: Mapping[str, Any]) -> list[_Arg]:
    names = list(jit.arg_names)
    if isinstance(signature, str) or not isinstance(signature, (Mapping, Sequence)):
        raise CompileError(f"kernel {kname}: signature must be a dict {{param: type}} or a list of types in "
                           f"parameter order (got {type(signature).__name__})")
    if not isinstance(signature, Mapping):
        if len(signature) != len(names):
            raise CompileError(f"kernel {kname}: signature lists {len(signature)} types for {len(names)} "
                               f"parameters {names}")
        signature = dict(zip(names, signature))
    unknown = [k for k in [*signature, *consts] if k not in names]
    if unknown:
        raise CompileError(f"kernel {kname}: parameter(s) {unknown} not in the kernel's parameters {names}")
    annotated = {kp.name for kp in jit.params if kp.is_constexpr}
    out = []
    for i, n in enumerate(names):
        ty = signature.get(n)
        ty = ty.strip() if isinstance(ty, str) else ty
        if n in consts:
            if ty not in (None, "constexpr"):
                raise CompileError(f"kernel {kname}: parameter {i} '{n}' has type {ty!r} and a constexpr value")
            ty = "constexpr"
        elif ty == "constexpr" or (ty is None and n in annotated):
            raise CompileError(missing_constexpr(kname, i, n))
        elif ty is None:
            raise CompileError(f"kernel {kname}: parameter {i} '{n}' has no type in the signature")
        else:
            canon = _canonical_type(ty) if isinstance(ty, str) else None
            if canon is None or not _known_type(canon):
                raise CompileError(f"kernel {kname}: parameter {i} '{n}': unsupported Triton type {ty!r} (expected "
                                   f"*T, *kT, T or tensordesc<T[block]> with T in {', '.join(TRITON_DTYPES)}, or "
                                   f"kernelpack's name of T: f16, f32, ...{_type_hint(ty)})")
            ty = canon
        out.append(_Arg(n, i, ty))
    return out


def _merge(kname: str, jit: Any, base: Mapping[str, str] | Sequence[str], over: Mapping[str, str]) -> Any:
    if not over:
        return base
    if not isinstance(base, Mapping):
        if isinstance(base, str) or len(base) != len(jit.arg_names):
            return base  # _parse_signature reports it
        base = dict(zip(jit.arg_names, base))
    return {**base, **over}


# an element type named as Triton names it (fp16), as kernelpack does (f16) or as torch does (float16): Triton's name
_TRITON_NAME = {dt: name for name, dt in reversed(TRITON_DTYPES.items()) if dt is not None}  # the first name wins
_ELEMENT = {**{a: _TRITON_NAME[dt] for a, dt in DTYPE_ALIASES.items() if dt in _TRITON_NAME},
            **{name: name for name in TRITON_DTYPES}, "f32": "fp32"}


def _canonical_type(ty: str) -> str | None:
    """``ty`` with its element type spelled as Triton spells it (``*f16`` -> ``*fp16``, ``tensordesc<float16[64]>``
    -> ``tensordesc<fp16[64]>``); None when the element type has no known name."""
    ty = ty.strip()
    if ty in ("nvTmaDesc", "constexpr"):
        return ty
    m = _DESC.match(ty)
    if m:
        el = _ELEMENT.get(m.group(1)) or _ELEMENT.get(m.group(1).lower())
        return None if el is None else f"tensordesc<{el}[{m.group(2)}]>"
    head = "*k" if ty.startswith("*k") and ty[2:].lower() in _ELEMENT else "*" if ty.startswith("*") else ""
    el = ty[len(head):]
    got = _ELEMENT.get(el) or _ELEMENT.get(el.lower())
    return None if got is None else head + got


def _type_hint(ty: Any) -> str:
    """``; did you mean '*fp16'?`` for a near miss of a Triton type."""
    if not isinstance(ty, str):
        return ""
    el = ty.strip().lstrip("*")
    head = ty.strip()[:len(ty.strip()) - len(el)]
    if head == "*" and el.startswith("k") and el[1:]:
        head, el = "*k", el[1:]
    got = close(el, [*TRITON_DTYPES, *DTYPE_ALIASES], 1)
    return f"; did you mean {head + _ELEMENT.get(got[0], got[0])!r}?" if got else ""


def _known_type(ty: str) -> bool:
    if ty.startswith("*"):
        return ty.removeprefix("*k" if ty.startswith("*k") else "*") in TRITON_DTYPES
    m = _DESC.match(ty)
    if m:
        return m.group(1) in TRITON_DTYPES
    dt = TRITON_DTYPES.get(ty)
    return ty == "nvTmaDesc" or (dt is not None and not dt.is_fp8)  # an fp8 scalar has no C type: refused


def _divisibility(kname: str, args: list[_Arg], hint: Mapping[str, int] | Sequence[str] | str | None
                 ) -> dict[str, int]:
    ok = {a.name for a in args if _hintable(a.ty)}
    if hint == "all":
        return {a.name: 16 for a in args if a.name in ok}
    if hint is None:
        return {}
    if isinstance(hint, str):
        raise CompileError(f"kernel {kname}: divisibility must be 'all', a list of names or a dict (got {hint!r})")
    items = dict(hint) if isinstance(hint, Mapping) else {n: 16 for n in hint}
    for n, d in items.items():
        if n not in ok:
            what = next((a.ty for a in args if a.name == n), None)
            raise CompileError(f"kernel {kname}: parameter '{n}' ({what or 'not a parameter'}) cannot take a "
                               f"divisibility hint; only pointers and integers can")
        if not isinstance(d, int) or isinstance(d, bool) or d < 2 or d & (d - 1):
            raise CompileError(f"kernel {kname}: parameter '{n}': divisibility must be a power of two >= 2 (got {d!r})")
    return items


def _hintable(ty: str) -> bool:
    dt = TRITON_DTYPES.get(ty)
    return ty.startswith("*") or (dt is not None and dt.is_integer)


def _variant_names(kname: str, specs: list[Specialization], consts: Mapping[str, Any], warps: int,
                   stages: int) -> list[str]:
    if len(specs) == 1:
        return [specs[0].variant or ""]
    sigs = [dict(s.signature) for s in specs]
    sig_keys = sorted({k for d in sigs for k in d})
    varying_sig = [k for k in sig_keys if len({d.get(k) for d in sigs}) > 1]
    rows = [({**consts, **s.constexprs}, s.num_warps or warps, s.num_stages or stages, _div_key(
        () if s.divisibility is None else s.divisibility)) for s in specs]
    varying = [k for k in rows[0][0] if len({repr(r[0].get(k)) for r in rows}) > 1]
    names = []
    for s, (cs, w, st, div) in zip(specs, rows):
        if s.variant is not None:
            names.append(s.variant)
            continue
        types = {s.signature.get(k, "").lstrip("*").removeprefix("k") for k in varying_sig} - {""}
        parts = sorted(types) if len(types) == 1 else [f"{k}_{s.signature.get(k, 'base')}" for k in varying_sig]
        parts += [f"{k}{cs[k]}" for k in varying]
        parts += [f"w{w}"] if len({r[1] for r in rows}) > 1 else []
        parts += [f"s{st}"] if len({r[2] for r in rows}) > 1 else []
        parts += ["div" if div else "nodiv"] if len({r[3] for r in rows}) > 1 else []
        names.append(re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", "_".join(parts))).strip("_"))
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise CompileError(f"kernel {kname}: specializations would share the variant name(s) {dupes}; "
                           f"give each one a 'variant'")
    return names


def _div_key(div: Mapping[str, int] | Sequence[str] | str) -> Any:
    if div == "all" or isinstance(div, str):
        return div
    return tuple(sorted(dict(div).items() if isinstance(div, Mapping) else {n: 16 for n in div}.items()))


def _compile_cached(jit: Any, args: list[_Arg], consts: dict[str, Any], divs: dict[str, int],
                    opts: dict[str, Any], arch: Arch, label: str, cache: CompileCache) -> _Output:
    import triton  # type: ignore[import-untyped]
    from triton.backends.compiler import GPUTarget  # type: ignore[import-untyped]
    from triton.compiler import ASTSource  # type: ignore[import-untyped]

    sig = {a.name: a.ty for a in args}
    attrs = {(a.index,): [["tt.divisibility", divs[a.name]]] for a in args if a.name in divs}
    src = ASTSource(jit, sig, consts, attrs)
    key = cache_key(frontend="triton", kernelpack=__version__, triton=triton.__version__, ast=src.hash(),
                    options=sorted((k, repr(v)) for k, v in opts.items()),
                    arch=str(arch) if arch.virtual else arch.sm)  # compute_XY: PTX, not a cubin
    hit = cache.get(key)
    if hit is not None:
        return _Output(hit.data, dict(hit.meta))
    try:
        compiled = triton.compile(src, target=GPUTarget("cuda", arch.sm, 32), options=dict(opts))
    except Exception as e:  # Triton raises many types (CompilationError, RuntimeError from ptxas, ...)
        first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise CompileError(f"kernel {label} ({arch}): Triton failed: {type(e).__name__}: {first}",
                           log=chain_log(e)) from None
    md = compiled.metadata
    meta = {k: _jsonable(getattr(md, k, d)) for k, d in (
        ("name", jit.__name__), ("num_warps", opts["num_warps"]), ("num_ctas", 1), ("shared", 0),
        ("global_scratch_size", 0), ("global_scratch_align", 1), ("profile_scratch_size", 0),
        ("profile_scratch_align", 1), ("tensordesc_meta", None), ("cluster_dims", None),
        ("launch_cooperative_grid", False), ("launch_pdl", False))}
    cubin = _portable_ptx(compiled.asm["ptx"], arch, label) if arch.virtual else compiled.asm["cubin"]
    cache.put(key, meta, cubin)
    return _Output(cubin, meta)


def _portable_ptx(ptx: str, arch: Arch, label: str) -> bytes:
    """Triton's PTX for ``compute_XY``: it writes ``.target sm_XYa`` for sm_90 and newer, which the driver JITs on
    exactly that arch; for plain ``compute_XY`` (or family ``compute_XYf``) the target is relaxed to it and ptxas
    must accept the PTX for it (it refuses arch-specific instructions such as wgmma), else a CompileError says which
    targets the kernel can have."""
    from ...core.ptx import ptx_target

    target = ptx_target(ptx)
    want = arch.real
    if target == want:
        return ptx.encode()
    if (target.major, target.minor, target.suffix) != (want.major, want.minor, "a"):
        raise CompileError(f"kernel {label} ({arch}): Triton wrote PTX for .target {target}, not {want}")
    relaxed = re.sub(rf"^(\s*\.target\s+){target}\b", rf"\g<1>{want}", ptx, count=1, flags=re.M)
    _ptxas_accepts(relaxed, want, label, arch)
    return relaxed.encode()


def _ptxas_accepts(ptx: str, target: Arch, label: str, arch: Arch) -> None:
    import subprocess
    import tempfile

    from triton.backends.nvidia.compiler import get_ptxas  # type: ignore[import-untyped]

    ptxas = get_ptxas(target.sm).path
    with tempfile.TemporaryDirectory(prefix="kernelpack-ptx-") as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        proc = subprocess.run([ptxas, f"-arch={target}", str(src), "-o", str(Path(tmp) / "k.cubin")],
                              capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise CompileError(f"kernel {label} ({arch}): Triton's PTX for sm_{target.sm} uses sm_{target.sm}a-only "
                           f"instructions, so it cannot be {arch} PTX (which newer GPUs JIT): ask for "
                           f"compute_{target.sm}a (runs on exactly sm_{target.sm}) or an older virtual arch such as "
                           f"compute_80", log=proc.stderr)


def _jsonable(v: Any) -> Any:
    return json.loads(json.dumps(v, default=str))


def _abi_and_launch(label: str, args: list[_Arg], divs: dict[str, int], out: _Output, num_warps: int,
                    device_args: Mapping[str, str], grid: Sequence[Any] | None) -> tuple[Abi, LaunchSpec]:
    meta = out.meta
    descs_meta = list(meta.get("tensordesc_meta") or [])
    params: list[Param] = []
    descs: list[TensorDescSpec] = []
    for a in args:
        if a.ty == "constexpr":
            continue
        m = _DESC.match(a.ty)
        if m:
            dtype, block = m.group(1), [int(b) for b in m.group(2).split(",")]
            dmeta = descs_meta[len(descs)] if len(descs) < len(descs_meta) else None
            lowering = "tma" if dmeta else "decomposed"
            flags = _decomposed_flags()
            new = _desc_params(a.name, TRITON_DTYPES[dtype], lowering, len(block), flags)
            params += new
            try:
                descs.append(TensorDescSpec.from_triton(a.name, dtype, block, [p.name for p in new], dmeta, flags))
            except KernelpackError as e:
                raise CompileError(f"kernel {label}: parameter {a.index} '{a.name}': {e.message}") from None
        elif a.name in device_args:
            try:
                params.append(Param(a.name, _param_type(a.ty), role=device_args[a.name]))
            except KernelpackError as e:
                raise CompileError(f"kernel {label}: parameter {a.index} '{a.name}': {e.message}") from None
        else:
            params.append(Param(a.name, _param_type(a.ty), divs.get(a.name, 1)))
    unknown = sorted(set(device_args) - {a.name for a in args if a.ty != "constexpr"})
    if unknown:
        raise CompileError(f"kernel {label}: device_args names {', '.join(unknown)}, which is no runtime parameter")
    params += _hidden_params(label, params, out)
    cluster = meta.get("cluster_dims")
    num_ctas = int(meta.get("num_ctas") or 1)
    launch = LaunchSpec(
        block=(32 * int(meta.get("num_warps") or num_warps), 1, 1),
        dynamic_smem=int(meta.get("shared") or 0),
        cluster=(num_ctas, 1, 1) if num_ctas > 1 else (tuple(cluster) if cluster and math.prod(cluster) > 1 else None),
        global_scratch=int(meta.get("global_scratch_size") or 0),
        global_scratch_align=int(meta.get("global_scratch_align") or 1),
        profile_scratch=int(meta.get("profile_scratch_size") or 0),
        profile_scratch_align=int(meta.get("profile_scratch_align") or 1),
        tensor_descs=tuple(descs),
        grid=tuple(grid) if grid is not None else None,  # type: ignore[arg-type]
        pdl=bool(meta.get("launch_pdl")),  # Triton's launcher sets programmatic stream serialization
        cooperative=bool(meta.get("launch_cooperative_grid")),  # and the cooperative attribute
    )
    return Abi(tuple(params)), launch


def _param_type(ty: str) -> Pointer | Scalar | Any:
    if ty == "nvTmaDesc":
        return TENSOR_MAP
    if ty.startswith("*"):
        const = ty.startswith("*k")
        return Pointer(TRITON_DTYPES[ty[2:] if const else ty[1:]], const=const)
    dt = TRITON_DTYPES[ty]
    assert dt is not None  # _known_type rejected scalars without a kernelpack dtype
    return Scalar(dt)


def _decomposed_flags() -> tuple[str, ...]:
    """The i1 flags in Triton's decomposed descriptor, probed from Triton's own decomposition (3.6: padding only)."""

    class Probe:
        base, shape, strides, padding, round_f32_to_tf32 = "base", (11,), (13,), "nan", True

    try:
        from triton.backends.driver import decompose_descriptor  # type: ignore[import-untyped]  # 3.9

        vals = list(decompose_descriptor(Probe()))
    except ImportError:
        try:
            from triton.backends.nvidia.driver import make_tensordesc_arg  # type: ignore[import-untyped]  # 3.6

            vals = list(make_tensordesc_arg(Probe(), None))
        except Exception:  # an unknown Triton: assume the newest layout
            return ("padding_nan", "round_tf32")
    return ("padding_nan", "round_tf32")[:max(0, len(vals) - 5)]


def _desc_params(name: str, dtype: Any, lowering: str, rank: int, flags: tuple[str, ...]) -> list[Param]:
    kinds = expected_params(lowering, rank, len(flags))
    if lowering == "tma":
        names = [name] + [f"{name}_shape{i}" for i in range(rank)] + [f"{name}_stride{i}" for i in range(rank)]
    else:
        names = ([f"{name}_base"] + [f"{name}_shape{i}" for i in range(rank)]
                 + [f"{name}_stride{i}" for i in range(rank)] + [f"{name}_{f}" for f in flags]
                 + [f"{name}_dshape{i}" for i in range(rank)] + [f"{name}_dstride{i}" for i in range(rank)])
    out = []
    for n, (kind, dt) in zip(names, kinds):
        t = TENSOR_MAP if kind == "map" else Pointer(dtype) if kind == "ptr" else Scalar(dt)  # type: ignore[arg-type]
        out.append(Param(n, t))
    return out


def _hidden_params(label: str, params: list[Param], out: _Output) -> list[Param]:
    """Triton appends a global-scratch and (since 3.5) a profile-scratch pointer: count them in the cubin (or the
    PTX .entry)."""
    if out.cubin.startswith(b"\x7fELF"):
        sizes = [p.size for p in read_cubin(out.cubin).kernel(out.meta["name"]).params]
    else:
        from ...core.ptx import ptx_entries

        entries = ptx_entries(out.cubin.decode())
        if out.meta["name"] not in entries:
            raise CompileError(f"kernel {label}: no .entry {out.meta['name']} in Triton's PTX")
        sizes = [p.size for p in entries[out.meta["name"]]]
    extra = len(sizes) - len(params)
    roles = ["global_scratch", "profile_scratch"][:max(extra, 0)]
    if extra not in (0, 1, 2) or any(size != 8 for size in sizes[len(params):]):
        raise CompileError(f"kernel {label}: the kernel has {len(sizes)} params (sizes "
                           f"{sizes}) but the signature gives {len(params)} "
                           f"({', '.join(p.name for p in params)}), which hidden scratch pointers cannot explain")
    taken = {p.name for p in params}
    return [Param(r if r not in taken else f"kp_{r}", Pointer(None), role=r) for r in roles]


def _grid(label: str, grid: Any, consts: Mapping[str, Any]) -> Sequence[Any] | None:
    """The specialization's grid formulas: a function of its constexprs is called; formulas given as text or tuples
    get the specialization's constexprs put in (:func:`kernelpack.core.launchspec.bind_constexprs`)."""
    if callable(grid):
        return grid(consts)  # type: ignore[no-any-return]
    if grid is None or isinstance(grid, str):
        return grid
    try:
        return tuple(bind_constexprs(g, consts) for g in grid)
    except KernelpackError as e:
        raise CompileError(f"kernel {label}: {e.message}") from None


def _provenance_options(opts: Mapping[str, Any], consts: Mapping[str, Any], divs: Mapping[str, int]) -> tuple[str, ...]:
    return (tuple(f"{k}={v!r}" for k, v in sorted(opts.items()))
            + tuple(f"constexpr {k}={v!r}" for k, v in sorted(consts.items()))
            + tuple(f"divisibility {k}={v}" for k, v in sorted(divs.items())))
