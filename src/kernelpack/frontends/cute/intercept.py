"""The ``cute.compile`` calls a package makes, recorded instead of run: how a CuTe package's own interface becomes the
source of what kernelpack builds.

CuTe packages build their kernel objects and example arguments in their Python interface (tile sizes from the
problem, fake tensors with their dynamic marks, options such as ``--enable-tvm-ffi``) and then call
``cute.compile(kernel, *args, options=...)``. :func:`capture_compiles` runs such an interface with
``cutlass.cute.compile`` replaced by a recorder: each call becomes a :class:`CompileCall` (the kernel object, its
arguments and options, untouched) and returns a stand-in that refuses to run, so interfaces that only compile in a
fake mode (torch's ``FakeTensorMode``) go on to their next compile. Export each with
``kernelpack.cute.export(call.fn, *call.args, kwargs=call.kwargs, options=call.options, arch=...)``, or name the
factory in a ``[[cute]]`` entry's ``capture`` key.

Only calls made through the attribute ``cutlass.cute.compile`` (``cute.compile(...)``) are seen; a module that bound
``compile`` to a name of its own before the block is not. Run the interface inside
:func:`kernelpack.cute.target_arch` when it reads the DSL's arch.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import CompileError

_LOCK = threading.Lock()


@dataclass(frozen=True)
class CompileCall:
    """One recorded ``cute.compile(fn, *args, **kwargs, options=options)``."""

    fn: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    options: str = ""

    @property
    def name(self) -> str:
        """The kernel object's class (or function) name: what a caller picks a call by."""
        return str(getattr(self.fn, "__name__", None) or type(self.fn).__name__)

    def __repr__(self) -> str:
        return f"<CompileCall {self.name} ({len(self.args)} args{', ' + self.options if self.options else ''})>"


class NotCompiled:
    """What a recorded ``cute.compile`` returns: calling it is an error naming the call."""

    def __init__(self, call: CompileCall) -> None:
        self.call = call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise CompileError(f"{self.call!r} was recorded by kernelpack.cute.capture_compiles, not compiled; run the "
                           f"interface in its fake mode (torch FakeTensorMode) so it does not launch")


@contextlib.contextmanager
def recording_compiles() -> Iterator[list[CompileCall]]:
    """Within the block ``cutlass.cute.compile`` records its calls into the yielded list instead of compiling."""
    import cutlass.cute as cute

    calls: list[CompileCall] = []

    def record(fn: Any, *args: Any, options: Any = "", **kwargs: Any) -> NotCompiled:
        if not isinstance(options, str):
            raise CompileError(f"cute.compile({getattr(fn, '__name__', type(fn).__name__)}, ...): options "
                               f"{options!r} is not a string; kernelpack records string options only")
        call = CompileCall(fn, tuple(args), dict(kwargs), options)
        calls.append(call)
        return NotCompiled(call)

    with _LOCK:
        real = cute.compile
        cute.compile = record  # type: ignore[assignment]
        try:
            yield calls
        finally:
            cute.compile = real  # type: ignore[assignment]


def capture_compiles(call: Callable[[], Any]) -> list[CompileCall]:
    """Run ``call()`` with ``cute.compile`` recorded (see the module) and return the calls it made, in order."""
    with recording_compiles() as calls:
        call()
    if not calls:
        raise CompileError(f"{getattr(call, '__qualname__', call)!r} made no cute.compile call")
    return calls
