"""Derive the flattened, typed C parameters of a CuTe DSL function from its argument objects.

The same walk serves the ``@cute.jit`` host function (example arguments given to ``compile``) and each
``@cute.kernel`` (the DSL values handed to ``.launch()``, captured while tracing):

* ``None`` operands, ``Constexpr`` parameters and a first parameter named ``self`` contribute nothing;
* a tensor becomes one by-value descriptor struct ``{data; dynamic shapes; dynamic strides}`` whose field widths
  come from the tensor's own MLIR type;
* a cutlass numeric (or a Python number annotated with one) becomes a scalar of exactly that type; a plain Python
  number otherwise gets the type ``cute.compile`` gives it (the DSL's argument adapter: int -> Int32, float ->
  Float32, bool -> Boolean);
* ``cute.Pointer`` a typed pointer, a stream an untyped pointer flagged as the stream;
* a coordinate (identity) tensor with dynamic leaves a struct of them; a layout-like value with no dynamic leaf
  (a tiled copy, a static layout or coordinate tensor) nothing: CuTe lowers it to no parameter;
* NamedTuples, tuples, lists and dataclasses are flattened field by field (``epi.alpha``);
* any other object implementing ``__extract_mlir_values__``/``__get_mlir_types__`` contributes each of its
  dynamic values in order, named after its attributes when they account for every value.

Each leaf keeps its MLIR type spelling, so the result can be checked against what CuTe actually lowered.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.abi import Abi, DType, Param, ParamType, Scalar
from ...core.errors import CompileError
from .types import STREAM_TYPES, abi_type, is_static, mlir_ir, numeric_dtype


@dataclass(frozen=True)
class Leaf:
    """One C-level parameter: its name, ABI type, the MLIR type it came from, and whether it is a stream."""

    name: str
    type: ParamType
    mlir_type: str
    stream: bool = False
    path: tuple[str, ...] = ()  # Python-level access path, e.g. ("epi", "alpha")


TypesOf = Callable[[Any], list[str]]


def is_constexpr(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.replace(" ", "").split("[", 1)[0].rsplit(".", 1)[-1] == "Constexpr"
    from cutlass import Constexpr

    return annotation is Constexpr or typing.get_origin(annotation) is Constexpr


def _annotations(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    try:
        sig = inspect.signature(fn, eval_str=True)
    except Exception:  # noqa: BLE001 - unresolvable string annotations: fall back to raw strings
        sig = inspect.signature(fn)
    return list(sig.parameters.values())


def bind(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> list[tuple[inspect.Parameter, Any]]:
    """Pair each parameter of ``fn`` with its argument (defaults applied), ``self`` and Constexpr dropped."""
    params = _annotations(fn)
    try:
        bound = inspect.Signature(params).bind(*args, **kwargs)
    except TypeError as e:
        raise CompileError(f"{getattr(fn, '__name__', fn)}: example arguments do not fit its signature: {e}") from None
    bound.apply_defaults()
    out = []
    for i, p in enumerate(params):
        if (i == 0 and p.name == "self") or is_constexpr(p.annotation):
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise CompileError(f"{getattr(fn, '__name__', fn)}: *args/**kwargs parameters are not supported")
        out.append((p, bound.arguments.get(p.name)))
    return out


def leaves(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], types_of: TypesOf,
           kernel: bool = False) -> list[Leaf]:
    """The flattened C parameters of calling ``fn(*args, **kwargs)``; ``types_of(obj)`` gives MLIR type spellings.
    ``kernel``: ``fn`` is a ``@cute.kernel`` launched from traced code, where the DSL bakes a plain Python number
    into the kernel (no parameter): such a launch has no kernel-level C form (CompileError)."""
    out: list[Leaf] = []
    for p, value in bind(fn, args, kwargs):
        out += _walk(p.name, (p.name,), value, p.annotation, types_of, kernel)
    names = [lf.name for lf in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise CompileError(f"flattened parameter names collide: {dupes}; rename the fields")
    return out


def to_abi(items: Sequence[Leaf]) -> Abi:
    return Abi(tuple(Param(lf.name, lf.type) for lf in items))


def _walk(name: str, path: tuple[str, ...], obj: Any, annotation: Any, types_of: TypesOf,
          kernel: bool = False) -> list[Leaf]:
    if obj is None or is_constexpr(annotation):
        return []
    ann_dtype = numeric_dtype(annotation) if isinstance(annotation, type) else None
    if isinstance(obj, (bool, int, float)) and not isinstance(obj, type):
        if kernel and ann_dtype is None:
            raise CompileError(f"parameter {'.'.join(path)}: a plain Python {type(obj).__name__} launched into a "
                               f"kernel is baked into it by the CuTe DSL (a compile-time value, no parameter)")
        dt = ann_dtype or python_scalar_dtype(obj, path)
        return [Leaf(name, Scalar(dt), dt.value, path=path)]
    dtype = numeric_dtype(obj)
    if dtype is not None:
        (mlir,) = types_of(obj)
        return [Leaf(name, abi_type(mlir, dtype), mlir, path=path)]
    if _is_driver_stream(obj):  # cuda.bindings' CUstream: CuTe's JIT passes it as its stream type
        return [_leaf(name, path, STREAM_TYPES[0])]
    if _is_dsl_leaf(obj):
        types = [t for t in types_of(obj) if not is_static(t)]
        return [_leaf(name if len(types) == 1 else f"{name}{i}", path, t) for i, t in enumerate(types)]
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # NamedTuple
        hints = _hints(type(obj))
        return [lf for f in obj._fields for lf in _walk(f"{name}_{f}", path + (f,), getattr(obj, f), hints.get(f),
                                                        types_of, kernel)]
    if isinstance(obj, (tuple, list)):
        return [lf for i, x in enumerate(obj) for lf in _walk(f"{name}{i}", path + (str(i),), x, None, types_of,
                                                                             kernel)]
    if hasattr(obj, "__extract_mlir_values__") or hasattr(obj, "__get_mlir_types__"):
        return _custom(name, path, obj, types_of, kernel)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        hints = _hints(type(obj))
        return [lf for f in dataclasses.fields(obj)
                for lf in _walk(f"{name}_{f.name}", path + (f.name,), getattr(obj, f.name), hints.get(f.name, f.type),
                                types_of, kernel)]
    raise CompileError(f"parameter {'.'.join(path)}: cannot pass a {type(obj).__name__} to a CuTe function from C "
                       f"(tensors, pointers, numerics, streams, NamedTuples/dataclasses of them, or objects "
                       f"implementing __extract_mlir_values__)")


def python_scalar_dtype(obj: bool | int | float, path: tuple[str, ...] = ()) -> DType:
    """The type ``cute.compile`` gives a plain Python scalar whose parameter is not annotated with a cutlass numeric
    (no annotation, ``int``, ``Int32 | int | None``...): the DSL's own argument adapter decides (4.8: int -> Int32,
    float -> Float32, bool -> Boolean). A parameter annotated with a cutlass numeric is cast to that type instead."""
    from cutlass.base_dsl.runtime.jit_arg_adapters import JitArgAdapterRegistry

    adapter = JitArgAdapterRegistry.get_registered_adapter(obj)
    dt = numeric_dtype(adapter(obj)) if adapter is not None else None
    if dt is None:
        raise CompileError(f"parameter {'.'.join(path)}: the CuTe DSL gives a plain Python {type(obj).__name__} no "
                           f"numeric type; annotate it (cutlass.Int32, cutlass.Float32, ...)")
    return dt


def _is_driver_stream(obj: Any) -> bool:
    """A ``cuda.bindings.driver.CUstream`` (or ``cuda.CUstream``): what launchers pass as their ``stream``."""
    t = type(obj)
    return t.__name__ == "CUstream" and t.__module__.split(".")[0] == "cuda"


def _is_dsl_leaf(obj: Any) -> bool:
    """Tensors, pointers, streams and layouts of the DSL itself (their value list is their C form; a layout is an
    MLIR value)."""
    mod = type(obj).__module__
    if not mod.startswith("cutlass"):
        return False
    if hasattr(obj, "__get_mlir_types__") or hasattr(obj, "__extract_mlir_values__"):
        return True
    return isinstance(obj, mlir_ir().Value)


def _leaf(name: str, path: tuple[str, ...], mlir: str) -> Leaf:
    return Leaf(name, abi_type(mlir), mlir, stream=mlir in STREAM_TYPES, path=path)


def _custom(name: str, path: tuple[str, ...], obj: Any, types_of: TypesOf, kernel: bool = False) -> list[Leaf]:
    """A user object with dynamic values: name them after its attributes when those account for every value."""
    types = [t for t in types_of(obj) if not is_static(t)]
    try:
        named: list[Leaf] = []
        for attr, value in vars(obj).items():
            if value is None or isinstance(value, (str, type)) or type(value) in (int, float, bool):
                continue
            named += _walk(f"{name}_{attr}", path + (attr,), value, None, types_of, kernel)
        if [lf.mlir_type for lf in named] == types:
            return named
    except (CompileError, TypeError):
        pass
    return [_leaf(f"{name}{i}", path + (str(i),), t) for i, t in enumerate(types)]


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - unresolvable forward references: raw annotations
        return dict(getattr(cls, "__annotations__", {}))
