"""Which stream a launch goes to.

``stream=None`` with torch tensors among the arguments: torch's current stream of the tensors' device, read with
``torch._C._cuda_getCurrentRawStream`` (about 60 ns; ``torch.cuda.current_stream()`` costs about 4 us and is never
called). The C launch path reads it through the torch bridge (c10 directly) when the bridge was built against torch's
CUDA headers, else it calls :func:`c_getter` -- torch's builtin itself, no Python frame in between. Replace the getter
with :func:`set_current_torch_stream` (never by assigning the attribute), so both paths see the new one.

``stream=None`` otherwise: the legacy default stream (0). An int is a ``CUstream`` handle; an object may carry one as
``cuda_stream`` (torch), ``__cuda_stream__()`` (the CUDA stream protocol: ``(version, handle)``) or ``ptr`` (CuPy).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .errors import ArgumentTypeError


def _torch_current(device: int) -> int:
    return int(sys.modules["torch"]._C._cuda_getCurrentRawStream(device))


# replaced (set_current_torch_stream) by tests that run torch CPU tensors as if they were CUDA tensors
current_torch_stream: Callable[[int], int] = _torch_current


def c_getter() -> Callable[[int], int]:
    """The callable the C path calls for torch's current stream: ``torch._C._cuda_getCurrentRawStream`` itself while
    the getter is the default and torch (with CUDA) is loaded, else :data:`current_torch_stream` unwrapped."""
    if current_torch_stream is _torch_current:
        raw = getattr(getattr(sys.modules.get("torch"), "_C", None), "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return raw  # type: ignore[no-any-return]
    return current_torch_stream


def set_current_torch_stream(fn: Callable[[int], int] | None) -> None:
    """Use ``fn(device) -> CUstream handle`` as torch's current stream on both launch paths (None: torch's own)."""
    global current_torch_stream
    current_torch_stream = _torch_current if fn is None else fn
    ext = sys.modules.get(f"{__package__}._launch")
    if ext is not None:
        ext.set_stream_getter(c_getter())


def resolve(stream: Any, device: int, saw_torch: bool, kernel: str) -> int:
    if stream is None:
        return current_torch_stream(device) if saw_torch else 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        handle = stream
    elif hasattr(stream, "cuda_stream"):
        handle = stream.cuda_stream
    elif hasattr(stream, "__cuda_stream__"):
        proto = stream.__cuda_stream__()
        handle = proto[1] if isinstance(proto, tuple) else proto
    elif isinstance(getattr(stream, "ptr", None), int):
        handle = stream.ptr
    else:
        raise ArgumentTypeError(f"kernel {kernel}: stream must be None, an int CUstream handle, or an object with "
                                f"cuda_stream / __cuda_stream__ / ptr; got {type(stream).__name__}")
    if isinstance(handle, bool) or not isinstance(handle, int) or not 0 <= handle < 1 << 64:
        raise ArgumentTypeError(f"kernel {kernel}: stream handle must be an int in [0, 2**64), got {handle!r}")
    return handle
