"""Triton launches: ``JITFunction.run`` and ``Autotuner.run`` hooked for the block.

Each launch is bound by Triton's own binder (:func:`kernelpack.triton.signature_from_args`: types, ``tt.divisibility``
16, ints equal to 1 and None as constants, exactly as the JIT), after ``@triton.heuristics`` ran (they wrap the
JIT function, so its ``run`` sees their values). An ``@triton.autotune`` kernel:

* GPU-less: runs the config ``configs`` names (``first``, ``c<N>``; ``all`` runs the first and records every one),
  without benchmarking;
* on a GPU: runs as it would (benchmarking each new key); the chosen config and its measured times are recorded
  (the benchmark launches themselves are not).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..core.errors import KernelpackError
from ..core.launchspec import evaluate_grid
from . import grids
from .records import Launch
from .refs import reference
from .values import Unwritable, source, to_meta
from .world import patched, real

if TYPE_CHECKING:
    from .session import Capture

_INT_TYPES = ("i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
_OPTION_KEYS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _unwrap(v: Any) -> Any:
    from triton.runtime.autotuner import Autotuner, Heuristics

    return v.fn if isinstance(v, (Autotuner, Heuristics)) else None


def _tuner_of(tuner: Any, jit: Any) -> bool:
    v = tuner
    while v is not None and v is not jit:
        v = getattr(v, "fn", None)
    return v is jit


def _is_dtype(v: Any) -> bool:
    return type(v).__name__ == "dtype" and type(v).__module__.startswith("triton")


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    return repr(v)


class _State(threading.local):
    def __init__(self) -> None:
        self.tuners: list[tuple[Any, int | None]] = []  # the autotuners running, with the config index run
        self.bench = 0  # inside Autotuner._bench: launches are measurements, not the program's
        self.timings: dict[int, float] = {}  # config index -> median ms, measured in the current autotuner run


@contextlib.contextmanager
def hooks(cap: Capture) -> Iterator[None]:
    """Record every Triton launch of the block into ``cap``."""
    try:
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITFunction
    except ImportError:
        yield
        return
    state = _State()
    original_run, original_tuner, original_bench = JITFunction.run, Autotuner.run, Autotuner._bench

    def jit_run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if state.bench:
            return original_run(self, *args, grid=grid, warmup=warmup, **kwargs)
        tuner = next(((t, i) for t, i in reversed(state.tuners) if _tuner_of(t, self)), None)
        with real():
            launch = record(cap, self, args, kwargs, grid, tuner, dict(state.timings))
        if cap.gpu:
            return original_run(self, *args, grid=grid, warmup=warmup, **kwargs)
        if launch is not None and self.__name__ in cap.interpret:
            with real():
                return _interpret(self, args, kwargs, launch.grid)
        return None

    def tuner_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if cap.gpu:
            state.tuners.append((self, None))
            state.timings = {}
            try:
                return original_tuner(self, *args, **kwargs)
            finally:
                state.tuners.pop()
        self.nargs = dict(zip(self.arg_names, args))
        index = _choose(cap, self, kwargs)
        config = self.configs[index]
        self.best_config = config  # wrappers read it (and hand it to the next kernel)
        state.tuners.append((self, index))
        try:
            if config.pre_hook is not None:
                config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
            return self.fn.run(*args, **kwargs, **config.all_kwargs())
        finally:
            state.tuners.pop()
            self.nargs = None

    def bench(self: Any, *args: Any, config: Any, **kwargs: Any) -> Any:
        state.bench += 1
        try:
            t = original_bench(self, *args, config=config, **kwargs)
        finally:
            state.bench -= 1
        with contextlib.suppress(Exception):
            ms = float(t[0] if isinstance(t, (list, tuple)) else t)
            state.timings[next(i for i, c in enumerate(self.configs) if c is config)] = ms
        return t

    with patched([(JITFunction, "run", jit_run), (Autotuner, "run", tuner_run), (Autotuner, "_bench", bench)]):
        yield


def _choose(cap: Capture, tuner: Any, kwargs: dict[str, Any]) -> int:
    """The config a GPU-less run launches: ``c<N>`` by index, else the first the autotuner's pruning keeps."""
    n = len(tuner.configs)
    if cap.configs.startswith("c") and cap.configs[1:].isdigit():
        i = int(cap.configs[1:])
        if i < n:
            return i
        cap.note(f"{tuner.base_fn.__name__}: --configs {cap.configs}, but it has {n} config(s): c0 runs")
        return 0
    if n > 1:
        with contextlib.suppress(Exception):
            pruned = tuner.prune_configs(kwargs)
            return next(i for i, c in enumerate(tuner.configs) if c is pruned[0])
    return 0


def record(cap: Capture, jit: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any,
           tuner: tuple[Any, int | None] | None, timings: dict[int, float]) -> Launch | None:
    """The launch ``jit[grid](*args, **kwargs)`` recorded into ``cap`` (or skipped there, with the reason)."""
    from ..frontends.triton.signature import signature_from_args

    name = jit.__name__
    params = [kp.name for kp in jit.params]
    call = {**dict(zip(params, args)), **{k: v for k, v in kwargs.items() if k in params}}
    opts = {k: v for k, v in kwargs.items() if k not in params}
    try:
        ref, _ = reference(jit, jit.__module__, _unwrap)
    except LookupError as e:
        cap.skip(f"triton kernel {jit.__module__}:{name}", str(e))
        return None
    try:
        derived = signature_from_args(jit, call)
    except KernelpackError as e:
        cap.skip(f"triton kernel {ref}", e.message)
        return None
    configs: tuple[str, ...] = ()
    chosen = ""
    config_keys: set[str] = set()
    measured = None
    if tuner is not None:
        t, index = tuner
        if index is None:  # on a GPU: what the autotuner chose
            index = next((i for i, c in enumerate(t.configs) if c is t.best_config), 0)
            if timings:
                measured = {"key": {k: _jsonable(call.get(k, opts.get(k))) for k in getattr(t, "keys", [])},
                            "timings_ms": {f"c{i}": ms for i, ms in sorted(timings.items())}}
        chosen = f"c{index}"
        configs = tuple(f"c{i}" for i in range(len(t.configs))) if cap.configs == "all" and not cap.gpu \
            else (chosen,)
        config_keys = {k for c in t.configs for k in c.kwargs}
        opts = {k: v for k, v in opts.items() if k not in _OPTION_KEYS}
    consts = derived.constexprs
    sig = dict(derived.signature)
    family = {"kernel": ref, "params": list(sig),
              "scalars": {n: ty for n, ty in sig.items() if not ty.startswith(("*", "tensordesc"))},
              "constexprs": {k: _jsonable(v) for k, v in consts.items() if k not in config_keys and not _is_dtype(v)},
              "options": {k: _jsonable(v) for k, v in sorted(opts.items())}, "autotuned": bool(configs)}
    variant = {"pointers": {n: ty for n, ty in sig.items() if ty.startswith(("*", "tensordesc"))},
               "divisibility": list(derived.divisibility),
               "dtype_constexprs": {k: str(v) for k, v in consts.items() if _is_dtype(v) and k not in config_keys}}
    meta = {k: to_meta(v) for k, v in call.items()}
    imports: set[str] = set()
    try:
        text = "{" + ", ".join(f"{k!r}: {source(v, imports)}" for k, v in meta.items() if k not in config_keys) + "}"
    except Unwritable as e:
        cap.skip(f"triton kernel {ref}", f"an argument cannot be written into the project: {e}")
        return None
    bound = {**{kp.name: kp.default for kp in jit.params if kp.has_default}, **call}
    numbers, formula = _grid(grid, bound, sig, consts)
    ints = {n: int(bound[n]) for n, t in sig.items() if t in _INT_TYPES and isinstance(bound.get(n), int)}
    cints = {k: v for k, v in consts.items() if isinstance(v, int) and not isinstance(v, bool)}
    launch = Launch("triton", ref, name, text, family, variant, options=opts, grid=numbers, grid_formula=formula,
                    grid_args=ints, grid_consts=cints, label=_label(sig, derived.divisibility), configs=configs,
                    chosen=chosen, measured=measured, imports=tuple(sorted(imports)),
                    payload={"jit": jit, "args": meta})
    cap.add(launch)
    return launch


def _label(sig: dict[str, str], divisibility: tuple[str, ...]) -> str:
    """Pointer element types (``bf16``, ``fp32_bf16``), then ``_u<n>`` when n pointers or integers are not
    16-divisible."""
    types: list[str] = []
    for t in sig.values():
        if t.startswith("*"):
            t = t[2:] if t.startswith("*k") else t[1:]
            if t not in types:
                types.append(t)
    loose = [n for n, t in sig.items() if (t.startswith("*") or t in _INT_TYPES) and n not in divisibility]
    return "_".join(types) + (f"_u{len(loose)}" if loose else "")


def _grid(grid: Any, bound: dict[str, Any], sig: dict[str, str], consts: Mapping[str, Any]
          ) -> tuple[tuple[int, int, int] | None, Any]:
    """The launch's grid, and its formula when ``grid`` is a function that traces to one that gives it back."""
    try:
        g = grid(bound) if callable(grid) else grid
        dims = [int(x) for x in (g if isinstance(g, (tuple, list)) else (g,))]
        numbers = tuple((dims + [1, 1, 1])[:3])
    except Exception:  # noqa: BLE001 - a grid we cannot evaluate: none recorded
        return None, None
    if not callable(grid):
        return numbers, None  # type: ignore[return-value]
    ints = {n for n, t in sig.items() if t in _INT_TYPES}
    cints = {k for k, v in consts.items() if isinstance(v, int) and not isinstance(v, bool)}
    try:
        formula = grids.trace(grid, bound, ints, cints)
        fields: dict[tuple[str, str | None], int] = {(n, None): int(bound[n]) for n in ints}
        if tuple(evaluate_grid(grids.substitute(e, consts), fields) for e in formula) != numbers:
            return numbers, None  # type: ignore[return-value]
    except (grids.Untraceable, KernelpackError, KeyError, TypeError):
        return numbers, None  # type: ignore[return-value]
    return numbers, formula  # type: ignore[return-value]


def _interpret(jit: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> Any:
    """Run the launch with Triton's CPU interpreter (the helpers it calls interpreted too): for kernels whose
    results the wrapper reads back on the host (routing metadata)."""
    from triton.runtime.interpreter import InterpretedFunction, _patch_lang
    from triton.runtime.jit import JITFunction

    def call(self: Any, *a: Any, **k: Any) -> Any:
        # InterpretedFunction.__call__ patches triton.language for the helper and never restores it: the same, restored
        scope = _patch_lang(self.fn)
        try:
            return InterpretedFunction(self.fn).rewrite()(*a, **k)
        finally:
            scope.restore()

    with patched([(JITFunction, "__call__", call)]):
        return InterpretedFunction(jit.fn).run(*args, grid=grid, warmup=False, **kwargs)
