"""The GPU-less capture: CPU tensors stand in for CUDA tensors, device queries are answered for a named device.

While the block runs:

* every CPU tensor says it is on ``cuda:0`` (``tensor.device``, ``is_cuda``, ``get_device()``), and a torch function
  mode puts every tensor made "on the GPU" (``device="cuda"``, ``.to("cuda")``, ``.cuda()``, ``device=x.device``) on
  the CPU instead: the wrapper takes its CUDA path, and its tensors are real memory the host can index;
* fresh tensors (``torch.empty`` and its kin) are zero-filled, so values a skipped kernel would have written (indices,
  counts, offsets the wrapper reads back) stay in range;
* ``torch.cuda`` queries (``is_available``, ``get_device_properties``, ``get_device_capability``, streams, events,
  synchronization), Triton's active driver (``driver.active.utils.get_device_properties``, the current target) and
  CUTLASS's ``HardwareInfo`` answer for the device's row of :data:`kernelpack.capture.devices.DEVICES`; every
  property read is counted, for the capture's report;
* :func:`real` suspends the pretence (the capture's own code reads true devices inside it).

Kernels are not run: the DSL hooks (:mod:`.hooks`) record each launch and return.
"""

from __future__ import annotations

import contextlib
import threading
import types
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from ..core.errors import KernelpackError
from .devices import Device

_LOCK = threading.RLock()
_STATE = threading.local()  # .real: depth of real() blocks in this thread
_WORLD: list[Answers] = []  # the running GPU-less world (one per process)


def pretending() -> bool:
    return bool(_WORLD) and not getattr(_STATE, "real", 0)


@contextlib.contextmanager
def real() -> Iterator[None]:
    """Within the block, tensors tell their true device (the capture's own code runs here)."""
    _STATE.real = getattr(_STATE, "real", 0) + 1
    try:
        yield
    finally:
        _STATE.real -= 1


@contextlib.contextmanager
def patched(patches: list[tuple[Any, str, Any]]) -> Iterator[None]:
    """Set each ``(object, attribute, value)`` for the block; put the old values (or their absence) back after."""
    missing = object()
    saved = [(obj, name, vars(obj).get(name, missing) if isinstance(obj, type) else getattr(obj, name, missing))
             for obj, name, _ in patches]
    with _LOCK:
        try:
            for obj, name, new in patches:
                setattr(obj, name, new)
            yield
        finally:
            for obj, name, old in reversed(saved):
                if old is missing:
                    with contextlib.suppress(AttributeError):
                        delattr(obj, name)
                else:
                    setattr(obj, name, old)


class Answers:
    """What the world answered: device property reads, counted by name."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.reads: Counter[str] = Counter()

    def summary(self) -> list[str]:
        props = {**self.device.properties(), **self.device.triton_properties(),
                 "capability": self.device.capability}
        return [f"{k} = {props.get(k, '?')} ({n} read{'s' * (n != 1)})" for k, n in sorted(self.reads.items())]


class _Props:
    """``torch.cuda.get_device_properties(...)`` for the device, counting reads."""

    def __init__(self, answers: Answers) -> None:
        object.__setattr__(self, "_answers", answers)

    def __getattr__(self, name: str) -> Any:
        answers: Answers = object.__getattribute__(self, "_answers")
        props = answers.device.properties()
        if name not in props:
            raise AttributeError(f"kernelpack capture: device property {name!r} is not in the {answers.device.name} "
                                 f"row of the device table")
        answers.reads[name] += 1
        return props[name]

    def __repr__(self) -> str:
        d = object.__getattribute__(self, "_answers").device
        return f"_CudaDeviceProperties(name='{d.title}', major={d.capability[0]}, minor={d.capability[1]}, " \
               f"multi_processor_count={d.sm_count}) [kernelpack capture, no GPU]"


class _Stream:
    cuda_stream = 0
    stream_id = 0
    device_index = 0

    def __init__(self, *a: Any, **k: Any) -> None:
        import torch

        self.device = torch.device("cuda", 0)

    def synchronize(self) -> None:
        return None

    def wait_stream(self, *a: Any) -> None:
        return None

    def wait_event(self, *a: Any) -> None:
        return None

    def record_event(self, *a: Any) -> _Event:
        return _Event()

    def query(self) -> bool:
        return True

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *a: Any) -> None:
        return None


class _Event:
    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def record(self, *a: Any) -> None:
        return None

    def synchronize(self) -> None:
        return None

    def wait(self, *a: Any) -> None:
        return None

    def query(self) -> bool:
        return True

    def elapsed_time(self, other: Any) -> float:
        return 0.0


def _is_cuda(d: Any) -> bool:
    import torch

    if isinstance(d, bool):
        return False
    if isinstance(d, int):
        return True  # a device index is a CUDA device
    if isinstance(d, str):
        return d.split(":")[0] == "cuda"
    return isinstance(d, torch.device) and d.type == "cuda"


def _cpu(d: Any) -> Any:
    return "cpu" if _is_cuda(d) else d


def _modes() -> tuple[Any, Any]:
    """A torch function mode that puts tensors made "on the GPU" on the CPU where the Python API is called (before
    torch looks for CUDA), and a dispatch mode that does the same for factory calls made where the first is off
    (inside ``backward``, which the autograd engine runs under the dispatch state alone) and zero-fills fresh
    tensors."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    empties = {aten.empty.memory_format, aten.empty_strided.default, aten.new_empty.default,
               aten.new_empty_strided.default, aten.empty_like.default}

    def fix(kwargs: dict[str, Any]) -> dict[str, Any]:
        if "device" in kwargs and _is_cuda(kwargs["device"]):
            kwargs = {**kwargs, "device": torch.device("cpu")}
        if kwargs.get("pin_memory"):
            kwargs = {**kwargs, "pin_memory": False}
        return kwargs

    class CpuForCuda(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            return func(*args, **(fix(kwargs) if pretending() else kwargs))

    class ZeroFilled(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if not pretending():
                return func(*args, **kwargs)
            if func is aten._pin_memory.default:
                return args[0]
            out = func(*args, **fix(kwargs))
            if func in empties and isinstance(out, torch.Tensor) and out.numel():
                out.zero_()
            return out

    return CpuForCuda, ZeroFilled()


def _backward_patch(function_mode: type) -> list[tuple[Any, str, Any]]:
    """The autograd engine runs an ``autograd.Function``'s backward where the torch function mode is off (inside
    the mode's own handling of ``Tensor.backward``): put it back on around the user's backward."""
    from torch.autograd.function import BackwardCFunction

    original = BackwardCFunction.apply

    def apply(self: Any, *args: Any) -> Any:
        if not pretending():
            return original(self, *args)
        with function_mode():
            return original(self, *args)

    return [(BackwardCFunction, "apply", apply)]


def _tensor_patches() -> list[tuple[Any, str, Any]]:
    import torch

    base = torch._C.TensorBase
    true_device = base.device

    def device(self: Any) -> Any:
        d = true_device.__get__(self)
        return torch.device("cuda", 0) if d.type == "cpu" and pretending() else d

    def true(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*a: Any, **k: Any) -> Any:
            with real():
                return fn(*a, **k)
        return call

    to, cuda, get_device, pin = base.to, base.cuda, base.get_device, base.pin_memory

    def to_(self: Any, *args: Any, **kwargs: Any) -> Any:
        if pretending():
            args = tuple(_cpu(a) for a in args)
            kwargs = {k: (_cpu(v) if k == "device" else v) for k, v in kwargs.items()}
        return to(self, *args, **kwargs)

    def cuda_(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self if pretending() else cuda(self, *args, **kwargs)

    def get_device_(self: Any) -> int:
        return 0 if pretending() and true_device.__get__(self).type == "cpu" else int(get_device(self))

    def pin_memory_(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self if pretending() else pin(self, *args, **kwargs)

    out: list[tuple[Any, str, Any]] = [
        (torch.Tensor, "device", property(device)),
        (torch.Tensor, "is_cuda", property(lambda self: device(self).type == "cuda")),
        (torch.Tensor, "is_cpu", property(lambda self: device(self).type == "cpu")),
        (torch.Tensor, "to", to_), (torch.Tensor, "cuda", cuda_), (torch.Tensor, "get_device", get_device_),
        (torch.Tensor, "pin_memory", pin_memory_),
    ]
    for name in ("__dlpack__", "__dlpack_device__"):  # DLPack consumers get the true (host) memory
        if hasattr(torch.Tensor, name):
            out.append((torch.Tensor, name, true(getattr(torch.Tensor, name))))
    return out


def _cuda_patches(answers: Answers) -> list[tuple[Any, str, Any]]:
    import torch

    dev = answers.device
    props = _Props(answers)

    def capability(*a: Any, **k: Any) -> tuple[int, int]:
        answers.reads["capability"] += 1
        return dev.capability

    def name(*a: Any, **k: Any) -> str:
        answers.reads["name"] += 1
        return dev.title

    def none() -> Callable[..., None]:  # a function of its own per attribute (torch._dynamo maps each to one rule)
        return lambda *a, **k: None

    cuda = torch.cuda
    out: list[tuple[Any, str, Any]] = [
        (cuda, "is_available", lambda: True), (cuda, "is_initialized", lambda: True),
        (cuda, "device_count", lambda: 1), (cuda, "current_device", lambda: 0), (cuda, "set_device", none()),
        (cuda, "get_device_properties", lambda *a, **k: props), (cuda, "get_device_capability", capability),
        (cuda, "get_device_name", name), (cuda, "get_arch_list", lambda: [f"sm_{dev.capability[0]}"
                                                                          f"{dev.capability[1]}"]),
        (cuda, "is_bf16_supported", lambda *a, **k: dev.capability >= (8, 0)),
        (cuda, "current_stream", lambda *a, **k: _Stream()), (cuda, "default_stream", lambda *a, **k: _Stream()),
        (cuda, "Stream", _Stream), (cuda, "Event", _Event), (cuda, "stream", lambda *a, **k: contextlib.nullcontext()),
        (cuda, "device", lambda *a, **k: contextlib.nullcontext()), (cuda, "synchronize", none()),
        (cuda, "empty_cache", none()), (cuda, "memory_allocated", lambda *a, **k: 0),
        (cuda, "max_memory_allocated", lambda *a, **k: 0), (cuda, "mem_get_info", lambda *a, **k: (dev.memory,) * 2),
        (cuda, "manual_seed", lambda seed: torch.manual_seed(seed)), (cuda, "manual_seed_all", none()),
        (cuda, "get_rng_state", lambda *a, **k: torch.get_rng_state()), (cuda, "set_rng_state", none()),
        (cuda, "_lazy_init", none()),
    ]
    if torch.version.cuda is None:
        out.append((torch.version, "cuda", "13.0"))
    return out


class _TritonDriver:
    """Triton's active driver, for a device that is not here (nothing is launched through it)."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self.utils = types.SimpleNamespace(get_device_properties=self._properties)

    def _properties(self, *a: Any, **k: Any) -> dict[str, int]:
        for key in self.answers.device.triton_properties():
            self.answers.reads[key] += 1
        return self.answers.device.triton_properties()

    def is_active(self) -> bool:
        return True

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, *a: Any) -> None:
        return None

    def get_current_stream(self, *a: Any) -> int:
        return 0

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        major, minor = self.answers.device.capability
        return GPUTarget("cuda", major * 10 + minor, 32)

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cuda", 0)

    def get_device_interface(self) -> Any:
        import torch

        return torch.cuda

    def get_benchmarker(self) -> Any:
        return lambda *a, **k: 1.0

    def get_empty_cache_for_benchmark(self) -> Any:
        import torch

        return torch.empty(0)

    def clear_cache(self, *a: Any) -> None:
        return None


@contextlib.contextmanager
def _triton_driver(answers: Answers) -> Iterator[None]:
    try:
        from triton.runtime import driver
    except ImportError:
        yield
        return
    previous = getattr(driver, "_active", None)
    driver.set_active(_TritonDriver(answers))
    try:
        yield
    finally:
        driver._active = previous


def _cutlass_patches(answers: Answers) -> list[tuple[Any, str, Any]]:
    """CUTLASS's ``HardwareInfo`` asks the driver; here it answers for the device (one active cluster of n blocks
    per n SMs)."""
    try:
        import cutlass.utils as cu
    except Exception:  # noqa: BLE001 - no CuTe DSL (or a broken one): nothing to answer for
        return []
    dev = answers.device

    class HardwareInfo:
        def __init__(self, *a: Any, **k: Any) -> None:
            pass

        def get_max_active_clusters(self, cluster_size: int) -> int:
            answers.reads["max_active_clusters"] += 1
            return dev.sm_count // max(1, int(cluster_size))

        def get_device_multiprocessor_count(self) -> int:
            answers.reads["multi_processor_count"] += 1
            return dev.sm_count

        def get_l2_cache_size_in_bytes(self) -> int:
            answers.reads["L2_cache_size"] += 1
            return dev.l2_bytes

        def get_max_shared_memory_per_block_optin(self) -> int:
            answers.reads["max_shared_memory_per_block_optin"] += 1
            return dev.smem_optin

    return [(cu, "HardwareInfo", HardwareInfo)]


@contextlib.contextmanager
def gpu_less(device: Device) -> Iterator[Answers]:
    """The GPU-less world for ``device`` (see the module doc); yields what it answered."""
    answers = Answers(device)
    if _WORLD:
        raise KernelpackError("kernelpack capture: a GPU-less capture is already running in this process")
    patches = _tensor_patches() + _cuda_patches(answers) + _cutlass_patches(answers)
    function_mode, dispatch_mode = _modes()
    patches += _backward_patch(function_mode)
    _WORLD.append(answers)
    try:
        with patched(patches), _triton_driver(answers), function_mode(), dispatch_mode:
            yield answers
    finally:
        _WORLD.clear()
