"""kernelpack's dry-run driver (``_dryrun.c``): a stand-in for ``libcuda.so.1`` that checks every launch as the real
driver does and records it, with no GPU -- for tests of code that launches kernelpack kernels, in Python or C, on
machines without one (docs/testing.md; :mod:`kernelpack.testing` is the helper for tests).

``KERNELPACK_DRIVER=dryrun`` makes the runtime open it (:func:`library_path`); a C program opens it by its path
(``KERNELPACK_DRIVER=$(python -m kernelpack.testing path)``). It is built with kernelpack where a C compiler was at
hand (``kernelpack/runtime/_dryrun*.so``), else here on first use, with the C compiler (``CC``) into a private
directory. Its settings are environment variables (:data:`SETTINGS`), read when it is first used.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ..core.errors import KernelpackError

HERE = Path(__file__).parent
SOURCE = HERE / "_dryrun.c"
PARTS = ("_dryrun.c", "_dryrun_image.c", "_dryrun_entry.c", "_dryrun_launch.c")
ENV = "KERNELPACK_DRYRUN_"  # its settings: KERNELPACK_DRYRUN_DEVICES, _SMS, _VERSION, _RECORD (and the tests' own)
SETTINGS = ("DEVICES", "SMS", "VERSION", "RECORD")
_built: dict[str, Path] = {}
_lock = threading.Lock()


def library_path() -> Path:
    """The dry-run driver library: the one built with kernelpack, else one built now (once per process) with the C
    compiler. KernelpackError when neither can be had."""
    shipped = sorted(HERE.glob("_dryrun*.so"))
    if shipped:
        return shipped[0]
    with _lock:
        got = _built.get("lib")
        if got is None:
            got = _built["lib"] = _build()
    return got


def _build() -> Path:
    from ..core.config import knobs

    digest = hashlib.sha256(b"".join((HERE / p).read_bytes() for p in PARTS)).hexdigest()[:16]
    out = Path(tempfile.mkdtemp(prefix=f"kernelpack-dryrun-{digest}-")) / "libkernelpack_dryrun.so"
    cc = knobs().cc
    cmd = [cc, "-std=c99", "-O1", "-fPIC", "-shared", "-o", str(out), str(SOURCE), "-lpthread"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        raise KernelpackError(f"the dry-run driver was not built with kernelpack, and building it now failed: cannot "
                              f"run the C compiler {cc!r} ({e}); install one (or set CC) or reinstall kernelpack "
                              f"where one is") from None
    if proc.returncode != 0:
        raise KernelpackError(f"building the dry-run driver failed: {' '.join(cmd)}", log=proc.stderr)
    return out


def is_shipped(path: str) -> bool:
    """Whether ``path`` is this dry-run driver (the one :func:`library_path` gives), not another build of its source
    (the test suite's fake driver, which leaves memory and streams to its tests)."""
    mine = [*HERE.glob("_dryrun*.so"), *_built.values()]
    try:
        real = Path(path).resolve()
    except OSError:
        return False
    return any(real == m.resolve() for m in mine)


def host_memory_as_device() -> None:
    """In a dry run nothing runs: arrays in host memory (torch CPU tensors, NumPy arrays through DLPack) stand for
    memory of device 0, and torch's "current stream" is the legacy stream 0 (unless a test chose another)."""
    from . import adapters, streams

    adapters.testing.cpu_as_cuda = True
    default_stream = streams.current_torch_stream is streams._torch_current
    if default_stream:
        streams.set_current_torch_stream(_stream_zero)
    bridge = sys.modules.get("kernelpack.runtime._torch_bridge")
    if bridge is None and "torch" in sys.modules:
        try:
            from . import _torch_bridge as bridge  # type: ignore[attr-defined, no-redef]
        except ImportError:
            bridge = None
    if bridge is not None:
        bridge.set_cpu_as_cuda(True)
        if default_stream:
            bridge.set_test_stream(0)


def _stream_zero(device: int) -> int:
    return 0


def environment(devices: list[str] | None = None, record: str | os.PathLike[str] | None = None,
                sms: list[int] | None = None, version: int | None = None) -> dict[str, str]:
    """The environment variables that configure the dry-run driver (``KERNELPACK_DRYRUN_*``), checked here: the
    driver itself cannot report a malformed one."""
    out: dict[str, str] = {}
    if devices is not None:
        from ..launch.binaries import device_arch

        for d in devices:
            device_arch(d)  # a plain sm_XY that exists, else a KernelpackError naming it
        out[ENV + "DEVICES"] = ",".join(devices) if devices else "none"
    if sms is not None:
        if not sms or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in sms):
            raise KernelpackError(f"dry-run SM counts must be positive ints, one per device (got {sms!r})")
        out[ENV + "SMS"] = ",".join(map(str, sms))
    if version is not None:
        if isinstance(version, bool) or not isinstance(version, int) or version < 12000:
            raise KernelpackError(f"a dry-run driver version is a CUDA version such as 13000 (got {version!r}); "
                                  f"kernelpack needs 12000 or newer")
        out[ENV + "VERSION"] = str(version)
    if record is not None:
        out[ENV + "RECORD"] = str(record)
    return out
