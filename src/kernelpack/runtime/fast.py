"""The callable kernel objects: the C extension's ``Family`` when it is built, else a pure-Python launcher.

Either way the object users hold carries ``__name__``, ``__doc__``, ``__signature__`` and a ``repr`` describing the
kernel, so ``help(kernel)`` shows its typed signature. Missing native parts are reported once, with a warning.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from . import driver as drv
from . import streams

_state: dict[str, Any] = {"ext": None, "tried": False, "driver_gen": -1}


class FallbackWarning(RuntimeWarning):
    """A native part of the runtime is missing; launches work but cost more."""


def extension() -> Any:
    """The ``_launch`` module, or None (warned once)."""
    if not _state["tried"]:
        _state["tried"] = True
        try:
            from . import _launch
        except ImportError as e:
            warnings.warn(f"kernelpack: the launch extension (kernelpack.runtime._launch) is not built ({e}); kernels "
                          f"launch through the pure-Python path (tens of microseconds per launch). Reinstall "
                          f"kernelpack with a C compiler available to build it.", FallbackWarning, stacklevel=3)
        else:
            _state["ext"] = _launch
    return _state["ext"]


def sync_driver(ext: Any) -> None:
    """Give the extension the entry points of the current driver (again after :func:`driver.use_library`)."""
    gen = drv.generation()
    if _state["driver_gen"] != gen:
        d = drv.get()
        ext.set_driver({**{name: d.addresses[name] for name in drv.FAST_ENTRY_POINTS},
                        "cuTensorMapEncodeTiled": d.addresses.get("cuTensorMapEncodeTiled"),
                        "cuKernelGetParamInfo": d.addresses.get("cuKernelGetParamInfo"),
                        **{n: d.addresses.get(n) for n in ("cuMemAllocAsync", "cuMemcpyHtoDAsync", "cuMemFreeAsync")},
                        "driver_version": d.version})
        ext.set_device_count(d.device_count())
        ext.set_stream_getter(streams.c_getter())
        _state["driver_gen"] = gen


def install_torch_bridge() -> bool:
    """Let the C path read torch tensors. True when the bridge is in use."""
    ext = extension()
    torch = sys.modules.get("torch")
    if ext is None or torch is None:
        return False
    try:
        from . import _torch_bridge
    except ImportError as e:
        warnings.warn(f"kernelpack: the torch bridge (kernelpack.runtime._torch_bridge) is not built or does not "
                      f"load ({e}); launches with torch tensors take the Python path (tens of microseconds each). "
                      f"Reinstall kernelpack with `pip install --no-build-isolation` so the build sees torch.",
                      FallbackWarning, stacklevel=3)
        return False
    if _torch_bridge.TORCH_VERSION != torch.__version__:
        warnings.warn(f"kernelpack: the torch bridge was built for torch {_torch_bridge.TORCH_VERSION}, this is torch "
                      f"{torch.__version__}; torch tensors take the Python path. Reinstall kernelpack to rebuild it.",
                      FallbackWarning, stacklevel=3)
        return False
    ext.set_bridge(_torch_bridge.api)
    ext.set_stream_getter(streams.c_getter())  # torch is loaded now: its own builtin, without a Python frame
    return True


def _lazy_doc(name: str) -> Any:
    """A documentation attribute of a PyLauncher: the one set, else what its ``_kp_docs(name)`` makes (once)."""

    def get(self: Any) -> Any:
        d = self.__dict__
        key = f"<{name}>"
        if key not in d:
            make = d.get("_kp_docs")
            if make is None:
                if name == "__doc__":
                    return None
                raise AttributeError(name)
            d[key] = make(name)
        return d[key]

    def put(self: Any, value: Any) -> None:
        self.__dict__[f"<{name}>"] = value

    return property(get, put)


class PyLauncher:
    """The pure-Python kernel object (no extension): every call takes :meth:`KernelFamily.call`."""

    __doc__ = _lazy_doc("__doc__")  # type: ignore[assignment]
    __signature__ = _lazy_doc("__signature__")
    _kp_repr = _lazy_doc("_kp_repr")

    def __init__(self, call: Any) -> None:
        self._call = call

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return self._call(*args, **kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> PyLauncher:
        return self

    def prepare(self, *args: Any, **kwargs: Any) -> PyPrepared:
        """As the extension's ``Family.prepare``; here each call of the result makes the whole call again."""
        if "stream" in kwargs:
            label = getattr(getattr(self._call, "__self__", None), "label", "?")
            raise TypeError(f"kernel {label}: prepare() takes no stream: pass it to each call of the prepared launch")
        return PyPrepared(self._call, args, kwargs)

    def __repr__(self) -> str:
        try:
            return str(self._kp_repr)
        except AttributeError:
            return "<kernelpack kernel>"


class PyPrepared:
    """A prepared launch on the pure-Python path: the call kept, made again by each call (optionally with
    ``stream=``)."""

    fast = False

    def __init__(self, call: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._call, self._args, self._kwargs = call, args, kwargs

    def __call__(self, stream: Any = None) -> None:
        return self._call(*self._args, stream=stream, **self._kwargs)


_ASK = object()


def make_launcher(family: Any, ext: Any = _ASK) -> Any:
    """The object users call for ``family`` (a :class:`~kernelpack.runtime.family.KernelFamily`), through ``ext``
    (the extension module, None for the Python path; default: :func:`extension`)."""
    if ext is _ASK:
        ext = extension()
    if ext is None:
        return PyLauncher(family.call)
    plans, labels, grids, slots = family.c_tables()
    obj = ext.make_family(family.call, len(family.arg_names), plans, labels, grids, tuple(family.arg_names),
                          family._fast_load, slots)
    family.fast = obj
    return obj


def prepare_fast_path() -> None:
    """Called before the first launch of any kernel: driver entry points, and the torch bridge when torch is
    loaded."""
    ext = extension()
    if ext is None:
        return
    sync_driver(ext)
    if "torch" in sys.modules:
        from .family import _install_torch_bridge

        _install_torch_bridge()
