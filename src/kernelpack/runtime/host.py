"""CuTe host programs of a built library, callable from Python: ``mod.gemm(a, b, c, stream=None)``.

The typed C entry (``kernelpack.clib.host.entry``) stays the one place that runs CuTe's host code; Python checks
the arguments as for a kernel, fills the entry's tensor descriptors from each tensor's pointer, shape and strides,
makes the tensors' device current, and calls the exported symbol through ctypes (the library is ``dlopen``-ed on
the first call). A failure comes back from the entry's ``kp_status`` and ``NAME_last_error()`` as the runtime's
exception classes. Cost: the checks and one ctypes call with by-value structs, a few microseconds per call — about
what the host program's own host work (TMA descriptor encoding) costs; kernels launched by families stay on the
fast path.

Programs sharing a name (variants such as ``gemm[f16]``/``gemm[bf16]``) are one callable dispatching on the
arguments, like a kernel family.
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import os
import threading
from collections.abc import Sequence
from typing import Any

from ..bundle.host_manifest import HostEntryInfo
from ..core._reprs import clip, listing
from ..core.errors import BundleError, LaunchError
from ..launch.codes import STATUS
from ..launch.family import order_key
from . import streams
from .adapters import PRODUCER_ERRORS, TensorView, as_view, is_torch_tensor, launch_device, refusal
from .driver import get as get_driver
from .errors import (
    ArgumentError,
    ArgumentTypeError,
    ArgumentValueError,
    DriverError,
    NoMatchingSpecialization,
    error_for_status,
)
from .hostargs import HostCall, call_signature

STATUS_NAMES = {st.value: st.name for st in STATUS}


class SharedLibrary:
    """The built library, ``dlopen``-ed on first use; refuses a static archive with the reason. ``build_ids``: the
    build id of each kernelpack library that the file's bytes held when they were read (``kernelpack.load``): the
    library ``dlopen`` gives must be the same builds, or no entry is called (the host programs' descriptions were
    read from those bytes; see :mod:`kernelpack.clib.buildid`)."""

    def __init__(self, path: str, archive: bool, build_ids: dict[str, str] | None = None) -> None:
        self.path = os.path.abspath(path)
        self.archive = archive
        self.build_ids = dict(build_ids or {})
        self._lib: ctypes.CDLL | None = None
        self._mismatch: str | None = None
        self._lock = threading.Lock()

    def function(self, symbol: str, argtypes: list[Any], label: str) -> Any:
        if self.archive:
            raise LaunchError(f"host program {label}: {self.path} is a static archive, which Python cannot load; "
                              f"load the shared library (lib*.so) built with it to call CuTe host programs (the "
                              f"archive's kernel families work)")
        with self._lock:
            if self._lib is None and self._mismatch is None:
                try:
                    lib = ctypes.CDLL(self.path, mode=ctypes.RTLD_LOCAL)
                except OSError as e:
                    raise LaunchError(f"host program {label}: cannot load {self.path}: {e}") from None
                self._mismatch = self._other_build(lib)
                self._lib = lib if self._mismatch is None else None
        if self._mismatch is not None:
            raise BundleError(f"host program {label}: {self._mismatch}")
        try:
            fn = getattr(self._lib, symbol)
        except AttributeError:
            raise LaunchError(f"host program {label}: {self.path} does not export {symbol}") from None
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
        return fn

    def _other_build(self, lib: ctypes.CDLL) -> str | None:
        """Why the library ``dlopen`` gave is not the build whose bytes were read (None when it is)."""
        for name, expected in sorted(self.build_ids.items()):
            try:
                fn = getattr(lib, f"{name}_build_id")
            except AttributeError:
                got = "a build with no build id"
            else:
                fn.argtypes, fn.restype = [], ctypes.c_char_p
                got = f"build {(fn() or b'').decode(errors='replace')}"
            if got != f"build {expected}":
                return (f"{self.path} was read as lib{name} of kernelpack build {expected}, but the library this "
                        f"process runs from that path is {got}: the file was replaced after it was read (a build "
                        f"published while it was loaded), or this process had already loaded another build of it "
                        f"(dlopen reuses a library it loaded from the same path); load it again once the build has "
                        f"finished, in a new process if it was loaded before")
        return None

    def text(self, symbol: str, restype: Any) -> Any:
        fn = getattr(self._lib, symbol)
        fn.argtypes, fn.restype = [], restype
        return fn()


class HostFamily:
    """The host programs of one name; ``__call__`` checks, picks the first that fits, and calls its entry."""

    def __init__(self, name: str, infos: Sequence[HostEntryInfo], library: SharedLibrary) -> None:
        self.name = name
        self._infos = tuple(infos)
        self.arg_names, self.has_stream = call_signature(self._infos[0])
        for i in self._infos[1:]:
            names, stream = call_signature(i)
            if names != self.arg_names or stream != self.has_stream:
                raise ValueError(f"{i.label} takes ({', '.join(names)}), {self._infos[0].label} takes "
                                 f"({', '.join(self.arg_names)})")
        self.library = library
        self._fns: dict[str, Any] = {}

    @functools.cached_property
    def calls(self) -> tuple[HostCall, ...]:
        """Each program's checked entry, most specific first (made on first use: loading a library reads only the
        names and signatures)."""
        return tuple(sorted((HostCall(i) for i in self._infos), key=lambda c: order_key(c.specificity)))

    @property
    def label(self) -> str:
        return self.calls[0].label if len(self.calls) == 1 else self.name

    def __repr__(self) -> str:
        stream = ", *, stream" if self.has_stream else ""
        return (f"<HostFamily {clip(self.name, 64)}({listing(self.arg_names, 100)}{stream}): {len(self.calls)} host "
                f"program{'s' * (len(self.calls) != 1)} ({listing((c.label for c in self.calls), 80)})>")

    def __call__(self, *args: Any, stream: Any = None, **named: Any) -> None:
        values = self._bind(args, named, stream)
        views = {n: _view(self.label, n, v) for n, v in values.items()}
        ordinal = self._device(views)
        call, packed = self._dispatch(values, views)
        if stream is not None and not call.has_stream:
            raise ArgumentTypeError(f"host program {call.label}: takes no stream (its CuTe function has no stream "
                                    f"argument); leave stream out")
        saw_torch = any(v is not None and v.source == "torch" for v in views.values())
        handle = streams.resolve(stream, ordinal or 0, saw_torch, call.label) if call.has_stream else 0
        if call.argtypes is None:
            raise LaunchError(f"host program {call.label}: {call.unsupported}; ctypes cannot pass it exactly: call "
                              f"{call.info.symbol} from C")
        fn = self._fns.get(call.info.symbol)
        if fn is None:
            fn = self._fns[call.info.symbol] = self.library.function(call.info.symbol, call.argtypes, call.label)
        c_args = call.c_args(packed, handle)
        status = _on_device(ordinal, lambda: fn(*c_args), call.label)
        if status != 0:
            raise self._error(call, status)

    def _bind(self, args: tuple[Any, ...], named: dict[str, Any], stream: Any) -> dict[str, Any]:
        n, sig = len(self.arg_names), ", ".join(self.arg_names)
        if len(args) > n:
            raise ArgumentTypeError(f"host program {self.label}: takes {n} arguments ({sig}), got {len(args)}")
        values = dict(zip(self.arg_names, args))
        for key, v in named.items():
            if key not in self.arg_names:
                opts = "; keyword: stream" if self.has_stream else ""
                raise ArgumentTypeError(f"host program {self.label}: unknown keyword argument '{key}' (arguments: "
                                        f"{sig}{opts})")
            if key in values:
                raise ArgumentTypeError(f"host program {self.label}: argument '{key}' given twice")
            values[key] = v
        missing = [a for a in self.arg_names if a not in values]
        if missing:
            raise ArgumentTypeError(f"host program {self.label}: takes {n} arguments ({sig}), got {n - len(missing)}: "
                                    f"missing {', '.join(missing)}")
        return values

    def _device(self, views: dict[str, TensorView | None]) -> int | None:
        return launch_device(f"host program {self.label}", views.items(), kind="argument",
                             needs="host programs")

    def _dispatch(self, values: dict[str, Any], views: dict[str, TensorView | None]) -> tuple[HostCall, list[Any]]:
        reasons: list[tuple[str, LaunchError]] = []
        for c in self.calls:
            try:
                return c, c.fit(values, views)
            except (ArgumentTypeError, ArgumentValueError) as e:
                if len(self.calls) == 1:
                    raise
                reasons.append((c.label, e))
        if all(type(e) is ArgumentTypeError for _, e in reasons):
            raise reasons[0][1]
        detail = "; ".join(f"{label}: {e.message.split(': ', 1)[-1]}" for label, e in reasons)
        raise NoMatchingSpecialization(f"host program {self.name}: no variant accepts these arguments; {detail}")

    def _error(self, call: HostCall, status: int) -> LaunchError:
        lib = call.info.library
        message = self.library.text(f"{lib}_last_error", ctypes.c_char_p) or b""
        cuda = int(self.library.text(f"{lib}_last_cuda_error", ctypes.c_int))
        text = (f"host program {call.label}: {call.info.symbol} returned {STATUS_NAMES.get(status, status)}: "
                f"{message.decode(errors='replace')}")
        cls = error_for_status(status)
        if cls is DriverError:
            return DriverError(text, code=cuda, name=f"CUresult {cuda}" if cuda else "", status=status)
        if cls is ArgumentError:
            return ArgumentValueError(text)  # the entry's checks are on values (alignment, extents)
        return cls(text)  # type: ignore[return-value]

    # ------------------------------------------------------------ what help() and repr show

    def signature_text(self) -> str:
        args = ", ".join(self._arg_text(i) for i in range(len(self.arg_names)))
        tail = ", *, stream=None" if self.has_stream else ""
        return f"{self.name}({args}{tail})"

    def _arg_text(self, i: int) -> str:
        texts: list[str] = []
        for c in self.calls:
            t = c.describe_arg(i).split(": ", 1)[1]
            if t not in texts:
                texts.append(t)
        return f"{self.arg_names[i]}: {' | '.join(texts)}"

    def signature(self) -> inspect.Signature:
        P = inspect.Parameter
        params = [P(n, P.POSITIONAL_OR_KEYWORD, annotation=self._arg_text(i).split(": ", 1)[1])
                  for i, n in enumerate(self.arg_names)]
        if self.has_stream:
            params.append(P("stream", P.KEYWORD_ONLY, default=None))
        return inspect.Signature(params, return_annotation=None)

    def doc(self, source: str) -> str:
        lines = [self.signature_text(), "",
                 f"CuTe host program {self.name} from {source}: {len(self.calls)} variant(s), tried in this order:"]
        for c in self.calls:
            lines.append(f"  {c.label}  (C entry {c.info.symbol}; {', '.join(c.info.archs)}; zero extents: "
                         f"{'return without running' if c.info.zero_extent == 'skip' else 'refused'})")
            lines.append(f"      {c.describe()}")
            if c.unsupported:
                lines.append(f"      not callable from Python: {c.unsupported}")
        if self.library.archive:
            lines.append("Not callable here: loaded from a static archive; load the shared library.")
        lines.append("Arguments: torch tensors, __cuda_array_interface__ or DLPack arrays on one CUDA device for "
                     "tensors; Python numbers for scalars. stream: None (torch's current stream with torch tensors, "
                     "else the default stream), an int handle, or a stream object.")
        return "\n".join(lines)

    def repr_text(self) -> str:
        """One bounded line (the whole signature is in ``__doc__``)."""
        symbols = listing((c.info.symbol for c in self.calls), 60)
        return f"<kernelpack host program {clip(self.signature_text(), 200)} [{symbols}]>"


def _view(label: str, name: str, value: Any) -> TensorView | None:
    if value is None or isinstance(value, (int, float, bytes, bytearray, memoryview, str)):
        return None
    if not (is_torch_tensor(value) or hasattr(value, "__cuda_array_interface__") or hasattr(value, "__dlpack__")):
        return None
    try:
        return as_view(value, _pointer_device)
    except PRODUCER_ERRORS as e:
        err = refusal(e, value, f"host program {label}", f"argument '{name}'")
        raise err from err.__cause__


def _pointer_device(ptr: int) -> int | None:
    try:
        return get_driver().pointer_device(ptr)
    except DriverError:
        return None


def _on_device(ordinal: int | None, fn: Any, label: str) -> int:
    """Run ``fn`` with device ``ordinal``'s primary context current (the entry runs on the current device). With
    no driver the entry is called as it is: it returns without running on empty tensors, else reports why."""
    if ordinal is None:
        return int(fn())
    try:
        d = get_driver()
    except DriverError:
        return int(fn())
    try:
        target = d.device(ordinal).context
        saved = d.current_context()
        if saved != target:
            d.set_current(target)
    except DriverError as e:
        raise DriverError(f"host program {label}: {e}", code=e.code, name=e.name, status=e.status) from None
    try:
        return int(fn())
    finally:
        if saved and saved != target:
            d.set_current(saved)
