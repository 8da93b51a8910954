"""The recorder's log read back (its layout: the head of ``recorder.c``)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import KernelpackError

IMAGE, FUNC, KFUNC, LAUNCH, NOTE = 1, 2, 3, 4, 5
API_LAUNCH_EX = 2
_LAUNCH = struct.Struct("<Q3I3II3IIIII")  # function, grid, block, smem, cluster, result, api, params, name bytes
UNKNOWN = 0xFFFFFFFF


@dataclass(frozen=True)
class Image:
    handle: int  # the module or library
    address: int  # where the image was in the process
    api: int
    data: bytes


@dataclass(frozen=True)
class Launch:
    function: int
    name: str  # the entry symbol the driver gave (cuFuncGetName), "" when it gave none
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    cluster: tuple[int, int, int]
    result: int  # the driver's answer (0: launched)
    ex: bool  # cuLaunchKernelEx
    params: tuple[bytes | None, ...]  # each parameter's bytes (None: size unknown); one buffer for ``extra`` launches
    buffer: bool  # the parameters came as cuLaunchKernel's ``extra`` buffer


@dataclass
class Log:
    images: dict[int, Image] = field(default_factory=dict)  # by module/library handle
    names: dict[int, tuple[int, str]] = field(default_factory=dict)  # function or kernel -> (owner, name)
    kernels: dict[int, int] = field(default_factory=dict)  # function -> the kernel it came from
    launches: list[Launch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def owner(self, function: int) -> tuple[int | None, str]:
        """The module/library a function came from and its name, as the loads recorded them."""
        fn = function if function in self.names else self.kernels.get(function, function)
        owner, name = self.names.get(fn, (None, ""))
        return owner, name


def read(path: Path, start: int = 0) -> Log:
    """The records of ``path`` from byte ``start`` (a truncated last record, from a process killed while writing, is
    left out and said in a note)."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read()
    except OSError as e:
        raise KernelpackError(f"the native launch log {path}: {e}") from None
    out = Log()
    pos = 0
    while pos + 8 <= len(data):
        kind, size = struct.unpack_from("<II", data, pos)
        body = data[pos + 8:pos + 8 + size]
        if len(body) < size:
            break
        pos += 8 + size
        if kind == IMAGE and size >= 24:
            handle, address, api, _ = struct.unpack_from("<QQII", body)
            out.images[handle] = Image(handle, address, api, bytes(body[24:]))
        elif kind == FUNC and size >= 24:
            fn, owner, _, _ = struct.unpack_from("<QQII", body)
            out.names[fn] = (owner, body[24:].decode("utf-8", "replace"))
        elif kind == KFUNC and size == 16:
            kernel, fn = struct.unpack_from("<QQ", body)
            out.kernels[fn] = kernel
        elif kind == LAUNCH and size >= _LAUNCH.size:
            out.launches.append(_launch(body))
        elif kind == NOTE:
            out.notes.append(body.decode("utf-8", "replace"))
    if pos < len(data):
        out.notes.append(f"the log ends inside a record (byte {start + pos}): the last record was left out")
    return out


def _launch(body: bytes) -> Launch:
    fn, gx, gy, gz, bx, by, bz, smem, cx, cy, cz, result, api, count, nlen = _LAUNCH.unpack_from(body)
    pos = _LAUNCH.size
    name = body[pos:pos + nlen].decode("utf-8", "replace")
    pos += nlen
    params: list[bytes | None] = []
    for _ in range(count):
        (size,) = struct.unpack_from("<I", body, pos)
        pos += 4
        if size == UNKNOWN:
            params.append(None)
            continue
        params.append(bytes(body[pos:pos + size]))
        pos += size
    return Launch(fn, name, (gx, gy, gz), (bx, by, bz), smem, (cx, cy, cz), result, (api & 0xFF) == API_LAUNCH_EX,
                  tuple(params), bool(api & 0x100))
