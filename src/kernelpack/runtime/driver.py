"""A ctypes binding of the few CUDA driver entry points the runtime needs, resolved through ``cuGetProcAddress``.

The driver is ``dlopen``-ed on first use (``libcuda.so.1``; :func:`use_library` points at another file, for
tests with a fake driver). Every entry point is fetched with ``cuGetProcAddress_v2`` at API version 12000, the
same way the generated C library does; the fast C extension is handed the same addresses, so both paths always
call one driver. Failures raise :class:`DriverError` naming the call, the kernel and the CUresult.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable
from typing import Any

from ..core.records import record
from ..launch import codes
from .errors import DriverError

API_VERSION = codes.CUDA_API_VERSION
DEFAULT_LIBRARY = "libcuda.so.1"

# CUdevice_attribute values used by the runtime
_A = codes.DEVICE_ATTRIBUTES
ATTR_MAX_THREADS_PER_BLOCK = _A["MAX_THREADS_PER_BLOCK"]
ATTR_MAX_BLOCK_DIM = (_A["MAX_BLOCK_DIM_X"], _A["MAX_BLOCK_DIM_Y"], _A["MAX_BLOCK_DIM_Z"])
ATTR_MAX_GRID_DIM = (_A["MAX_GRID_DIM_X"], _A["MAX_GRID_DIM_Y"], _A["MAX_GRID_DIM_Z"])
ATTR_MULTIPROCESSOR_COUNT = _A["MULTIPROCESSOR_COUNT"]
ATTR_CC_MAJOR = _A["COMPUTE_CAPABILITY_MAJOR"]
ATTR_CC_MINOR = _A["COMPUTE_CAPABILITY_MINOR"]
ATTR_MAX_SMEM_OPTIN = _A["MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"]
ATTR_CLUSTER_LAUNCH = _A["CLUSTER_LAUNCH"]
ATTR_COOPERATIVE_LAUNCH = _A["COOPERATIVE_LAUNCH"]

FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES = codes.FUNC_ATTRIBUTES["MAX_DYNAMIC_SHARED_SIZE_BYTES"]
POINTER_ATTRIBUTE_DEVICE_ORDINAL = codes.POINTER_ATTRIBUTES["DEVICE_ORDINAL"]
LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = codes.LAUNCH_ATTRIBUTES["CLUSTER_DIMENSION"]
LAUNCH_ATTRIBUTE_COOPERATIVE = codes.LAUNCH_ATTRIBUTES["COOPERATIVE"]
LAUNCH_ATTRIBUTE_PDL = codes.LAUNCH_ATTRIBUTES["PROGRAMMATIC_STREAM_SERIALIZATION"]

CUDA_ERROR_INVALID_CONTEXT = codes.CUDA_ERROR_INVALID_CONTEXT
_CUDA_NO_DEVICE = codes.CUDA_RESULTS["CUDA_ERROR_NO_DEVICE"]
_NO_DRIVER, _TOO_OLD, _NO_DEVICE, _CUDA = (codes.STATUS_BY_NAME[n].value for n in (
    "KP_ERROR_NO_DRIVER", "KP_ERROR_DRIVER_TOO_OLD", "KP_ERROR_NO_DEVICE", "KP_ERROR_CUDA"))

_c = ctypes
_vp = _c.c_void_p
_u = _c.c_uint
_i = _c.c_int

# name: (argument types); every entry point returns CUresult (int)
_PROTOS: dict[str, tuple[Any, ...]] = {
    "cuInit": (_u,),
    "cuDriverGetVersion": (_c.POINTER(_i),),
    "cuGetErrorName": (_i, _c.POINTER(_c.c_char_p)),
    "cuGetErrorString": (_i, _c.POINTER(_c.c_char_p)),
    "cuDeviceGetCount": (_c.POINTER(_i),),
    "cuDeviceGet": (_c.POINTER(_i), _i),
    "cuDeviceGetAttribute": (_c.POINTER(_i), _i, _i),
    "cuDevicePrimaryCtxRetain": (_c.POINTER(_vp), _i),
    "cuCtxGetCurrent": (_c.POINTER(_vp),),
    "cuCtxSetCurrent": (_vp,),
    "cuCtxGetDevice": (_c.POINTER(_i),),
    "cuLibraryLoadData": (_c.POINTER(_vp), _c.c_char_p, _vp, _vp, _u, _vp, _vp, _u),
    "cuLibraryGetKernel": (_c.POINTER(_vp), _vp, _c.c_char_p),
    "cuKernelGetFunction": (_c.POINTER(_vp), _vp),
    "cuKernelSetAttribute": (_i, _i, _vp, _i),
    "cuLaunchKernel": (_vp, _u, _u, _u, _u, _u, _u, _u, _vp, _vp, _vp),
    "cuLaunchKernelEx": (_vp, _vp, _vp, _vp),
    "cuPointerGetAttribute": (_vp, _i, _c.c_uint64),
}
# resolved when the driver has them; only launches that need them fail without them
_OPTIONAL: dict[str, tuple[Any, ...]] = {
    "cuMemAllocAsync": (_c.POINTER(_c.c_uint64), _c.c_size_t, _vp),
    "cuMemFreeAsync": (_c.c_uint64, _vp),
    "cuMemcpyHtoDAsync": (_c.c_uint64, _vp, _c.c_size_t, _vp),
    "cuTensorMapEncodeTiled": (_vp, _i, _u, _vp, _c.POINTER(_c.c_uint64), _c.POINTER(_c.c_uint64),
                               _c.POINTER(_u), _c.POINTER(_u), _i, _i, _i, _i),
    "cuOccupancyMaxActiveClusters": (_c.POINTER(_i), _vp, _vp),
    "cuOccupancyMaxActiveBlocksPerMultiprocessor": (_c.POINTER(_i), _vp, _i, _c.c_size_t),
    "cuKernelGetParamInfo": (_vp, _c.c_size_t, _c.POINTER(_c.c_size_t), _c.POINTER(_c.c_size_t)),
}
_SINCE = {"cuKernelGetParamInfo": 12040}  # entry points newer than API_VERSION, requested at the version they came in

# entry points the C extension calls per launch (their addresses are handed to it)
FAST_ENTRY_POINTS = ("cuCtxGetCurrent", "cuCtxSetCurrent", "cuLaunchKernel", "cuLaunchKernelEx", "cuGetErrorName")


class LaunchAttribute(ctypes.Structure):
    _fields_ = [("id", _u), ("pad", _c.c_char * 4), ("value", _u * 16)]


class LaunchConfig(ctypes.Structure):
    _fields_ = [("grid", _u * 3), ("block", _u * 3), ("smem", _u), ("stream", _vp),
                ("attrs", _c.POINTER(LaunchAttribute)), ("nattrs", _u)]


assert ctypes.sizeof(LaunchAttribute) == 72 and ctypes.sizeof(LaunchConfig) == 56  # CUDA 12/13 layouts


@record(frozen=True)
class DeviceInfo:
    """What the runtime needs to know about one device, read once."""

    ordinal: int
    major: int
    minor: int
    max_threads: int
    max_block: tuple[int, int, int]
    max_grid: tuple[int, int, int]
    smem_optin: int
    cluster_launch: bool
    sm_count: int
    context: int  # primary context handle, retained for the life of the process
    cooperative_launch: bool = True  # CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH

    @property
    def arch_name(self) -> str:
        return f"sm_{self.major}{self.minor}"


class Driver:
    """One opened driver library with its entry points."""

    def __init__(self, path: str = DEFAULT_LIBRARY) -> None:
        self.path = path
        try:
            self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        except OSError as e:
            raise DriverError(f"cannot load the CUDA driver {path}: {e} (is an NVIDIA driver installed?)",
                              status=_NO_DRIVER) from None
        try:
            gpa = self.lib.cuGetProcAddress_v2
        except AttributeError:
            raise DriverError(f"the CUDA driver {path} has no cuGetProcAddress_v2: it predates CUDA 12.0, "
                              f"which kernelpack needs (cuLibraryLoadData)", status=_TOO_OLD) from None
        gpa.restype = _i
        gpa.argtypes = (_c.c_char_p, _c.POINTER(_vp), _i, _c.c_uint64, _c.POINTER(_i))
        self.addresses: dict[str, int] = {}
        self.fn: dict[str, Callable[..., int]] = {}
        for name, argtypes in (*_PROTOS.items(), *_OPTIONAL.items()):
            ptr, found = _vp(), _i(-1)
            r = gpa(name.encode(), ctypes.byref(ptr), _SINCE.get(name, API_VERSION), 0, ctypes.byref(found))
            if (r != 0 or found.value != 0 or not ptr.value) and name in _OPTIONAL:
                continue
            if r != 0 or found.value != 0 or not ptr.value:
                raise DriverError(f"the CUDA driver {path} has no {name} for CUDA 12.0 (cuGetProcAddress result {r}, "
                                  f"status {found.value}): update the NVIDIA driver", code=r, status=_TOO_OLD)
            self.addresses[name] = ptr.value
            self.fn[name] = ctypes.CFUNCTYPE(_i, *argtypes)(ptr.value)
        # kernelpack's dry-run driver names each launch's specialization in its records (kpDryrunNote; a real driver
        # has no such entry point)
        ptr, found = _vp(), _i(-1)
        r = gpa(b"kpDryrunNote", ctypes.byref(ptr), API_VERSION, 0, ctypes.byref(found))
        note = ptr.value if r == 0 and found.value == 0 else None
        self.dryrun = note is not None
        self._note: Callable[[bytes], None] | None = None
        if note is not None:
            self.addresses["kpDryrunNote"] = note
            self._note = ctypes.CFUNCTYPE(None, _c.c_char_p)(note)
        self._lock = threading.Lock()
        self._devices: dict[int, DeviceInfo] = {}
        self.check(self.fn["cuInit"](0), "cuInit")
        v = _i(0)
        self.check(self.fn["cuDriverGetVersion"](ctypes.byref(v)), "cuDriverGetVersion")
        self.version = v.value

    def note(self, label: str) -> None:
        """Tell a dry-run driver the specialization the next launch on this thread runs (other drivers: nothing)."""
        if self._note is not None:
            self._note(label.encode())

    # ------------------------------------------------------------ errors

    def error_name(self, code: int) -> str:
        s = _c.c_char_p()
        if self.fn["cuGetErrorName"](code, ctypes.byref(s)) != 0 or not s.value:
            return f"CUDA_ERROR_{code}"
        return s.value.decode()

    def error_text(self, code: int) -> str:
        s = _c.c_char_p()
        if self.fn["cuGetErrorString"](code, ctypes.byref(s)) != 0 or not s.value:
            return ""
        return s.value.decode()

    def check(self, code: int, call: str, where: str = "") -> None:
        if code != 0:
            raise self.error(code, call, where)

    def error(self, code: int, call: str, where: str = "") -> DriverError:
        name, text = self.error_name(code), self.error_text(code)
        prefix = f"{where}: " if where else ""
        return DriverError(f"{prefix}{call} failed with {name} ({code}){': ' + text if text else ''}",
                           code=code, name=name, status=_NO_DEVICE if code == _CUDA_NO_DEVICE else _CUDA)

    # ------------------------------------------------------------ devices and contexts

    def device_count(self) -> int:
        n = _i(0)
        self.check(self.fn["cuDeviceGetCount"](ctypes.byref(n)), "cuDeviceGetCount")
        return n.value

    def device(self, ordinal: int) -> DeviceInfo:
        """Facts about device ``ordinal`` and its primary context (retained once, kept for the process)."""
        info = self._devices.get(ordinal)
        if info is not None:
            return info
        with self._lock:
            info = self._devices.get(ordinal)
            if info is None:
                info = self._read_device(ordinal)
                self._devices[ordinal] = info
        return info

    def _read_device(self, ordinal: int) -> DeviceInfo:
        count = self.device_count()
        if not 0 <= ordinal < count:
            raise DriverError(f"CUDA device {ordinal} does not exist ({count} device(s) visible)")
        dev = _i(0)
        self.check(self.fn["cuDeviceGet"](ctypes.byref(dev), ordinal), "cuDeviceGet")

        def attr(a: int) -> int:
            v = _i(0)
            self.check(self.fn["cuDeviceGetAttribute"](ctypes.byref(v), a, dev.value), f"cuDeviceGetAttribute({a})")
            return v.value

        ctx = _vp()
        self.check(self.fn["cuDevicePrimaryCtxRetain"](ctypes.byref(ctx), dev.value), "cuDevicePrimaryCtxRetain")
        return DeviceInfo(
            ordinal=ordinal,
            major=attr(ATTR_CC_MAJOR),
            minor=attr(ATTR_CC_MINOR),
            max_threads=attr(ATTR_MAX_THREADS_PER_BLOCK),
            max_block=tuple(attr(a) for a in ATTR_MAX_BLOCK_DIM),  # type: ignore[arg-type]
            max_grid=tuple(attr(a) for a in ATTR_MAX_GRID_DIM),  # type: ignore[arg-type]
            smem_optin=attr(ATTR_MAX_SMEM_OPTIN),
            cluster_launch=bool(attr(ATTR_CLUSTER_LAUNCH)),
            sm_count=attr(ATTR_MULTIPROCESSOR_COUNT),
            context=int(ctx.value or 0),
            cooperative_launch=bool(attr(ATTR_COOPERATIVE_LAUNCH)),
        )

    def current_context(self) -> int:
        ctx = _vp()
        self.check(self.fn["cuCtxGetCurrent"](ctypes.byref(ctx)), "cuCtxGetCurrent")
        return int(ctx.value or 0)

    def set_current(self, ctx: int) -> None:
        self.check(self.fn["cuCtxSetCurrent"](_vp(ctx or None)), "cuCtxSetCurrent")

    def current_device(self) -> int | None:
        """Ordinal of the current context's device, or None when no context is current on this thread."""
        if not self.current_context():
            return None
        d = _i(0)
        self.check(self.fn["cuCtxGetDevice"](ctypes.byref(d)), "cuCtxGetDevice")
        return d.value

    def pointer_device(self, ptr: int) -> int | None:
        """Device ordinal of a device pointer (None when the driver does not know it)."""
        d = _i(-1)
        r = self.fn["cuPointerGetAttribute"](ctypes.byref(d), POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
        return d.value if r == 0 else None

    # ------------------------------------------------------------ code

    def load_library(self, image: bytes, where: str) -> int:
        lib = _vp()
        self.check(self.fn["cuLibraryLoadData"](ctypes.byref(lib), image, None, None, 0, None, None, 0),
                   "cuLibraryLoadData", where)
        return int(lib.value or 0)

    def get_kernel(self, lib: int, entry: str, where: str) -> int:
        k = _vp()
        self.check(self.fn["cuLibraryGetKernel"](ctypes.byref(k), _vp(lib), entry.encode()),
                   f"cuLibraryGetKernel({entry})", where)
        return int(k.value or 0)

    def load_in_current_context(self, kernel: int, where: str) -> None:
        """Load the kernel's module into the current context now (not lazily at a later launch or capture)."""
        f = _vp()
        self.check(self.fn["cuKernelGetFunction"](ctypes.byref(f), _vp(kernel)), "cuKernelGetFunction", where)

    def set_max_dynamic_smem(self, kernel: int, device: int, nbytes: int, where: str) -> None:
        self.check(self.fn["cuKernelSetAttribute"](FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes, _vp(kernel),
                                                   device),
                   f"cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes})", where)

    # ------------------------------------------------------------ launch-derived values

    def _optional(self, name: str, why: str, where: str) -> Callable[..., int]:
        fn = self.fn.get(name)
        if fn is None:
            raise DriverError(f"{where}: {why} needs {name}, which the CUDA driver {self.path} does not provide; "
                              f"update the NVIDIA driver", status=_TOO_OLD)
        return fn

    def mem_alloc_async(self, nbytes: int, stream: int, where: str, what: str = "scratch") -> int:
        """Stream-ordered device memory (the current context's device)."""
        fn = self._optional("cuMemAllocAsync", f"{what} memory", where)
        p = _c.c_uint64(0)
        self.check(fn(ctypes.byref(p), nbytes, _vp(stream or None)), f"cuMemAllocAsync({nbytes} bytes of {what})",
                   where)
        return p.value

    def mem_free_async(self, ptr: int, stream: int, where: str, what: str = "scratch") -> None:
        fn = self._optional("cuMemFreeAsync", f"{what} memory", where)
        self.check(fn(ptr, _vp(stream or None)), f"cuMemFreeAsync({what})", where)

    def memcpy_htod_async(self, dst: int, data: bytes, stream: int, where: str) -> None:
        """Copy ``data`` to device address ``dst`` in stream order; from pageable host memory, which the driver has
        read when the call returns (so ``data`` may go then)."""
        fn = self._optional("cuMemcpyHtoDAsync", "a tensor list's descriptors", where)
        buf = ctypes.create_string_buffer(data, len(data))
        self.check(fn(dst, buf, len(data), _vp(stream or None)), f"cuMemcpyHtoDAsync({len(data)} bytes)", where)

    def encode_tensor_map(self, enc: Any, where: str) -> bytes:
        """The 128-byte CUtensorMap for ``enc`` (a :class:`kernelpack.core.tma.EncodeTiled`), clear_bit21 applied."""
        fn = self._optional("cuTensorMapEncodeTiled", "a TMA tensor descriptor", where)
        raw = (_c.c_uint64 * 24)()  # the driver wants the map 64-byte aligned; ctypes aligns to 16
        addr = (ctypes.addressof(raw) + 63) // 64 * 64
        out = (_c.c_uint64 * 16).from_address(addr)
        u64, u32, n = _c.c_uint64, _u, enc.rank
        r = fn(addr, enc.data_type, n, _vp(enc.global_address or None),
               (u64 * n)(*enc.global_dim), (u64 * max(1, n - 1))(*enc.global_strides), (u32 * n)(*enc.box_dim),
               (u32 * n)(*enc.element_strides), enc.interleave, enc.swizzle, enc.l2_promotion, enc.oob_fill)
        self.check(r, "cuTensorMapEncodeTiled", where)
        if enc.clear_bit21:
            out[1] &= ~(1 << 21)
        data = bytes(out)
        del raw
        return data

    def max_active_clusters(self, kernel: int, context: int, size: int, block: tuple[int, int, int], smem: int,
                            where: str) -> int:
        """cuOccupancyMaxActiveClusters for ``kernel`` in ``context``: clusters of ``size`` x 1 x 1 blocks of ``block``
        threads with ``smem`` bytes of dynamic shared memory, a grid of one cluster (kernelpack.launch.device)."""
        fn = self._optional("cuOccupancyMaxActiveClusters", "a max_active_clusters parameter", where)
        attr = LaunchAttribute()
        attr.id = LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value[0], attr.value[1], attr.value[2] = size, 1, 1
        cfg = LaunchConfig((_u * 3)(size, 1, 1), (_u * 3)(*block), smem, None, ctypes.pointer(attr), 1)
        n = _i(0)
        saved = self.current_context()
        self.set_current(context)
        try:
            self.check(fn(ctypes.byref(n), _vp(kernel), ctypes.byref(cfg)),
                       f"cuOccupancyMaxActiveClusters(cluster of {size})", where)
        finally:
            if saved != context:
                self.set_current(saved)
        return n.value

    # ------------------------------------------------------------ launch

    def max_blocks_per_sm(self, kernel: int, context: int, threads: int, smem: int, where: str) -> int:
        """cuOccupancyMaxActiveBlocksPerMultiprocessor for ``kernel`` in ``context``: blocks of ``threads`` threads
        with ``smem`` bytes of dynamic shared memory one SM holds at once (the bound of a cooperative grid)."""
        fn = self._optional("cuOccupancyMaxActiveBlocksPerMultiprocessor", "a cooperative launch", where)
        n = _i(0)
        saved = self.current_context()
        self.set_current(context)
        try:
            self.check(fn(ctypes.byref(n), _vp(kernel), threads, smem), "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                       where)
        finally:
            if saved != context:
                self.set_current(saved)
        return n.value

    # ------------------------------------------------------------ launch

    def launch(self, kernel: int, grid: tuple[int, int, int], block: tuple[int, int, int], smem: int, stream: int,
               params: Any, cluster: tuple[int, int, int] | None, where: str, pdl: bool = False,
               cooperative: bool = False) -> None:
        """Launch with ``params`` a ctypes ``void*[]`` of pointers to each parameter value; a cluster, PDL or a
        cooperative launch go through cuLaunchKernelEx with those launch attributes, in that order."""
        if cluster is None and not pdl and not cooperative:
            r = self.fn["cuLaunchKernel"](_vp(kernel), *grid, *block, smem, _vp(stream or None), params, None)
            self.check(r, "cuLaunchKernel", where)
            return
        attrs = (LaunchAttribute * 3)()
        n = 0
        if cluster is not None:
            attrs[n].id = LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attrs[n].value[0], attrs[n].value[1], attrs[n].value[2] = cluster
            n += 1
        for on, ident in ((pdl, LAUNCH_ATTRIBUTE_PDL), (cooperative, LAUNCH_ATTRIBUTE_COOPERATIVE)):
            if on:
                attrs[n].id = ident
                attrs[n].value[0] = 1
                n += 1
        cfg = LaunchConfig((_u * 3)(*grid), (_u * 3)(*block), smem, stream or None, attrs, n)
        r = self.fn["cuLaunchKernelEx"](ctypes.byref(cfg), _vp(kernel), params, None)
        self.check(r, "cuLaunchKernelEx", where)


_driver: Driver | None = None
_driver_path: str | None = None  # None: KERNELPACK_DRIVER, else libcuda.so.1 (configured_path)
_driver_lock = threading.Lock()
_generation = 0  # bumped when the driver is replaced; loaded kernels of an older generation are stale


def get() -> Driver:
    """The process's driver, opened on first use."""
    global _driver
    d = _driver
    if d is not None:
        return d
    with _driver_lock:
        if _driver is None:
            path = _driver_path or configured_path()
            d = Driver(path)
            if d.dryrun:  # kernelpack's dry-run driver: nothing runs, host memory stands for device memory
                from . import dryrun

                if dryrun.is_shipped(path):
                    dryrun.host_memory_as_device()
            _driver = d
        return _driver


def configured_path() -> str:
    """The driver library the environment names (``KERNELPACK_DRIVER``: a path, or ``dryrun`` for kernelpack's
    dry-run driver), else ``libcuda.so.1``."""
    from ..core.config import knobs

    named = knobs().driver
    if named is None:
        return DEFAULT_LIBRARY
    if named == "dryrun":
        from .dryrun import library_path

        return str(library_path())
    return named


def use_library(path: str | None = None) -> None:
    """Open the driver from ``path`` from now on (tests use a fake driver; None: the configured one,
    :func:`configured_path`). Kernels loaded before stay bound to the driver they were loaded with; load them
    again."""
    global _driver, _driver_path, _generation
    with _driver_lock:
        _driver, _driver_path = None, path
        _generation += 1
    ext = sys.modules.get(f"{__package__}._launch")  # this runtime's own (a wheel carries a copy)
    if ext is not None:  # the C launch path drops the old driver's entry points now (it asks again on its next launch)
        ext.forget_driver()


def generation() -> int:
    return _generation
