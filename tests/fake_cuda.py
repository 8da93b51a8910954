"""The one fake CUDA driver of the GPU-less tests (tests/fakecuda/fakecuda.c), for both back ends.

``FakeCuda`` is the fake built once per session (``session_fake``): a C program finds it as ``libcuda.so.1``
through ``FakeCuda.env(...)`` / ``run(...)`` and reports through its call log; the Python runtime loads it in-process
(``FakeCuda.in_process()`` -> ``InProcessFake``), controlled and inspected through the fake's ``fk_*`` functions.
Both take the same configuration (``settings``: ``cc``, ``sms``, ``version``, ``current``, ``fail``, ``missing``,
``load_us``, ``log``) and give launches as the same records (``Launch``: a dict with ``kernel``, ``grid``,
``block``, ``smem``, ``stream``, ``device``, ``ex``, ``cluster``, ``attrs``, ``result``, ``params``), so one
scenario can be driven through the C library and the Python runtime and compared.
"""

from __future__ import annotations

import ctypes
import os
import struct
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from toolchain_support import CC

if TYPE_CHECKING:
    from kernelpack.core.cubin import CubinKernel

SOURCE = Path(__file__).parent / "fakecuda" / "fakecuda.c"
C_NAME = "libcuda.so.1"  # what a C program opens (dlopen("libcuda.so.1")), found through LD_LIBRARY_PATH
IN_PROCESS_NAME = "libkpfakecuda.so"  # its own soname: never shadows a real libcuda.so.1 opened later
LAUNCH_CALLS = ("cuLaunchKernel", "cuLaunchKernelEx")
KEYS = ("cc", "sms", "version", "current", "fail", "missing", "load_us", "log", "param_base")
Launch = dict[str, Any]


def settings(**config: Any) -> dict[str, str]:
    """The fake's configuration keys from keyword arguments: ``cc="8.0,9.0"`` or ``cc=[(8, 0), (9, 0)]`` (``"none"``
    for no device), ``sms="132,108"`` or ``sms=[132, 108]`` (SMs per device), ``version=11080``, ``current=1``,
    ``fail="cuInit:999"`` or ``fail=("cuInit", 999)``, ``missing="cuMemAllocAsync"``, ``load_us=500``, ``log=path``,
    ``param_base=48`` (added to the offsets cuKernelGetParamInfo reports, as the real driver does for some kernels)."""
    out = {}
    for key, value in config.items():
        if key not in KEYS:
            raise TypeError(f"unknown fake driver setting {key!r}; known: {', '.join(KEYS)}")
        if key == "cc" and not isinstance(value, str):
            value = ",".join(f"{major}.{minor}" for major, minor in value)
        elif key == "sms" and not isinstance(value, (str, int)):
            value = ",".join(str(v) for v in value)
        elif key == "fail" and not isinstance(value, str):
            value = f"{value[0]}:{value[1]}"
        out[key.upper()] = str(value)
    return out


def environment(**config: Any) -> dict[str, str]:
    """``settings`` as the environment variables a program on the fake reads (``FAKECUDA_CC=...``)."""
    return {f"FAKECUDA_{k}": v for k, v in settings(**config).items()}


@dataclass(frozen=True)
class FakeCuda:
    """The fake built in ``dir``: ``libcuda.so.1`` for programs, ``libkpfakecuda.so`` for this process."""

    dir: Path

    @property
    def c_library(self) -> Path:
        return self.dir / C_NAME

    @property
    def library(self) -> Path:
        return self.dir / IN_PROCESS_NAME

    def env(self, **config: Any) -> dict[str, str]:
        """The environment a subprocess needs to run on the fake configured so (on top of ``os.environ``)."""
        return {"LD_LIBRARY_PATH": str(self.dir), **environment(**config)}

    def in_process(self) -> InProcessFake:
        return InProcessFake(self.library)


def build(out: Path) -> FakeCuda:
    """Compile the fake into ``out`` (both names, one source)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in (C_NAME, IN_PROCESS_NAME):
        cmd = [CC, "-std=c99", "-O1", "-g", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror", f"-Wl,-soname,{name}",
               "-o", str(out / name), str(SOURCE), "-lpthread"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise AssertionError(f"building the fake driver failed: {' '.join(cmd)}\n{proc.stderr}")
    return FakeCuda(out)


_SESSION: list[FakeCuda] = []


def session_fake(tmp_path_factory: pytest.TempPathFactory) -> FakeCuda:
    """The fake, built once per session."""
    if not _SESSION:
        _SESSION.append(build(tmp_path_factory.mktemp("fakecuda")))
    return _SESSION[0]


def fnv1a(data: bytes) -> str:
    """The hash the fake logs for each loaded image (``cuLibraryLoadData ... fnv=``)."""
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


# ------------------------------------------------------------------ records: one format for the log and for memory


def parse_launch(line: str) -> Launch:
    """A launch log line as the record ``InProcessFake.attempts()`` gives for the same launch."""
    name, _, rest = line.partition(" ")
    body, _, result = rest.rpartition(" -> ")
    f = dict(part.split("=", 1) for part in body.split(" "))
    attrs = []  # "cluster:X,Y,Z" (id 4) or "idN:A,B,C" (the attribute's first three words)
    for a in filter(None, f["attrs"].split(";")):
        ident, _, values = a.partition(":")
        attrs.append((4 if ident == "cluster" else int(ident[2:]), _dim3(values)))
    return _record(kernel=f["kernel"], grid=_dim3(f["grid"]), block=_dim3(f["block"]), smem=int(f["smem"]),
                   stream=_pointer(f["stream"]), device=int(f["dev"]), ex=name == "cuLaunchKernelEx",
                   attrs=tuple(attrs), result=int(result), params=bytes.fromhex(f["params"]))


def param_bytes(kernel: CubinKernel, values: list[tuple[str, Any]]) -> bytes:
    """The parameter bytes the fake records for a launch of ``kernel`` with ``values`` (a ``struct`` format and a
    value per parameter, in order): each at its offset in the cubin's table, padding zero."""
    buf = bytearray(max((p.offset + p.size for p in kernel.params), default=0))
    for p, (fmt, v) in zip(kernel.params, values, strict=True):
        data = struct.pack("<" + fmt, v)
        assert len(data) == p.size, (p, fmt)
        buf[p.offset:p.offset + p.size] = data
    return bytes(buf)


def _record(**r: Any) -> Launch:
    cluster = next((v for i, v in r["attrs"] if i == 4), (0, 0, 0))
    return {**r, "cluster": cluster}


def _dim3(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def _pointer(text: str) -> int:
    return 0 if text == "(nil)" else int(text, 16)


@dataclass
class Run:
    """A program's exit status, output and the fake's call log."""

    returncode: int
    stdout: str
    stderr: str
    log: list[str]

    def calls(self, name: str) -> list[str]:
        return [line for line in self.log if line.split(" ", 1)[0] == name]

    def field(self, line: str, key: str) -> str:
        for part in line.split(" "):
            if part.startswith(key + "="):
                return part[len(key) + 1:]
        raise KeyError(key)

    def launch_lines(self, kernel: str | None = None) -> list[str]:
        """The launch log lines (of ``kernel``), without those refused for want of a current context (the one-device
        path of the C library binds a context on that refusal and launches again)."""
        out = [x for x in self.log if x.split(" ", 1)[0] in LAUNCH_CALLS and not x.endswith("-> 201")]
        return [x for x in out if f" kernel={kernel} " in x] if kernel else out

    def attempts(self) -> list[Launch]:
        """Every launch the driver was asked for (``result`` says how it went), as records."""
        return [parse_launch(x) for x in self.log if x.split(" ", 1)[0] in LAUNCH_CALLS and "(injected)" not in x]

    def launches(self) -> list[Launch]:
        """The launches the driver accepted."""
        return [x for x in self.attempts() if x["result"] == 0]


def run(exe: Path | list[str], tmp: Path, fake: FakeCuda | Path | None, *args: str, **env: str) -> Run:
    """Run a program on the fake (``fake``: the session's, or a directory holding a ``libcuda.so.1``; None: no
    driver at all), configured by ``FAKECUDA_*`` entries in ``env``; the log goes to a new file under ``tmp``."""
    log = tmp / f"fake-{os.getpid()}-{len(list(tmp.glob('fake-*.log')))}.log"
    full = {k: v for k, v in os.environ.items() if not k.startswith("FAKECUDA_")}
    (tmp / "empty").mkdir(exist_ok=True)
    where = fake.dir if isinstance(fake, FakeCuda) else fake or tmp / "empty"
    full.update({"LD_LIBRARY_PATH": str(where), "FAKECUDA_LOG": str(log)}, **env)
    cmd = [str(exe)] if isinstance(exe, Path) else exe
    proc = subprocess.run(cmd + list(args), capture_output=True, text=True, env=full, timeout=120)
    lines = log.read_text().splitlines() if log.exists() else []
    return Run(proc.returncode, proc.stdout, proc.stderr, lines)


# ------------------------------------------------------------------ in-process control


class _Attr(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("value", ctypes.c_uint32 * 3)]


class _Launch(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_char * 256), ("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3),
                ("smem", ctypes.c_uint32), ("stream", ctypes.c_uint64), ("device", ctypes.c_int32),
                ("ex", ctypes.c_int32), ("result", ctypes.c_int32), ("nattrs", ctypes.c_uint32),
                ("attrs", _Attr * 8), ("nbytes", ctypes.c_uint32), ("params", ctypes.c_ubyte * 4096)]


class _Alloc(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_uint64), ("size", ctypes.c_uint64), ("stream", ctypes.c_uint64),
                ("device", ctypes.c_int32), ("freed", ctypes.c_int32), ("free_stream", ctypes.c_uint64)]


class _Copy(ctypes.Structure):
    _fields_ = [("dst", ctypes.c_uint64), ("size", ctypes.c_uint64), ("stream", ctypes.c_uint64),
                ("result", ctypes.c_int32), ("nbytes", ctypes.c_uint32), ("data", ctypes.c_ubyte * 4096)]


class _Encode(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int32), ("rank", ctypes.c_uint32), ("addr", ctypes.c_uint64),
                ("dims", ctypes.c_uint64 * 5), ("strides", ctypes.c_uint64 * 5), ("box", ctypes.c_uint32 * 5),
                ("estrides", ctypes.c_uint32 * 5), ("interleave", ctypes.c_int32), ("swizzle", ctypes.c_int32),
                ("l2", ctypes.c_int32), ("oob", ctypes.c_int32)]


class InProcessFake:
    """The fake loaded in this process: configure it (``reset``), install it as the runtime's driver, read what the
    runtime asked of it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.lib.fk_get_launch.restype = ctypes.POINTER(_Launch)
        self.lib.fk_get_alloc.restype = ctypes.POINTER(_Alloc)
        self.lib.fk_get_encode.restype = ctypes.POINTER(_Encode)
        self.lib.fk_get_copy.restype = ctypes.POINTER(_Copy)
        self.lib.fk_set.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
        self.lib.fk_calls.argtypes = (ctypes.c_char_p,)

    def reset(self, *ccs: tuple[int, int], **config: Any) -> None:
        """Forget every record and context and configure afresh: the devices' compute capabilities (default one
        9.0) and any other ``settings``."""
        self.lib.fk_reset()
        if ccs:
            config["cc"] = ccs
        for key, value in settings(**config).items():
            if self.lib.fk_set(key.encode(), value.encode()) != 0:
                raise ValueError(f"the fake driver refused {key}={value!r}")

    def fail(self, name: str, code: int) -> None:
        """Make the entry point ``name`` return ``code`` from now on."""
        self.lib.fk_set(b"FAIL", f"{name}:{code}".encode())

    @contextmanager
    def installed(self) -> Iterator[InProcessFake]:
        """The runtime's driver for the block's duration (a fresh ``Driver``: nothing cached from before)."""
        from kernelpack.runtime import driver

        driver.use_library(str(self.path))
        try:
            yield self
        finally:
            self.set_current(-1)
            driver.use_library()

    def calls(self, name: str) -> int:
        """How often the entry point ``name`` (e.g. ``cuLibraryLoadData``) was called since the reset."""
        return self.lib.fk_calls(name.encode())

    def attempts(self) -> list[Launch]:
        """Every launch the driver was asked for since the reset (``result`` says how it went), oldest first."""
        out = []
        for i in range(self.lib.fk_launch_count()):
            r = self.lib.fk_get_launch(i).contents
            attrs = tuple((a.id, tuple(a.value)) for a in r.attrs[:r.nattrs])
            out.append(_record(kernel=r.kernel.decode(), grid=tuple(r.grid), block=tuple(r.block), smem=r.smem,
                               stream=r.stream, device=r.device, ex=bool(r.ex), attrs=attrs, result=r.result,
                               params=bytes(r.params[:r.nbytes])))
        return out

    def launches(self) -> list[Launch]:
        """The launches the driver accepted since the reset."""
        return [x for x in self.attempts() if x["result"] == 0]

    def count(self) -> int:
        return len(self.launches())

    def last(self) -> Launch:
        done = self.launches()
        assert done, "nothing was launched"
        return done[-1]

    def allocs(self) -> list[dict[str, int]]:
        """Every cuMemAllocAsync since the reset: ptr, size, stream, device, freed, free_stream."""
        recs = (self.lib.fk_get_alloc(i).contents for i in range(self.lib.fk_alloc_count()))
        return [{f[0]: getattr(a, f[0]) for f in _Alloc._fields_} for a in recs]

    def copies(self) -> list[dict[str, Any]]:
        """Every cuMemcpyHtoDAsync since the reset: dst, size, stream, result, and the bytes copied (the first 4096)."""
        out = []
        for i in range(self.lib.fk_copy_count()):
            c = self.lib.fk_get_copy(i).contents
            out.append({"dst": c.dst, "size": c.size, "stream": c.stream, "result": c.result,
                        "data": bytes(c.data[:c.nbytes])})
        return out

    def encodes(self) -> list[dict[str, Any]]:
        """The arguments of every accepted cuTensorMapEncodeTiled since the reset (innermost dimension first)."""
        out = []
        for i in range(self.lib.fk_encode_count()):
            e = self.lib.fk_get_encode(i).contents
            r = e.rank
            out.append({"data_type": e.dtype, "rank": r, "global_address": e.addr, "global_dim": tuple(e.dims[:r]),
                        "global_strides": tuple(e.strides[:r - 1]), "box_dim": tuple(e.box[:r]),
                        "element_strides": tuple(e.estrides[:r]), "interleave": e.interleave, "swizzle": e.swizzle,
                        "l2_promotion": e.l2, "oob_fill": e.oob})
        return out

    def current_device(self) -> int:
        """Device of this thread's current context (-1: none)."""
        return self.lib.fk_current_device()

    def set_current(self, device: int) -> None:
        """Make ``device``'s primary context current on this thread (-1: none)."""
        self.lib.fk_set_current_device(device)
