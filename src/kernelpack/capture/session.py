"""One capture: the hooks, the world (GPU-less) or the GPU, what was recorded, and running the user's code."""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..core.errors import KernelpackError
from .devices import Device
from .devices import device as device_row
from .project import Written, write
from .records import Launch, Skip
from .world import real

if TYPE_CHECKING:
    from .native.driver import Recorder

CONFIGS = ("first", "all", "chosen")  # and c<N>
_ACTIVE: list[Capture] = []  # the captures running in this process, innermost last


def current() -> Capture | None:
    """The capture running now (the code under ``kernelpack capture`` can run its parts through
    :meth:`Capture.run`, so a part that fails is listed and the rest goes on), or None."""
    return _ACTIVE[-1] if _ACTIVE else None


def _check_configs(configs: str, gpu: bool) -> str:
    if configs in CONFIGS or (configs.startswith("c") and configs[1:].isdigit()):
        if configs == "chosen" and not gpu:
            raise KernelpackError("--configs chosen needs a GPU (the autotuner chooses by measuring); GPU-less: "
                                  "first, all or c<N>")
        return configs
    raise KernelpackError(f"--configs {configs!r}: expected first, all, c<N> (a config by index) or, on a GPU, chosen")


def gpu_present() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no torch, or a broken CUDA: no GPU for us
        return False


class Capture:
    """Record every Triton, cuTile and CuTe DSL launch (and ``cute.compile`` call) of the code run inside.

    ``device``: the GPU a GPU-less capture stands for (a row of :data:`kernelpack.capture.DEVICES`: ``"h200"``);
    None captures on this machine's GPU, running the code for real. ``configs``: which configs of an autotuned kernel
    the project builds -- ``"first"`` (GPU-less default), ``"all"``, ``"c<N>"``, ``"chosen"`` (on a GPU, the default:
    what the autotuner chose). ``interpret``: Triton kernels to run with Triton's CPU interpreter while capturing
    GPU-less (for host code that reads their results back). ``native``: also record the kernels that code launches
    through the CUDA driver itself (CUDA C++ built with nvcc, NVRTC; :mod:`kernelpack.capture.native`) -- the
    capture must be made before anything in the process uses CUDA. ``native_from``: keep only native kernels whose
    image came from a file matching one of these globs (``memory``: images from memory); default every file but the
    framework's own (torch, the CUDA libraries, Triton).

        with kernelpack.capture(device="h200") as cap:
            model(x).sum().backward()
        cap.write_project("captured")
    """

    def __init__(self, device: str | Device | None = None, *, configs: str | None = None,
                 interpret: Sequence[str] = (), native: bool = False, native_from: Sequence[str] = ()) -> None:
        self.device: Device | None = None
        self.native_from = list(native_from)
        self.native = native or bool(self.native_from)
        self._recorder: Recorder | None = None
        self._log_start = 0
        if self.native:  # before anything here opens the CUDA driver (the GPU check below does)
            self._recorder = _recorder(device is not None)
        if device is not None:
            self.device = device if isinstance(device, Device) else device_row(device)
        elif not gpu_present():
            from .devices import DEVICES

            raise KernelpackError(f"no GPU here: name the device the capture stands for ({', '.join(DEVICES)})")
        self.gpu = self.device is None
        self.configs = _check_configs(configs or ("chosen" if self.gpu else "first"), self.gpu)
        self.interpret = set(interpret)
        self.launches: list[Launch] = []
        self.skipped: list[Skip] = []
        self.notes: list[str] = []
        self.source = ""
        self.answers: Any = None
        self.seconds = 0.0
        self._stack: contextlib.ExitStack | None = None
        self._archs: list[str] = []
        self._t0 = 0.0

    # ----------------------------------------------------------------- what the hooks call

    def add(self, launch: Launch) -> None:
        launch.source = launch.source or self.source
        launch.archs = launch.archs or tuple(self.archs())
        self.launches.append(launch)

    def skip(self, what: str, why: str) -> None:
        s = Skip(what, " ".join(why.split())[:400], self.source)
        if s not in self.skipped:
            self.skipped.append(s)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # ----------------------------------------------------------------- the block

    def __enter__(self) -> Capture:
        from . import cute, cutile, triton
        from .world import gpu_less

        stack = contextlib.ExitStack()
        try:
            if self.device is not None:
                self.answers = stack.enter_context(gpu_less(self.device))
            stack.enter_context(triton.hooks(self))
            stack.enter_context(cutile.hooks(self))
            stack.enter_context(cute.hooks(self))
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        if self._recorder is not None:
            self._log_start = self._recorder.log.stat().st_size
        self._t0 = time.perf_counter()
        _ACTIVE.append(self)
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.seconds += time.perf_counter() - self._t0
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if exc is not None and isinstance(exc, Exception):
            self.skip(self.source or "the captured code", _raised(exc, tb))
        assert self._stack is not None
        self._stack.close()
        self._stack = None
        if self._recorder is not None:
            self._native_launches()

    def _native_launches(self) -> None:
        """What the recorder logged while the block ran, as this capture's launches."""
        from .native import kernels, log

        assert self._recorder is not None
        got = log.read(self._recorder.log, self._log_start)
        for text in got.notes:
            self.note(f"native: {text}")
        found, left_out = kernels.launches(got, self.archs(), self.native_from or None, self.skip)
        for la in found:
            self.add(la)
        if left_out:
            self.note(f"native: {left_out} launch(es) of kernels not kept (the framework's own: torch, the CUDA "
                      f"libraries, Triton; or not matching --native-from) left out")

    def run(self, label: str, fn: Callable[[], Any]) -> bool:
        """Call ``fn()`` inside the capture as the run ``label``; an exception is recorded as a skipped run (what
        was captured before it is kept). Returns whether it finished."""
        previous, self.source = self.source, label
        try:
            fn()
            return True
        except Exception as e:  # noqa: BLE001 - the user's code: recorded, the capture goes on
            self.skip(label, _raised(e, e.__traceback__))
            return False
        finally:
            self.source = previous

    # ----------------------------------------------------------------- output

    @property
    def mode(self) -> str:
        if self.device is not None:
            return f"GPU-less, answering for {self.device.name} ({self.device.title}, {self.device.sm_count} SMs)"
        import torch

        return f"on {torch.cuda.get_device_name()}"

    def archs(self) -> list[str]:
        if self.device is not None:
            return [self.device.arch]
        if self._archs:
            return list(self._archs)
        import torch

        with real():
            major, minor = torch.cuda.get_device_capability()
        self._archs = [f"sm_{major}{minor}{'a' if major >= 9 and (major, minor) != (12, 0) else ''}"]
        return list(self._archs)

    def write_project(self, root: str | os.PathLike[str], *, name: str | None = None, command: str = "",
                      archs: Sequence[str] | None = None, progress: Callable[[str], None] | None = None) -> Written:
        """Write (or merge into) the project at ``root``: kernelpack.toml, capture_args.py, capture.json (and the
        CuTe launchers compiled, under cute/). ``archs``: what a new project builds for (default: the device's; an
        existing project keeps its ``[library] archs``, and a family captured only for a device of another arch
        is built for that arch)."""
        run = {"command": command or "kernelpack.capture()", "mode": self.mode, "configs": self.configs,
               "seconds": round(self.seconds, 2), "notes": list(self.notes),
               "device_reads": self.answers.summary() if self.answers is not None else []}
        return write(root, self.launches, self.skipped, run, name=name, archs=list(archs or self.archs()),
                     progress=progress)


def _recorder(gpu_less: bool) -> Recorder:
    """The native-launch recorder of this process, loaded now (once)."""
    import tempfile

    from .native import driver

    if gpu_less and not os.environ.get(driver.ENV_DRIVER):
        raise KernelpackError(f"recording native launches without a GPU needs a driver to stand in for one: set "
                              f"{driver.ENV_DRIVER} to kernelpack's dry-run driver (python -m kernelpack.testing "
                              f"path); on a GPU, capture with no --device")
    have = driver.installed()
    if have is not None:
        return have
    import atexit

    fd, path = tempfile.mkstemp(prefix="kernelpack-native-", suffix=".log")
    os.close(fd)
    atexit.register(_remove, path)  # the log holds every image loaded: gone with the process
    return driver.install(Path(path))


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _raised(e: BaseException, tb: TracebackType | None) -> str:
    """``raised TypeError: ... (at file.py:12)``: the exception and the innermost frame of the user's code."""
    frames = [f for f in traceback.extract_tb(tb) if "/kernelpack/" not in f.filename.replace(os.sep, "/")]
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"raised {type(e).__name__}: {e}{where}"


def run_script(cap: Capture, argv: Sequence[str]) -> bool:
    """Run ``python SCRIPT ARGS`` / ``python -m MODULE ARGS`` (``argv``, the leading ``python`` optional) in this
    process, inside ``cap``; returns whether it finished (an exception, or ``sys.exit`` with a non-zero status, is
    recorded as a skipped run)."""
    args = list(argv)
    if args and Path(args[0]).name.startswith("python"):
        args = args[1:]
    if not args:
        raise KernelpackError("kernelpack capture: give the command to run: -- python script.py [ARGS]")
    module = None
    if args[0] == "-m":
        if len(args) < 2:
            raise KernelpackError("kernelpack capture: -m needs a module name")
        module, args = args[1], args[1:]
    elif not Path(args[0]).is_file():
        raise KernelpackError(f"kernelpack capture: {args[0]} is not a file (give -- python SCRIPT [ARGS] or "
                              f"-- python -m MODULE [ARGS])")
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = list(args)
    if module is None:
        sys.path.insert(0, str(Path(args[0]).resolve().parent))

    def go() -> None:
        try:
            if module is not None:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(args[0], run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                raise RuntimeError(f"exited with status {e.code}") from None

    try:
        with cap:
            return cap.run(" ".join(args), go)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
