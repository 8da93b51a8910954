"""A Triton kernel's signature from example arguments, specialized exactly as Triton's JIT would for that call.

    sig = kernelpack.triton.signature_from_args(add_kernel, (x, y, out, 4096), constexprs={"BLOCK": 1024})
    print(sig.to_toml(kernel="kernels.py:add_kernel"))   # freeze it into kernelpack.toml

Triton's JIT turns each launch's arguments into a signature with its own binder
(``triton.runtime.jit.create_function_from_signature``, the per-kernel function ``JITFunction.run`` calls): a
tensor becomes ``*<dtype>`` (``*k<dtype>`` for a ``const``-annotated parameter), an int ``i32``, ``i64`` or ``u64``
by its value, a float ``fp32``, a bool ``u1``; an int equal to 1 and ``None`` become constants; a tensor whose
address and an int whose value are multiples of 16 get ``tt.divisibility`` 16; ``do_not_specialize`` and
``do_not_specialize_on_alignment`` and type annotations are honoured. We call that same binder, built for a CUDA
target, and read its result the way ``JITFunction._pack_args`` does -- no rule is restated here.

Example arguments need no GPU:

* torch tensors on any device. A CUDA tensor's address is the one the JIT would see; a CPU tensor's is a host
  address whose storage torch aligns to 64 bytes, so ``x[1:]`` is misaligned exactly as it would be on the GPU
  (whose caching allocator aligns to 512); a meta tensor's address is its storage offset in bytes (a base of 0).
  Either way a tensor is "16-divisible" when its storage offset is, as on the GPU.
* numpy arrays (their host address, aligned by numpy to at least 16 bytes), and torch dtypes (``torch.float16``:
  a tensor of that dtype at an aligned address, as ``JITFunction.warmup`` takes them);
* Python ints, floats, bools, None, ``tl.constexpr`` values; numpy scalars are taken as the Python number (the JIT
  itself refuses them).

``constexpr`` parameters take their values from ``constexprs=`` or from the example arguments themselves (a value
passed in both places must agree).
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import CompileError

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class DerivedSignature:
    """What Triton's JIT would compile for one call: the types of the runtime parameters, the constexpr values
    (annotated ones and those the JIT specialized from the value: ints equal to 1, None), and the parameters given
    ``tt.divisibility`` 16. ``specialized`` names the parameters the JIT made constants from their value."""

    kernel: str
    signature: Mapping[str, str]
    constexprs: Mapping[str, Any] = field(default_factory=dict)
    divisibility: tuple[str, ...] = ()
    specialized: tuple[str, ...] = ()
    triton_version: str = ""

    def compile_args(self) -> dict[str, Any]:
        """The keyword arguments of :func:`kernelpack.triton.compile` this signature stands for."""
        out: dict[str, Any] = {"signature": dict(self.signature), "constexprs": dict(self.constexprs)}
        if self.divisibility:
            out["specializations"] = [{"divisibility": list(self.divisibility)}]
        return out

    def describe(self) -> str:
        """One line per parameter, as ``name: type`` (``constexpr = value``; ``, divisible by 16``)."""
        lines = [f"{self.kernel}, as Triton {self.triton_version}'s JIT specializes this call:"]
        for n, t in self.signature.items():
            lines.append(f"  {n}: {t}" + (", divisible by 16" if n in self.divisibility else ""))
        for n, v in self.constexprs.items():
            why = " (specialized from the value)" if n in self.specialized else ""
            lines.append(f"  {n}: constexpr = {v!r}{why}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def to_toml(self, *, kernel: str | None = None, name: str | None = None) -> str:
        """A ``[[triton]]`` entry of ``kernelpack.toml`` with this signature frozen (``kernel``: its reference,
        e.g. ``"kernels.py:add_kernel"``). Constexpr values TOML cannot spell (None, dtypes) are written as
        comments saying so: keep ``example_args`` in the entry for those."""
        lines = [f"# {self.kernel}: signature from example arguments, as Triton {self.triton_version}'s JIT "
                 f"specializes them"]
        if self.specialized:
            lines.append(f"# {', '.join(self.specialized)}: made constants by the JIT from their example values "
                         f"(ints equal to 1, None); give one a type in `signature` to keep it a parameter")
        lines.append("[[triton]]")
        if kernel is not None:
            lines.append(f"kernel = {_toml_value(kernel)}")
        if name is not None:
            lines.append(f"name = {_toml_value(name)}")
        lines.append(f"signature = {_inline_table(self.signature)}")
        consts = {k: v for k, v in self.constexprs.items() if _tomlable(v)}
        missing = {k: v for k, v in self.constexprs.items() if not _tomlable(v)}
        if consts:
            lines.append(f"constexprs = {_inline_table(consts)}")
        for k, v in missing.items():
            lines.append(f"# constexpr {k} = {v!r} has no TOML form: keep `example_args` in this entry for it")
        if self.divisibility:
            lines.append(f"specializations = [{{ divisibility = {_toml_value(list(self.divisibility))} }}]")
        return "\n".join(lines) + "\n"


def signature_from_args(fn: Any, example_args: Sequence[Any] | Mapping[str, Any], *,
                        constexprs: Mapping[str, Any] | None = None) -> DerivedSignature:
    """The signature Triton's JIT would compile ``fn`` with when called with ``example_args`` (positional, or a dict
    by parameter name). ``constexprs``: values of constexpr parameters not among the example arguments."""
    import triton  # type: ignore[import-untyped]

    from .compile import _unwrap

    jit = _unwrap(fn)
    kname = jit.__name__
    args, kwargs = _call_args(kname, jit, example_args, dict(constexprs or {}))
    tuned = _apply_heuristics(kname, fn, args, kwargs)
    backend = _backend()
    binder = _binder(jit, backend)
    try:
        consts = {kp.name for kp in jit.params if kp.is_constexpr}
        bound, specialization, options = binder(*[_example(a, n in consts) for n, a in zip(jit.arg_names, args)],
                                                **{k: _example(v, k in consts) for k, v in kwargs.items()})
    except TypeError as e:
        given = set(jit.arg_names[:len(args)]) | set(kwargs)
        missing = [(i, kp) for i, kp in enumerate(jit.params) if kp.name not in given
                   and kp.default is inspect.Parameter.empty]
        if missing and all(kp.is_constexpr for _, kp in missing):
            hint = (" (it is autotuned: each config gives its own; compile every config with autotune = true, or "
                    "give the chosen config's values)") if tuned else ""
            raise CompileError(missing_constexpr(kname, missing[0][0], missing[0][1].name) + hint) from None
        hint = (" (it is autotuned: give the chosen config's values in constexprs, its num_warps/num_stages to "
                "compile)") if tuned else ""
        raise CompileError(f"kernel {kname}: the example arguments do not fit its parameters "
                           f"{list(jit.arg_names)}: {e}{hint}") from None
    if options:
        raise CompileError(f"kernel {kname}: {sorted(options)} are not parameters of the kernel {list(jit.arg_names)} "
                           f"(launch options such as num_warps are compile()'s own arguments)")
    return _derived(kname, jit, list(bound.values()), specialization, backend, triton.__version__)


def missing_constexpr(kname: str, index: int, name: str) -> str:
    """The error for a constexpr parameter given no value, saying how to give one."""
    return (f"kernel {kname}: constexpr parameter {index} '{name}' has no value: give it in constexprs "
            f"(constexprs={{\"{name}\": ...}} to compile, `constexprs = {{ {name} = ... }}` in kernelpack.toml) or "
            f"among the example arguments")


def _call_args(kname: str, jit: Any, example_args: Any, constexprs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword arguments for the binder: the example arguments plus the constexprs not among them."""
    if isinstance(example_args, Mapping):
        args, kwargs = [], dict(example_args)
    elif isinstance(example_args, (str, bytes)) or not isinstance(example_args, Sequence):
        raise CompileError(f"kernel {kname}: example_args must be a tuple or list of arguments, or a dict by parameter "
                           f"name (got {type(example_args).__name__})")
    else:
        args, kwargs = list(example_args), {}
    names = list(jit.arg_names)
    given = {**dict(zip(names, args)), **kwargs}
    for k, v in constexprs.items():
        if k not in names:
            raise CompileError(f"kernel {kname}: constexpr {k!r} is not a parameter of the kernel {names}")
        if k in given:
            if not _same(given[k], v):
                raise CompileError(f"kernel {kname}: parameter '{k}' is {given[k]!r} in the example arguments and "
                                   f"{v!r} in constexprs; give it once")
            continue
        kwargs[k] = v
    return args, kwargs


def _apply_heuristics(kname: str, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> bool:
    """Add the values ``@triton.heuristics`` wrappers compute from the call, as their ``run`` does before the JIT's
    (outermost first; a heuristic value replaces a given one, as it does there). Returns whether an autotuner wraps
    the kernel: its configs are not chosen here."""
    from triton.runtime.autotuner import Autotuner, Heuristics  # type: ignore[import-untyped]
    from triton.runtime.jit import JITFunction  # type: ignore[import-untyped]

    tuned, layer = False, fn
    while layer is not None and not isinstance(layer, JITFunction):
        if isinstance(layer, Heuristics):
            for name, heur in layer.values.items():
                try:
                    kwargs[name] = heur({**dict(zip(layer.arg_names, args)), **kwargs})
                except Exception as e:  # noqa: BLE001 - the user's heuristic, on example arguments
                    raise CompileError(f"kernel {kname}: its heuristic for {name!r} failed on the example "
                                       f"arguments: {type(e).__name__}: {e}") from None
        tuned = tuned or isinstance(layer, Autotuner)
        layer = getattr(layer, "fn", None)
    return tuned


def _same(a: Any, b: Any) -> bool:
    a, b = getattr(a, "value", a), getattr(b, "value", b)  # tl.constexpr(4) == 4
    try:
        return bool(type(a) is type(b) and a == b) or a is b
    except Exception:  # noqa: BLE001 - an object whose == raises (a tensor): only identity counts
        return a is b


def _example(a: Any, constexpr: bool = False) -> Any:
    """An example argument as the JIT binder takes it (see the module docstring); a constexpr's value is kept."""
    if constexpr:
        return a
    from triton.runtime.jit import MockTensor  # type: ignore[import-untyped]

    mod = type(a).__module__
    if mod == "numpy":
        import numpy as np

        if isinstance(a, np.ndarray):
            return _HostArray(a.dtype, int(a.ctypes.data))
        if isinstance(a, np.bool_):
            return bool(a)
        if isinstance(a, np.integer):
            return int(a)
        if isinstance(a, np.floating):
            return float(a)
    return MockTensor.wrap_dtype(a)  # a torch dtype: an aligned tensor of that dtype (Triton's warmup convention)


class _HostArray:
    """A numpy array as the binder sees a tensor: a dtype and an address."""

    def __init__(self, dtype: Any, address: int) -> None:
        self.dtype = dtype
        self._address = address

    def data_ptr(self) -> int:
        return self._address


def _backend() -> Any:
    from triton.backends.compiler import GPUTarget  # type: ignore[import-untyped]
    from triton.compiler.compiler import make_backend  # type: ignore[import-untyped]

    return make_backend(GPUTarget("cuda", 90, 32))  # specialization is the same for every CUDA arch


def _binder(jit: Any, backend: Any) -> Any:
    try:
        from triton.runtime.jit import create_function_from_signature  # type: ignore[import-untyped]
    except ImportError as e:  # a Triton without the binder this module calls
        import triton  # type: ignore[import-untyped]

        raise CompileError(f"kernelpack cannot derive signatures with Triton {triton.__version__}: {e}") from None
    return create_function_from_signature(jit.signature, jit.params, backend)


def _derived(kname: str, jit: Any, values: list[Any], specialization: list[Any], backend: Any,
             version: str) -> DerivedSignature:
    """Read the binder's result as ``JITFunction._pack_args`` does: types, constexpr values from the bound arguments,
    attributes through the backend's ``parse_attr``."""
    sig: dict[str, str] = {}
    consts: dict[str, Any] = {}
    divs: list[str] = []
    specialized: list[str] = []
    for i, (kp, value, spec) in enumerate(zip(jit.params, values, specialization)):
        ty, key = spec[0], spec[1] if len(spec) > 1 else None
        if not isinstance(ty, str):
            raise CompileError(f"kernel {kname}: parameter {i} '{kp.name}' is a tuple ({ty}); kernelpack signatures "
                               f"take pointers, scalars and tensor descriptors")
        if ty == "constexpr":
            consts[kp.name] = getattr(value, "value", value) if _is_tl_constexpr(value) else value
            if not kp.is_constexpr:
                specialized.append(kp.name)
            continue
        sig[kp.name] = ty
        attrs = backend.parse_attr(key) if isinstance(key, str) else []
        for name, val in attrs:
            if name == "tt.divisibility" and val == 16:
                divs.append(kp.name)
            elif name == "tt.divisibility":
                raise CompileError(f"kernel {kname}: parameter {i} '{kp.name}': Triton gave divisibility {val}; "
                                   f"kernelpack's divisibility hints are 16")
    return DerivedSignature(kname, sig, consts, tuple(divs), tuple(specialized), version)


def _is_tl_constexpr(v: Any) -> bool:
    return type(v).__name__ == "constexpr" and type(v).__module__.startswith("triton")


def _tomlable(v: Any) -> bool:
    if isinstance(v, (bool, int, float, str)):
        return True
    if isinstance(v, (list, tuple)):
        return all(_tomlable(x) for x in v)
    return False


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return ("nan" if math.isnan(v) else "inf" if v > 0 else "-inf") if not math.isfinite(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise CompileError(f"{v!r} has no TOML form")


def _inline_table(d: Mapping[str, Any]) -> str:
    if not d:
        return "{}"
    items = ", ".join(f"{k if _BARE_KEY.match(k) else json.dumps(k)} = {_toml_value(v)}" for k, v in d.items())
    return "{ " + items + " }"

