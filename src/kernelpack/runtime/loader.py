"""Lazy, thread-safe loading of a bundle's binaries: once per binary for the process, once per device for the
choice of binary and the launch facts.

``cuLibraryLoadData`` makes a library that is independent of contexts; ``cuLibraryGetKernel`` gives a
``CUkernel`` that launches in whichever context is current. The first launch on a device also loads the chosen
kernels into that device's primary context (``cuKernelGetFunction``), so a later launch inside CUDA graph capture
never loads modules.
"""

from __future__ import annotations

import threading

from ..core.binary import Binary
from ..launch.binaries import quality
from ..launch.codes import CUDA_ERROR_UNSUPPORTED_PTX_VERSION, ptx_too_new_hint
from ..launch.facts import BinaryFacts as LaunchFacts  # noqa: F401 - the facts of one binary (the launch model)
from . import driver as drv


def binary_quality(b: Binary, major: int, minor: int) -> int:
    """How well ``b`` fits compute capability major.minor (0: cannot run): the launch model's rule, which the C
    library reads from kp_model.h (kernelpack.launch.binaries)."""
    return quality(b.arch, b.kind == "ptx", major, minor)


class Loader:
    """Loaded libraries and kernels of one module, shared by its families."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lock = threading.RLock()
        self._driver: drv.Driver | None = None
        # by the Binary object, which the cache keeps (so its id is not reused): a bundle's readers give one object
        # per blob, and hashing a large cubin again would cost a first launch ~1 ms per MB
        self._libraries: dict[int, tuple[int, Binary]] = {}  # id(binary) -> (CUlibrary, binary)
        self._kernels: dict[tuple[int, str], int] = {}  # (id(binary), entry) -> CUkernel
        self._in_context: set[tuple[int, int]] = set()  # (device, CUkernel) already loaded in its context

    @property
    def driver(self) -> drv.Driver:
        d = self._driver
        if d is None:
            with self.lock:
                if self._driver is None:
                    self._driver = drv.get()
                d = self._driver
        return d

    def kernel(self, label: str, entry: str, b: Binary, device: drv.DeviceInfo) -> int:
        """The CUkernel ``entry`` (of kernel ``label``) in binary ``b``, loaded into ``device``'s primary context
        (callers hold no lock)."""
        key = (id(b), entry)
        with self.lock:
            k = self._kernels.get(key)
            if k is None:
                got = self._libraries.get(id(b))
                lib = got[0] if got is not None else None
                where = f"kernel {label} ({b.arch} {b.kind} from {self.source})"
                if lib is None:
                    image = b.data + b"\0" if b.kind == "ptx" else b.data  # the driver reads PTX up to a NUL
                    try:
                        lib = self.driver.load_library(image, where)
                    except drv.DriverError as e:
                        if e.code != CUDA_ERROR_UNSUPPORTED_PTX_VERSION or b.kind != "ptx":
                            raise
                        raise drv.DriverError(f"{where}: cuLibraryLoadData failed with {e.name} ({e.code}): "
                                              f"{ptx_too_new_hint(b.ptx_isa or '?', self.driver.version)}",
                                              code=e.code, name=e.name, status=e.status) from None
                    self._libraries[id(b)] = (lib, b)
                k = self.driver.get_kernel(lib, entry, where)
                self._kernels[key] = k
            if (device.ordinal, k) not in self._in_context:
                d = self.driver
                saved = d.current_context()
                d.set_current(device.context)
                try:
                    d.load_in_current_context(k, f"kernel {label} on device {device.ordinal}")
                finally:
                    if saved != device.context:
                        d.set_current(saved)
                self._in_context.add((device.ordinal, k))
        return k
