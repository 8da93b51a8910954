"""CuTe DSL: ``cutlass.cute.compile`` hooked for the block. Each call -- the launcher and the arguments the wrapper
compiles it with -- is recorded; GPU-less, what it returns launches nothing (its first call's arguments are kept),
on a GPU it is the real compiled object.

A CuTe launcher bakes everything it is compiled with (element types, static shapes, Python values), so each distinct
call is a family of its own. Launchers are often made inside functions (``_make_launch(...)``) or objects built with
arguments, which no project file can name: the project compiles each one with kernelpack while its Python objects
live (:func:`compile_family`, kernel-level where its kernels have a C form, else the launcher whole as a host
program) and links the result (``[[cute]] prebuilt = ...``).
"""

from __future__ import annotations

import contextlib
import inspect
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .records import Launch, short_name
from .world import patched, real

if TYPE_CHECKING:
    from .session import Capture


class _NoKernel:
    """What a GPU-less ``cute.compile`` returns: calling it launches nothing; its first call is kept."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self._payload = payload

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        if self._payload.get("call") is None:
            with real():
                for v in (*args, *kwargs.values()):
                    _materialize(v)
            self._payload["call"] = (args, kwargs)
        return None

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"kernelpack capture (no GPU): the compiled CuTe object has no attribute {name!r} "
                             f"(nothing was compiled)")


def _materialize(v: Any) -> None:
    """A CuTe tensor made by ``from_dlpack`` reads its DLPack capsule on first use: read it now, while the tensor
    it views is alive (a kept call is described later)."""
    with contextlib.suppress(Exception):  # a tensor whose capsule is gone already stays as it is
        if type(v).__module__.startswith("cutlass") and hasattr(type(v), "element_type"):
            _ = (v.element_type, v.shape, v.stride)


def _site() -> tuple[str, int]:
    """Where the package called ``cute.compile``: the first frame outside kernelpack's hook (this file and the
    :class:`~kernelpack.frontends.cute.intercept.CompileHook` it installs)."""
    from ..frontends.cute import intercept

    ours = (__file__, intercept.__file__)
    f: types.FrameType | None = sys._getframe(1)
    while f is not None and f.f_code.co_filename in ours:
        f = f.f_back
    return (f.f_code.co_filename, f.f_lineno) if f is not None else ("", 0)


@contextlib.contextmanager
def hooks(cap: Capture) -> Iterator[None]:
    try:
        import cutlass.cute as cute
    except Exception:  # noqa: BLE001 - no CuTe DSL (or one that cannot load here): nothing to hook
        yield
        return
    from ..frontends.cute.intercept import CompileHook

    original = cute.compile

    def on_call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: str) -> Any:
        with real():
            payload = record(cap, fn, args, kwargs, options, _site())
        if cap.gpu:
            return original(fn, *args, options=options, **kwargs) if options else original(fn, *args, **kwargs)
        return _NoKernel(payload)

    with contextlib.ExitStack() as stack:
        if not cap.gpu and cap.device is not None:  # the DSL's own "which arch?" answers for the device
            from ..frontends.cute.scope import target_arch

            stack.enter_context(target_arch(cap.device.arch))
        stack.enter_context(patched([(cute, "compile", CompileHook(on_call))]))
        yield


def _describe_object(obj: Any) -> Any:
    """A launcher object: its class and the plain values it holds (what its constructor was given: FA4's
    ``is_causal``, a tile shape), so that two objects built differently are two families -- its ``repr`` rarely says."""
    try:
        attrs = vars(obj)
    except TypeError:  # no __dict__
        return _describe(obj)
    held = {k: _describe(v) for k, v in sorted(attrs.items()) if _plain(v)}
    return {"class": f"{type(obj).__module__}.{type(obj).__qualname__}", **held} if held else _describe(obj)


def _plain(v: Any) -> bool:
    if v is None or isinstance(v, (bool, int, float, str)) or (isinstance(v, type) and v.__module__ != "builtins"):
        return True
    return isinstance(v, (tuple, list)) and len(v) <= 8 and all(_plain(x) for x in v)


def _describe(v: Any) -> Any:
    """What a launcher bakes from one argument: a tensor's type and layout, a Python value (never an address)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (tuple, list)):
        return [_describe(x) for x in v]
    if isinstance(v, type):
        return f"{v.__module__}.{v.__qualname__}"
    if type(v).__name__ in ("CUstream", "_FakeStream"):
        return "stream"
    text = re.sub(r"0x[0-9a-fA-F]+", "", repr(v))
    dtype = getattr(v, "element_type", None)
    if dtype is not None:
        text = f"{dtype} {text}"
    return text if len(text) < 200 else type(v).__name__


def launcher_name(fn: Any) -> tuple[str, str]:
    """(its module, a readable name): a function's qualified name with ``<locals>`` dropped
    (``_make_launch_token_launch``), an object's class name."""
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn)
    module = str(getattr(target, "__module__", "") or "")
    qual = str(getattr(target, "__qualname__", None) or getattr(target, "__name__", "launcher"))
    return module, short_name(qual.replace(".<locals>.", "_").replace(".", "_"))


def record(cap: Capture, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: str,
           site: tuple[str, int]) -> dict[str, Any]:
    module, name = launcher_name(fn)
    qual = f"{module}:{name}"
    for v in (*args, *kwargs.values()):
        _materialize(v)
    family = {"kernel": qual, "args": [_describe(a) for a in args],
              "kwargs": {k: _describe(v) for k, v in sorted(kwargs.items())}, "options": options,
              "object": "" if inspect.isfunction(fn) else _describe_object(fn)}
    payload: dict[str, Any] = {"fn": fn, "args": args, "kwargs": kwargs, "options": options, "site": site,
                               "call": None}
    where = f"{Path(site[0]).name}:{site[1]}" if site[0] else ""
    cap.add(Launch("cute", qual, name, "", family, {}, options={"options": options, "site": where},
                   payload=payload))
    return payload


def compile_family(payload: dict[str, Any], name: str, archs: list[str], out: Path) -> Path:
    """Compile a recorded ``cute.compile`` call with kernelpack (kernel-level, else the launcher whole) into
    ``out/NAME.kpack`` or ``out/NAME.kphost``, for the archs it compiles for (a launcher that needs Hopper's TMA or
    WGMMA is built for sm_90a alone when sm_80 is asked too); KernelpackError naming each arch's failure when it
    compiles for none."""
    from ..core.errors import KernelpackError
    from ..frontends.cute.entry import auto

    def build(targets: list[str]) -> Any:
        return auto(payload["fn"], tuple(payload["args"]), targets, name, options=payload.get("options") or "",
                    kwargs=payload.get("kwargs") or None)

    try:
        built = build(archs)
    except KernelpackError as first:
        if len(archs) == 1:
            raise
        ok, why = [], []
        for a in archs:
            try:
                build([a])
                ok.append(a)
            except KernelpackError as e:
                why.append(f"{a}: {e.message}")
        if not ok:
            raise KernelpackError("; ".join(why)) from None
        try:
            built = build(ok)
        except KernelpackError:
            raise first from None
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.{'kpack' if built.kind == 'bundle' else 'kphost'}"
    path.write_bytes(built.data)
    return path
