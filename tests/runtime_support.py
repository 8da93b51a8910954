"""Shared pieces of the runtime tests: test kernels compiled once per session (no GPU), the in-process fake
driver (tests/fake_runtime/fakecuda_rt.c), array stand-ins, and switches between the C and the Python path."""

from __future__ import annotations

import ctypes
import dataclasses
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kernelpack.abi import Abi, DType, Param, Pointer, Scalar, Struct, TensorSpec
from kernelpack.artifact import Binary, KernelArtifact, LaunchSpec
from kernelpack.bundle import Bundle

HERE = Path(__file__).parent / "fake_runtime"
NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
PTXAS = str(Path(NVCC).parent / "ptxas")
KERNELS = ["add", "add16", "scale<float>", "scale<__half>", "scalars", "affine", "row_sums", "with_scratch",
           "big_smem", "spin"]
ROWS = Struct.tensor_descriptor("Rows", TensorSpec(DType.f32, (None, 64), (None, 1), DType.i32, DType.i64))


def _byte(c: int) -> bytes:
    return bytes([120, c])[1:]  # built at run time: the shared one-byte object (never constant-folded)


def assert_singletons_intact() -> None:
    bad = [c for c in range(256) if _byte(c)[0] != c]
    assert not bad, f"one-byte bytes singletons overwritten: {[(c, _byte(c)) for c in bad[:8]]}"
    bad = [c for c in range(128) if ord("".join(["x", chr(c)])[1:]) != c]
    assert not bad, f"one-character str singletons overwritten: {bad[:8]}"
    a, b = "x", "y"
    assert f"{a} {b}" == "x y"
    consts = compile('f"{a} {b}"', "<singletons>", "eval").co_consts
    assert " " in consts, f"the parser drops one-character f-string parts (constants {consts})"


class FakeAlloc(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_uint64), ("size", ctypes.c_uint64), ("stream", ctypes.c_uint64),
                ("device", ctypes.c_int), ("freed", ctypes.c_int), ("free_stream", ctypes.c_uint64)]


class FakeEncode(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_uint), ("addr", ctypes.c_uint64),
                ("dims", ctypes.c_uint64 * 5), ("strides", ctypes.c_uint64 * 5), ("box", ctypes.c_uint32 * 5),
                ("estrides", ctypes.c_uint32 * 5), ("interleave", ctypes.c_int), ("swizzle", ctypes.c_int),
                ("l2", ctypes.c_int), ("oob", ctypes.c_int)]


class FakeDriver:
    """Control of the fake driver library."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.lib.fk_get_launch.restype = ctypes.c_void_p
        self.lib.fk_get_alloc.restype = ctypes.POINTER(FakeAlloc)
        self.lib.fk_get_encode.restype = ctypes.POINTER(FakeEncode)

    def allocs(self) -> list[dict[str, int]]:
        """Every cuMemAllocAsync since the reset: ptr, size, stream, device, freed, free_stream."""
        out = []
        for i in range(self.lib.fk_alloc_count()):
            a = self.lib.fk_get_alloc(i).contents
            out.append({f: getattr(a, f) for f, _ in FakeAlloc._fields_})
        return out

    def encodes(self) -> list[dict[str, Any]]:
        """The arguments of every cuTensorMapEncodeTiled since the reset (innermost dimension first)."""
        out = []
        for i in range(self.lib.fk_encode_count()):
            e = self.lib.fk_get_encode(i).contents
            r = e.rank
            out.append({"data_type": e.dtype, "rank": r, "global_address": e.addr, "global_dim": tuple(e.dims[:r]),
                        "global_strides": tuple(e.strides[:r - 1]), "box_dim": tuple(e.box[:r]),
                        "element_strides": tuple(e.estrides[:r]), "interleave": e.interleave, "swizzle": e.swizzle,
                        "l2_promotion": e.l2, "oob_fill": e.oob})
        return out

    def reset(self, *ccs: tuple[int, int]) -> None:
        ccs = ccs or ((9, 0),)
        flat = (ctypes.c_int * (2 * len(ccs)))(*[v for c in ccs for v in c])
        self.lib.fk_reset(len(ccs), flat)

    def register(self, bundle: Bundle, arch: str) -> None:
        """Tell the fake each kernel's parameter offsets and sizes, read from its cubin (as the driver does)."""
        seen = set()
        for art in bundle:
            try:
                ck = art.cubin_kernel(arch)
            except Exception:  # noqa: BLE001 - no binary for that arch
                continue
            if art.entry in seen:
                continue
            seen.add(art.entry)
            n = len(ck.params)
            offs = (ctypes.c_uint32 * max(n, 1))(*[p.offset for p in ck.params])
            sizes = (ctypes.c_uint32 * max(n, 1))(*[p.size for p in ck.params])
            req = (ctypes.c_uint32 * 3)(*ck.reqntid) if ck.reqntid else None
            self.lib.fk_register_kernel(art.entry.encode(), n, offs, sizes, req)

    def fail(self, name: str, code: int) -> None:
        self.lib.fk_fail(name.encode(), code)

    def count(self) -> int:
        return self.lib.fk_launch_count()

    def calls(self, what: str) -> int:
        return self.lib.fk_calls(what.encode())

    def launches(self) -> list[dict[str, Any]]:
        return [self._launch(i) for i in range(self.count())]

    def last(self) -> dict[str, Any]:
        assert self.count() > 0, "nothing was launched"
        return self._launch(self.count() - 1)

    def _launch(self, i: int) -> dict[str, Any]:
        addr = self.lib.fk_get_launch(i)
        raw = ctypes.string_at(addr, 128 + 4 * 10 + 8 + 4 * 3 + 4096 + 16)
        name = raw[:128].split(b"\0")[0].decode()
        u32 = ctypes.cast(addr + 128, ctypes.POINTER(ctypes.c_uint32))
        grid, block, smem, cluster = tuple(u32[0:3]), tuple(u32[3:6]), u32[6], tuple(u32[7:10])
        stream = ctypes.c_uint64.from_address(addr + 168).value
        device, ex, nbytes = (ctypes.c_int32.from_address(addr + 176).value,
                              ctypes.c_int32.from_address(addr + 180).value,
                              ctypes.c_uint32.from_address(addr + 184).value)
        params = ctypes.string_at(addr + 188, nbytes)
        return {"kernel": name, "grid": grid, "block": block, "smem": smem, "cluster": cluster, "stream": stream,
                "device": device, "ex": bool(ex), "params": params}

    def current_device(self) -> int:
        """Device of this thread's current context (-1: none)."""
        return self.lib.fk_current_device()

    def set_current(self, device: int) -> None:
        self.lib.fk_set_current_device(device)


def build_fake(out: Path) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler for the fake driver")
    path = out / "libkpfakecuda.so"
    subprocess.run([cc, "-O1", "-shared", "-fPIC", "-Wall", "-Wl,-soname,libkpfakecuda.so",
                    str(HERE / "fakecuda_rt.c"), "-o", str(path), "-lpthread"], check=True)
    return path


@contextmanager
def fake_driver_session(out: Path) -> Iterator[FakeDriver]:
    """The fake driver built under ``out`` and installed as the runtime's driver for the block's duration."""
    from kernelpack.runtime import driver

    fake = FakeDriver(build_fake(out))
    driver.use_library(str(fake.path))
    try:
        yield fake
    finally:
        driver.use_library()


@contextmanager
def fake_for(fake: FakeDriver, bundle: Bundle) -> Iterator[FakeDriver]:
    """A reset fake (one sm_90 device, ``bundle``'s kernels registered) behind a fresh runtime Driver."""
    from kernelpack.runtime import driver

    fake.reset((9, 0))
    fake.register(bundle, "sm_90a")
    driver.use_library(str(fake.path))  # a fresh Driver: no devices cached from earlier tests
    try:
        yield fake
    finally:
        fake.set_current(-1)


def reqntid_cubin(out: Path, arch: str) -> bytes:
    """``add`` with a required block of 128 threads (.reqntid, which CUDA C++ cannot spell), via PTX."""
    ptx = out / f"add_{arch}.ptx"
    subprocess.run([NVCC, "-ptx", f"-arch=compute_{arch.removeprefix('sm_')}", str(HERE / "kernels.cu"), "-o",
                    str(ptx)], check=True)
    text = ptx.read_text()
    head = ".visible .entry add("
    start = text.index(head)
    end = text.index(")", start)
    ptx.write_text(text[:end + 1] + "\n.reqntid 128, 1, 1" + text[end + 1:])
    cubin = out / f"add_{arch}.cubin"
    subprocess.run([PTXAS, f"-arch={arch}", str(ptx), "-o", str(cubin)], check=True)
    return cubin.read_bytes()


def build_test_bundle(out: Path, compiler: str | None = None) -> Bundle:
    """Every runtime test kernel, for sm_80 and sm_90a, with hand-made families on top of the compiled ones."""
    from kernelpack import cuda
    from kernelpack.cache import CompileCache

    cache = CompileCache(out / "cache")
    base = cuda.compile(HERE / "kernels.cu", KERNELS, arch=["sm_80", "sm_90a"], compiler=compiler, cache=cache,
                        options=["-O3"])
    arts = {a.label: a for a in base}
    add = arts["add"]
    extra = [
        # dispatch on alignment/divisibility: the same binary, a stricter ABI
        dataclasses.replace(add, name="vadd", variant="any"),
        dataclasses.replace(arts["add16"], name="vadd", variant="aligned", abi=Abi(tuple(
            dataclasses.replace(p, divisibility=16 if isinstance(p.type, Pointer) else 4) for p in add.abi.params))),
        dataclasses.replace(arts["row_sums"], abi=Abi((Param("t", ROWS), Param("out", Pointer(DType.f32))))),
        dataclasses.replace(arts["with_scratch"], abi=Abi((
            Param("x", Pointer(DType.f32)), Param("n", Scalar(DType.i32)),
            Param("global_scratch", Pointer(), role="global_scratch"),
            Param("profile_scratch", Pointer(), role="profile_scratch")))),
        dataclasses.replace(arts["big_smem"], name="smem_kernel", launch=LaunchSpec(dynamic_smem=1024)),
        dataclasses.replace(add, name="fixed_block", launch=LaunchSpec(block=(64, 1, 1))),
        dataclasses.replace(add, name="spec_cluster", launch=LaunchSpec(cluster=(2, 1, 1))),
        KernelArtifact("reqntid", "add", add.abi, tuple(Binary(a, reqntid_cubin(out, a)) for a in ("sm_80", "sm_90a"))),
    ]
    keep = [a for a in base if a.name not in ("row_sums", "with_scratch", "add16")]
    cluster = cuda.compile(HERE / "cluster.cu", ["clustered"], arch=["sm_90a"], compiler=compiler, cache=cache)
    return Bundle.of(keep, extra, cluster)


class CudaArray:
    """A minimal ``__cuda_array_interface__`` producer (device memory is never touched on the fake driver)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], typestr: str = "<f4", strides: tuple[int, ...] | None = None,
                 device: int | None = 0) -> None:
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr,
                                         "strides": strides, "version": 3}
        if device is not None:
            self.__dlpack_device__ = lambda: (2, device)


class CaiArray:
    """A ``__cuda_array_interface__`` with any entries: a valid f32 vector of 8 on cuda:0 unless told otherwise
    (``CaiArray(data=(1.5, False))``, ``CaiArray(shape=(-5,))``, ``CaiArray(typestr=">f4")``)."""

    def __init__(self, **entries: Any) -> None:
        self.__cuda_array_interface__ = {"data": (0x1000, False), "shape": (8,), "typestr": "<f4", "strides": None,
                                         "version": 3, **entries}
        self.__dlpack_device__ = lambda: (2, 0)


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)


class DLPackArray:
    """A DLPack producer describing whatever it is told (f32 on cuda:0): ``ndim`` may claim more modes than
    ``shape`` has (the arrays hold 128 entries, so a reader that believes it stays in bounds)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...] | None = None,
                 ndim: int | None = None) -> None:
        self._shape = (ctypes.c_int64 * 128)(*shape)
        self._strides = (ctypes.c_int64 * 128)(*strides) if strides is not None else None
        self._t = _DLTensor(ptr, 2, 0, len(shape) if ndim is None else ndim, 2, 32, 1,
                            ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64)),
                            ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64)) if self._strides else None, 0)

    def __dlpack__(self, stream: Any = None) -> Any:
        return _capsule_new(ctypes.addressof(self._t), b"dltensor", None)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)


@contextmanager
def python_path() -> Any:
    """Kernels loaded inside use the pure-Python launcher (as if the extension were missing)."""
    from kernelpack.runtime import fast

    saved = dict(fast._state)
    fast._state.update(ext=None, tried=True)
    try:
        yield
    finally:
        fast._state.clear()
        fast._state.update(saved)


@contextmanager
def cpu_tensors_as_cuda(stream: int = 0x5000) -> Any:
    """torch CPU tensors read as tensors on cuda:0 (both paths); torch's 'current stream' is ``stream``."""
    from kernelpack.runtime import adapters, streams

    saved_getter = streams.current_torch_stream
    adapters.testing.cpu_as_cuda = True
    streams.current_torch_stream = lambda device: stream + device
    bridge = None
    try:
        from kernelpack.runtime import _torch_bridge as bridge

        bridge.set_cpu_as_cuda(True)
    except ImportError:
        pass
    try:
        yield
    finally:
        adapters.testing.cpu_as_cuda = False
        streams.current_torch_stream = saved_getter
        if bridge is not None:
            bridge.set_cpu_as_cuda(False)
