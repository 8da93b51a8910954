"""Test code that launches kernelpack kernels on machines without a GPU (a CI runner): kernelpack's dry-run driver.

The dry-run driver stands in for ``libcuda.so.1``. Both back ends -- the Python runtime and a generated C library --
check each launch fully, as they do on a GPU (arguments, the specialization they choose, the binary the device gets,
block, grid, shared memory, cluster and launch-flag limits), and the driver checks it again as NVIDIA's does (a
binary that cannot run on the device, REQNTID, limits), then records it instead of running it::

    import kernelpack
    from kernelpack.testing import dryrun

    with dryrun(["sm_90"]) as run:
        mod = kernelpack.load("build/mykernels.kpack")   # load inside the block: kernels bind to its driver
        my_layer(mod, torch.zeros(4096))                   # your code; host memory stands for device memory
    (launch,) = run.launches()
    assert launch.specialization == "axpy[f32]" and launch.grid == (16, 1, 1)
    assert launch.arguments(mod)["n"] == 4096

Without Python in the loop (a C++ program's tests), the environment does the same: ``KERNELPACK_DRIVER`` names the
driver (``dryrun`` for the runtime, its path for a C program) and ``KERNELPACK_DRYRUN_RECORD`` a file that gets one
JSON line per launch (the format: docs/testing.md)::

    python -m kernelpack.testing run --devices sm_90 --record launches.jsonl -- ./my_tests
    python -m kernelpack.testing path     # the driver library, for KERNELPACK_DRIVER
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import struct
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .core.abi import DType, Pointer, Scalar
from .core.errors import KernelpackError
from .runtime import dryrun as _dryrun

__all__ = ["DryRun", "Launch", "driver_path", "dryrun", "read_records"]

Dim3 = tuple[int, int, int]


def driver_path() -> Path:
    """The dry-run driver library (``KERNELPACK_DRIVER`` for a C program); built now if kernelpack was installed
    without it."""
    return _dryrun.library_path()


@dataclass(frozen=True)
class Launch:
    """One launch attempt the dry-run driver saw (``result`` 0: it was accepted; else ``error`` is the CUDA error it
    answered, as the real driver would)."""

    kernel: str  # the kernel family ("axpy"); the entry symbol when kernelpack did not name the launch
    specialization: str | None  # "axpy[f32]"; None when kernelpack did not name it (a CuTe host program's launch)
    entry: str  # the kernel's symbol in its binary
    binary: str | None  # the binary the device runs: "sm_90a", "compute_80 PTX"
    device: int
    device_arch: str | None  # "sm_90"
    grid: Dim3
    block: Dim3
    smem: int  # dynamic shared memory, bytes
    cluster: Dim3  # (0, 0, 0): no cluster requested at launch
    pdl: bool
    cooperative: bool
    stream: int
    call: str  # "cuLaunchKernel" or "cuLaunchKernelEx"
    params: bytes  # the parameter buffer as the kernel receives it (each parameter at its offset; PTX: empty)
    result: int
    error: str | None

    @property
    def ok(self) -> bool:
        return self.result == 0

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Launch:
        """A launch from one line of the record (docs/testing.md)."""
        def dims(v: Any) -> Dim3:
            return (int(v[0]), int(v[1]), int(v[2]))

        return cls(str(d["kernel"]), d.get("specialization"), str(d["entry"]), d.get("binary"), int(d["device"]),
                   d.get("device_arch"), dims(d["grid"]), dims(d["block"]), int(d["smem"]), dims(d["cluster"]),
                   bool(d["pdl"]), bool(d["cooperative"]), int(d["stream"]), str(d["call"]),
                   bytes.fromhex(d["params"]), int(d["result"]), d.get("error"))

    def arguments(self, source: Any) -> dict[str, Any]:
        """The launch's parameters by name, decoded with the specialization's ABI from ``source`` (the module
        :func:`kernelpack.load` gave, a :class:`~kernelpack.bundle.kpack.Bundle` or a bundle's path): ints and floats
        for scalars, addresses for pointers (0 for NULL), bytes for structs and opaque parameters."""
        from .bundle.kpack import Bundle

        bundle = source if isinstance(source, Bundle) else getattr(source, "bundle", None)
        if bundle is None:
            bundle = Bundle.read(source)
        if self.specialization is None:
            raise KernelpackError(f"launch of {self.entry}: kernelpack did not name its specialization (not a "
                                  f"kernelpack kernel launch?)")
        art = next((a for a in bundle if a.label == self.specialization), None)
        if art is None:
            raise KernelpackError(f"{self.specialization} is no specialization of that bundle")
        b = next((b for b in art.binaries if b.kind == "cubin" and self.binary is not None
                  and str(b.arch).rstrip("af") == self.binary.rstrip("af")), None)
        if b is None:
            raise KernelpackError(f"kernel {self.specialization}: the launch ran {self.binary}, whose parameter "
                                  f"layout the dry-run driver cannot read (PTX), or the bundle has no such cubin")
        abi = art.abi_for(b.arch)
        offsets = abi.offsets(b.cubin.kernel(art.entry).param_base)
        return {p.name: _value(p.type, self.params[off:off + p.type.size]) for p, off in zip(abi.params, offsets)}


def _value(t: Any, data: bytes) -> Any:
    if isinstance(t, Pointer):
        return int.from_bytes(data, "little")
    if isinstance(t, Scalar):
        if t.dtype is DType.f16:
            return struct.unpack("<e", data)[0]
        if t.dtype is DType.bf16:
            return struct.unpack("<f", b"\0\0" + data)[0]
        if t.dtype is DType.bool:
            return data != b"\0"
        return struct.unpack("<" + t.dtype.struct_format, data)[0]
    return bytes(data)


def read_records(path: str | os.PathLike[str]) -> list[Launch]:
    """Every launch a record file holds (``KERNELPACK_DRYRUN_RECORD``), in order."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    return [Launch.from_json(json.loads(line)) for line in text.splitlines() if line.strip()]


class DryRun:
    """The launches of one :func:`dryrun` block."""

    def __init__(self, record: Path, devices: Sequence[str]) -> None:
        self.record, self.devices = record, tuple(devices)
        self._kept: list[Launch] | None = None  # read when the block ended (its temporary record is gone then)

    def launches(self) -> list[Launch]:
        """Every launch attempt so far, in order (``.ok``: accepted)."""
        return list(self._kept) if self._kept is not None else read_records(self.record)

    def clear(self) -> None:
        """Forget the launches so far."""
        if self._kept is not None:
            self._kept = []
        else:
            self.record.write_text("")


@contextlib.contextmanager
def dryrun(devices: Sequence[str] = ("sm_90",), *, sms: Sequence[int] | None = None, version: int | None = None,
           record: str | os.PathLike[str] | None = None) -> Iterator[DryRun]:
    """For the block, kernels this process loads launch on the dry-run driver: ``devices`` are its GPUs (plain
    archs, ``["sm_90", "sm_80"]``), ``sms`` their SM counts (default 132 each), ``version`` the CUDA version it says
    it is (default 13000), ``record`` the JSON-lines file of launches (default: a temporary one). Load kernels
    inside the block (a module loaded before keeps its driver). Host memory stands for device memory."""
    from .runtime import adapters, driver, streams

    own = record is None
    if record is None:
        fd, name = tempfile.mkstemp(prefix="kernelpack-dryrun-", suffix=".jsonl")
        os.close(fd)
        path = Path(name)
    else:
        path = Path(record)
    settings = _dryrun.environment(list(devices), path, list(sms) if sms is not None else None, version)
    lib = driver_path()
    import ctypes

    fake = ctypes.CDLL(str(lib))
    fake.fk_reset()
    for key, value in settings.items():
        if fake.fk_set(key.removeprefix(_dryrun.ENV).encode(), value.encode()) != 0:
            raise KernelpackError(f"the dry-run driver refused {key}={value!r}")
    saved = adapters.testing.cpu_as_cuda, streams.current_torch_stream
    driver.use_library(str(lib))
    run = DryRun(path, devices)
    try:
        yield run
    finally:
        run._kept = read_records(path)
        driver.use_library()
        adapters.testing.cpu_as_cuda = saved[0]
        streams.set_current_torch_stream(None if saved[1] is streams._torch_current else saved[1])
        bridge = sys.modules.get("kernelpack.runtime._torch_bridge")
        if bridge is not None and not saved[0]:
            bridge.set_cpu_as_cuda(False)
            bridge.set_test_stream(None)
        if own:
            path.unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kernelpack.testing path`` | ``run [--devices ...] [--record FILE] -- PROGRAM ARGS...``."""
    p = argparse.ArgumentParser(prog="python -m kernelpack.testing", description="kernelpack's dry-run driver: "
                                "launches checked and recorded with no GPU (docs/testing.md).")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("path", help="print the dry-run driver library's path (for KERNELPACK_DRIVER)")
    r = sub.add_parser("run", help="run a program on the dry-run driver")
    r.add_argument("--devices", default="sm_90", help="comma-separated device archs (default: sm_90)")
    r.add_argument("--record", default=None, help="the JSON-lines file of launches (default: none)")
    r.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    args = p.parse_args(argv)
    try:
        lib = driver_path()
        if args.command == "path":
            print(lib)
            return 0
        program = args.program[1:] if args.program[:1] == ["--"] else args.program
        if not program:
            p.error("run needs a program: run [options] -- PROGRAM ARGS...")
        env = {**os.environ, "KERNELPACK_DRIVER": str(lib),
               **_dryrun.environment(args.devices.split(","), args.record)}
        os.execvpe(program[0], program, env)
    except KernelpackError as e:
        print(f"kernelpack.testing: error: {e.message}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"kernelpack.testing: error: {e.strerror or e}: {program[0]}", file=sys.stderr)
        return 1
    return 0  # pragma: no cover - execvpe does not return


if __name__ == "__main__":
    sys.exit(main())
