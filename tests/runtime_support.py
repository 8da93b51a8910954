"""Shared pieces of the runtime tests: test kernels compiled once per session (no GPU), array stand-ins, and
switches between the C and the Python path. The fake driver they launch on is fake_cuda.py's (the ``fake``
fixture)."""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import operator
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.abi import Abi, DType, Param, Pointer, Scalar, Struct, TensorSpec
from kernelpack.core.binary import Binary
from kernelpack.core.launchspec import LaunchSpec
from toolchain_support import PTXAS, require_nvcc

HERE = Path(__file__).parent / "fake_runtime"
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


def reqntid_cubin(out: Path, arch: str) -> bytes:
    """``add`` with a required block of 128 threads (.reqntid, which CUDA C++ cannot spell), via PTX."""
    ptx = out / f"add_{arch}.ptx"
    subprocess.run([require_nvcc(), "-ptx", f"-arch=compute_{arch.removeprefix('sm_')}", str(HERE / "kernels.cu"), "-o",
                    str(ptx)], check=True)
    text = ptx.read_text()
    head = ".visible .entry add("
    start = text.index(head)
    end = text.index(")", start)
    ptx.write_text(text[:end + 1] + "\n.reqntid 128, 1, 1" + text[end + 1:])
    cubin = out / f"add_{arch}.cubin"
    subprocess.run([str(PTXAS), f"-arch={arch}", str(ptx), "-o", str(cubin)], check=True)
    return cubin.read_bytes()


def build_test_bundle(out: Path, compiler: str | None = None) -> Bundle:
    """Every runtime test kernel, for sm_80 and sm_90a, with hand-made families on top of the compiled ones."""
    from kernelpack.core.cache import CompileCache
    from kernelpack.frontends.cuda import compile as cuda

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
    # a C-level callable like torch's own getter (torch._C._cuda_getCurrentRawStream): stream + device
    streams.set_current_torch_stream(functools.partial(operator.add, stream))
    bridge = None
    try:
        from kernelpack.runtime import _torch_bridge as bridge

        bridge.set_cpu_as_cuda(True)
        bridge.set_test_stream(stream)  # the C path reads it in the bridge, as it reads c10's on a GPU
    except ImportError:
        pass
    try:
        yield
    finally:
        adapters.testing.cpu_as_cuda = False
        streams.set_current_torch_stream(saved_getter)
        if bridge is not None:
            bridge.set_cpu_as_cuda(False)
            bridge.set_test_stream(None)
