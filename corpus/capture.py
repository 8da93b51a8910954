"""Run a package's own Python wrappers with the kernel launches intercepted, and keep what each launch was given.

Works on CPU tensors on a machine without a GPU (``cpu_world`` stubs the few ``torch.cuda`` queries wrappers make
and zero-fills ``torch.empty`` so that values computed from skipped kernels stay valid indices), and on the GPU
machine with CUDA tensors (the GPU run captures the same launches, then launches each through kernelpack).

* Triton: ``JITFunction.run`` is replaced; each launch is specialized exactly as Triton's JIT would specialize it
  (Triton's own binder: types, ``tt.divisibility`` 16 hints, integers equal to 1 and ``None`` as constexprs), and an
  autotuned kernel runs the configuration the corpus names (no benchmarking).
* cuTile: ``cuda.tile.launch`` is replaced; the signature is ``KernelSignature.from_kernel_args`` (the one cuTile's
  JIT would compile).
* CuTe DSL: ``cutlass.cute.compile`` is replaced; the function and the example arguments the wrapper compiles with
  are kept (these are the corpus's example arguments).
"""

from __future__ import annotations

import contextlib
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

_LOCK = threading.RLock()
H200_SMS = 132


# ------------------------------------------------------------------------------------------------- a CPU world


@contextlib.contextmanager
def cpu_world(sm_count: int = H200_SMS, capability: tuple[int, int] = (9, 0)) -> Iterator[None]:
    """Stub the ``torch.cuda`` queries wrappers make on CPU tensors; zero-fill fresh tensors (deterministic, and
    indices computed by skipped kernels stay in range)."""
    import torch

    props = types.SimpleNamespace(multi_processor_count=sm_count, major=capability[0], minor=capability[1],
                                  name="kernelpack-corpus (no GPU)", total_memory=141 << 30, gcnArchName="",
                                  max_shared_memory_per_block_optin=232448, L2_cache_size=60 << 20,
                                  regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048,
                                  warp_size=32)
    stream = types.SimpleNamespace(cuda_stream=0, stream_id=0, device=torch.device("cpu"))

    def zeroed(fn: Callable[..., Any]) -> Callable[..., Any]:
        def make(*args: Any, **kwargs: Any) -> Any:
            t = fn(*args, **kwargs)
            with torch.no_grad():
                t.zero_() if t.numel() else None
            return t
        return make

    patches: list[tuple[Any, str, Any]] = [
        (torch, "empty", zeroed(torch.empty)),
        (torch, "empty_like", zeroed(torch.empty_like)),
        (torch, "empty_strided", zeroed(torch.empty_strided)),
        (torch.Tensor, "new_empty", zeroed(torch.Tensor.new_empty)),
        (torch.cuda, "get_device_properties", lambda *a, **k: props),
        (torch.cuda, "get_device_capability", lambda *a, **k: capability),
        (torch.cuda, "current_stream", lambda *a, **k: stream),
        (torch.cuda, "Stream", lambda *a, **k: stream),
        (torch.cuda, "current_device", lambda *a, **k: 0),
        (torch.cuda, "device", lambda *a, **k: contextlib.nullcontext()),
        (torch.cuda, "synchronize", lambda *a, **k: None),
    ]
    patches += _hardware_info_patches(sm_count)
    with patched(patches):
        yield


def _hardware_info_patches(sm_count: int) -> list[tuple[Any, str, Any]]:
    """CuTe DSL's ``cutlass.utils.HardwareInfo`` asks the driver; here it answers for the stubbed device (one
    cluster of n blocks per n SMs: what an H200 reports for cluster sizes 1, 2 and 4)."""
    try:
        import cutlass.utils as cu
    except Exception:  # noqa: BLE001 - no CuTe DSL: nothing to stub
        return []

    class HardwareInfo:
        def __init__(self, *a: Any, **k: Any) -> None:
            pass

        def get_max_active_clusters(self, cluster_size: int) -> int:
            return sm_count // max(1, int(cluster_size))

        def get_device_multiprocessor_count(self) -> int:
            return sm_count

        def get_l2_cache_size_in_bytes(self) -> int:
            return 60 << 20

        def get_max_shared_memory_per_block_optin(self) -> int:
            return 232448

    return [(cu, "HardwareInfo", HardwareInfo)]


@contextlib.contextmanager
def patched(patches: list[tuple[Any, str, Any]]) -> Iterator[None]:
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    with _LOCK:
        try:
            for obj, name, new in patches:
                setattr(obj, name, new)
            yield
        finally:
            for obj, name, old in reversed(saved):
                setattr(obj, name, old)


def to_meta(v: Any) -> Any:
    """A captured argument without its memory: a tensor becomes a meta tensor of the same dtype, shape, strides and
    storage offset (its address is the offset, so alignment and 16-divisibility are what the CPU tensor had: CPU
    allocations are 64-byte aligned); tuples and lists are converted element by element. The corpus keeps every
    launch until it is compiled: without this, a full run holds every case's CPU tensors at once."""
    import torch

    if isinstance(v, torch.Tensor) and v.device.type != "meta":
        base = torch.empty(v.untyped_storage().nbytes() // max(1, v.element_size()), dtype=v.dtype, device="meta")
        return base.as_strided(v.shape, v.stride(), v.storage_offset())
    if isinstance(v, tuple):
        return tuple(to_meta(x) for x in v)
    if isinstance(v, list):
        return [to_meta(x) for x in v]
    return v


# ------------------------------------------------------------------------------------------------------ Triton


@dataclass
class TritonLaunch:
    """One ``kernel[grid](...)`` as Triton's JIT would compile and launch it."""

    jit: Any  # the JITFunction
    args: dict[str, Any]  # every parameter's value, in parameter order (bound as the JIT binds them)
    signature: dict[str, str]  # runtime parameters only: Triton type string
    constexprs: dict[str, Any]  # compile-time parameters (annotated ones, None, integers equal to 1)
    divisibility: dict[str, int]  # tt.divisibility hints (16) the JIT would assume
    options: dict[str, Any]  # num_warps, num_stages, ... as the wrapper (or the autotune config) gave them
    grid: tuple[int, int, int]
    autotune: tuple[int, int] | None = None  # (config index used, number of configs)
    unsupported: str = ""  # why this launch cannot be compiled as given (nested tuple arguments...)
    requires: dict[str, int] = field(default_factory=dict)  # device properties a device-derived constexpr assumed

    @property
    def name(self) -> str:
        return str(self.jit.__name__)

    @property
    def qualname(self) -> str:
        return f"{self.jit.__module__}:{self.jit.__name__}"


_OPTION_KEYS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _triton_backend() -> Any:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    return make_backend(GPUTarget("cuda", 90, 32))


def specialize(jit: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any) -> TritonLaunch:
    """Triton's own binder and argument packing for ``jit[grid](*args, **kwargs)`` (target sm_90)."""
    from triton.runtime.jit import create_function_from_signature

    backend = _triton_backend()
    binder = create_function_from_signature(jit.signature, jit.params, backend)
    bound, spec, opts = binder(*args, **kwargs)
    _, signature, consts, attrs = jit._pack_args(backend, kwargs, bound, spec, opts)
    names = list(bound)
    rec = TritonLaunch(jit, dict(bound), {}, {}, {}, {k: kwargs[k] for k in _OPTION_KEYS if k in kwargs},
                       (1, 1, 1))
    for path, value in consts.items():
        if len(path) != 1:
            rec.unsupported = f"constexpr inside a tuple argument ({names[path[0]]})"
            continue
        rec.constexprs[names[path[0]]] = value
    for name, ty in signature.items():
        if ty == "constexpr":
            continue
        if not isinstance(ty, str):
            rec.unsupported = f"tuple argument {name} ({ty})"
            continue
        rec.signature[name] = ty
    for path, kv in attrs.items():
        for key, val in kv:
            if key == "tt.divisibility" and len(path) == 1:
                rec.divisibility[names[path[0]]] = int(val)
    g = grid(bound) if callable(grid) else grid
    g = tuple(int(x) for x in (g if isinstance(g, (tuple, list)) else (g,)))
    rec.grid = (g + (1, 1, 1))[:3]  # type: ignore[assignment]
    return rec


@contextlib.contextmanager
def triton_launches(config_choice: Callable[[Any, list[Any]], int] | None = None,
                    forward: Callable[[TritonLaunch], Any] | None = None) -> Iterator[list[TritonLaunch]]:
    """Record every Triton launch in the block. ``config_choice(autotuner, configs)`` picks an autotuned kernel's
    configuration (default: the first); ``forward(launch)``, when given, runs the launch (the GPU run) and its
    result is returned to the wrapper, else nothing runs."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    records: list[TritonLaunch] = []
    pending: list[tuple[int, int]] = []

    def jit_run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        rec = specialize(self, args, kwargs, grid)
        if pending:
            rec.autotune = pending.pop()
        records.append(rec)
        return forward(rec) if forward is not None else None

    tuner_run = chosen_config_run(config_choice, lambda index, n: pending.append((index, n)))

    with patched([(JITFunction, "run", jit_run), (Autotuner, "run", tuner_run)]):
        yield records


def chosen_config_run(config_choice: Callable[[Any, list[Any]], int] | None,
                      on_choice: Callable[[int, int], None] | None = None) -> Callable[..., Any]:
    """A replacement for ``Autotuner.run``: no benchmarking, the configuration ``config_choice(tuner, configs)``
    picks (default the first) runs; ``on_choice(index in tuner.configs, number of configs)`` is told which."""

    def tuner_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.nargs = dict(zip(self.arg_names, args))
        configs = self.prune_configs(kwargs) if len(self.configs) > 1 else list(self.configs)
        i = config_choice(self, configs) if config_choice else 0
        config = configs[i]
        self.best_config = config  # wrappers read it (liger's MLP hands it to its backward)
        if config.pre_hook is not None:
            config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
        if on_choice is not None:
            on_choice(self.configs.index(config) if config in self.configs else i, len(self.configs))
        try:
            return self.fn.run(*args, **kwargs, **config.all_kwargs())
        finally:
            self.nargs = None

    return tuner_run


# ------------------------------------------------------------------------------------------------------ cuTile


@dataclass
class CutileLaunch:
    kernel: Any  # the @ct.kernel object
    args: tuple[Any, ...]
    grid: tuple[int, int, int]
    signature: Any = None  # KernelSignature (cutile_python_v2) the JIT would compile; None on the GPU side
    error: str = ""

    @property
    def name(self) -> str:
        return str(self.kernel._annotated_function.pyfunc.__name__) if hasattr(self.kernel, "_annotated_function") \
            else str(getattr(self.kernel, "__name__", "kernel"))

    @property
    def pyfunc(self) -> Any:
        af = getattr(self.kernel, "_annotated_function", None)
        return af.pyfunc if af is not None else getattr(self.kernel, "pyfunc", self.kernel)


@contextlib.contextmanager
def cutile_launches(forward: Callable[[CutileLaunch], Any] | None = None, with_signature: bool = True,
                    config_index: Callable[[Any], int] | None = None) -> Iterator[list[CutileLaunch]]:
    import cuda.tile as ct

    records: list[CutileLaunch] = []

    def launch(stream: Any, grid: Any, kernel: Any, args: Any) -> Any:
        g = tuple(int(x) for x in (grid if isinstance(grid, (tuple, list)) else (grid,)))
        rec = CutileLaunch(kernel, tuple(args), (g + (1, 1, 1))[:3])  # type: ignore[arg-type]
        if with_signature:
            from .nodriver import signature_from_args

            try:
                rec.signature = signature_from_args(kernel, rec.args)
            except Exception as e:  # noqa: BLE001 - recorded as this launch's failure
                rec.error = f"{type(e).__name__}: {e}"
        records.append(rec)
        return forward(rec) if forward is not None else None

    with patched([(ct, "launch", launch), *_tuner_patches(config_index)]):
        yield records


def _tuner_patches(config_index: Callable[[Any], int] | None) -> list[tuple[Any, str, Any]]:
    """Replace ``cuda.tile.tune.exhaustive_search`` (and every module's imported copy of it): no benchmarking, the
    configuration ``config_index(kernel)`` names (default the first) is "best"; the wrapper then launches the kernel
    with it through ``ct.launch`` (captured)."""
    import sys

    try:
        import cuda.tile.tune as tune
    except ImportError:
        return []
    original = getattr(tune, "exhaustive_search", None)
    if original is None:
        return []

    def search(configs: Any, stream: Any, grid_fn: Any, kernel: Any, *a: Any, **k: Any) -> Any:
        configs = list(configs)
        i = min(config_index(kernel), len(configs) - 1) if config_index else 0
        best = types.SimpleNamespace(config=configs[i], mean_us=0.0, time_us=0.0)
        return types.SimpleNamespace(best=best, successes=(best,), failures=())

    out: list[tuple[Any, str, Any]] = [(tune, "exhaustive_search", search)]
    for mod in list(sys.modules.values()):
        if mod is not None and mod is not tune and getattr(mod, "exhaustive_search", None) is original:
            out.append((mod, "exhaustive_search", search))
    return out


# ------------------------------------------------------------------------------------------------------- CuTe


@dataclass
class CuteCompile:
    fn: Any  # what the wrapper handed to cute.compile (a @cute.jit function or a callable object)
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    options: str = ""
    site: tuple[str, int] = ("", 0)  # (file, line) of the cute.compile call in the package
    call: Any = None  # the wrapper's first call of the compiled object, as records (corpus.cute_launch)

    @property
    def name(self) -> str:
        fn = self.fn
        return str(getattr(fn, "__name__", None) or type(fn).__name__)


class _NoKernel:
    """What the intercepted ``cute.compile`` returns: calling it launches nothing."""

    def __init__(self, rec: CuteCompile) -> None:
        self.rec = rec

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Launches nothing; the first call's run-time arguments are kept (as records: the GPU run replays them)."""
        if self.rec.call is None:
            from .cute_launch import describe_call

            self.rec.call = describe_call(args, kwargs)
        return None

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"corpus capture: compiled CuTe object has no attribute {name!r} (nothing was compiled)")


def _call_site() -> tuple[str, int]:
    """The first frame outside this file: where the package called ``cute.compile``."""
    import sys

    f: types.FrameType | None = sys._getframe(1)
    while f is not None and f.f_code.co_filename == __file__:
        f = f.f_back
    return (f.f_code.co_filename, f.f_lineno) if f is not None else ("", 0)


@contextlib.contextmanager
def cute_compiles() -> Iterator[list[CuteCompile]]:
    import cutlass.cute as cute

    records: list[CuteCompile] = []

    class Compile:
        """``cute.compile(fn, *args, options=...)`` and ``cute.compile[opts](fn, ...)`` both record."""

        def __call__(self, fn: Any, *args: Any, options: str = "", **kwargs: Any) -> Any:
            rec = CuteCompile(fn, args, kwargs, options or "", _call_site())
            records.append(rec)
            return _NoKernel(rec)

        def __getitem__(self, opts: Any) -> Any:
            return lambda fn, *a, **k: self(fn, *a, options=" ".join(str(o) for o in (
                opts if isinstance(opts, tuple) else (opts,))), **k)

    with patched([(cute, "compile", Compile())]):
        yield records
