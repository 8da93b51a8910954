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

Only calls made through the attribute ``cutlass.cute.compile`` (``cute.compile(...)``, ``cute.compile[opts](...)``)
are seen; a module that bound ``compile`` to a name of its own before the block is not. Run the interface inside
:func:`kernelpack.cute.target_arch` when it reads the DSL's arch. :class:`CompileHook` is the one stand-in for
``cute.compile`` in kernelpack: ``kernelpack capture`` (``kernelpack.capture.cute``) hooks the DSL with it too.
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


class CompileHook:
    """What ``cutlass.cute.compile`` is replaced by: ``cute.compile(fn, *args, options=..., **kwargs)`` and
    ``cute.compile[opts](fn, ...)`` (the DSL's two spellings; ``[opts]`` joined as text, before ``options=``) both
    become ``on_call(fn, args, kwargs, options)``, whose result the caller gets. ``options`` must be text."""

    def __init__(self, on_call: Callable[[Any, tuple[Any, ...], dict[str, Any], str], Any],
                 bracketed: str = "") -> None:
        self._on_call = on_call
        self._bracketed = bracketed

    def __call__(self, fn: Any, *args: Any, options: Any = "", **kwargs: Any) -> Any:
        if not isinstance(options, str):
            raise CompileError(f"cute.compile({getattr(fn, '__name__', type(fn).__name__)}, ...): options "
                               f"{options!r} is not a string; kernelpack records string options only")
        text = " ".join(t for t in (self._bracketed, options) if t)
        return self._on_call(fn, tuple(args), dict(kwargs), text)

    def __getitem__(self, opts: Any) -> CompileHook:
        given = " ".join(str(o) for o in (opts if isinstance(opts, tuple) else (opts,)))
        return CompileHook(self._on_call, " ".join(t for t in (self._bracketed, given) if t))


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

    def record(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: str) -> NotCompiled:
        call = CompileCall(fn, args, kwargs, options)
        calls.append(call)
        return NotCompiled(call)

    with _LOCK:
        real = cute.compile
        cute.compile = CompileHook(record)  # type: ignore[assignment]
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
