"""The recorder's log -> capture launches: for each launch, the kernel's entry symbol, where its image came from (a
shared library's ``.nv_fatbin``, or memory), the cubin of the device's arch that holds it, its launch (grid, block,
dynamic shared memory, cluster) and a check of the recorded parameter sizes against the cubin's.

Where a launch came from decides whether it is kept: by default every kernel from a file except the framework's
own (:data:`FRAMEWORK`: torch, the CUDA libraries, Triton) -- what a package compiled. Kernels from memory (Triton,
CuTe DSL, NVRTC) are recorded by the DSL hooks, or kept with ``native_from=["memory"]``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import mmap
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...core.arch import Arch
from ...core.cubin import Cubin, CubinKernel, is_cubin, read_cubin
from ...core.errors import KernelpackError
from ...core.files import read_bounded
from ..records import Launch, short_name
from . import log as nlog
from .driver import mapped_files

FRAMEWORK = ("*/torch/lib/*", "*/site-packages/nvidia/*", "*/triton/*", "*/libcudart.so*", "*/libcublas*",
             "*/libcudnn*", "*/libnccl*", "*/libcufft*", "*/libcurand*", "*/libcusparse*", "*/libcusolver*",
             "*/libnvrtc*", "*/libnvJitLink*", "*/libcuda.so*", "memory")
DIR = "native"  # the project's folder of the cubins written
_LEFT_OUT = "left out"
_Facts = tuple[str, str, list[str], dict[str, bytes]]  # where, family name, project files, their bytes


@dataclass
class _Origin:
    """Where a kernel's image came from: a file (its path) or ``memory``, and its cubins (read, with their bytes)."""

    where: str
    cubins: list[tuple[Cubin, bytes]] = field(default_factory=list)

    def holding(self, symbol: str) -> list[tuple[Cubin, bytes]]:
        return [(c, data) for c, data in self.cubins if symbol in c]


class Resolver:
    """Finds each kernel's image: the one its module was loaded from, else the ``.nv_fatbin`` of a shared library
    this process has mapped that holds it (the CUDA runtime may load a library's device code by its own means).
    Only libraries whose kernels are kept are read (the framework's hold gigabytes of compressed device code)."""

    def __init__(self, log: nlog.Log, native_from: Sequence[str] | None = None,
                 maps: list[tuple[int, int, str]] | None = None, archs: Sequence[str] = ()) -> None:
        self.log = log
        self.sms = frozenset(Arch.parse(a).sm for a in archs) or None
        self.native_from = native_from
        self.maps = mapped_files() if maps is None else maps
        self._images: dict[int, _Origin] = {}
        self._files: dict[str, _Origin] | None = None
        self._has: dict[str, bool] = {}

    def has_device_code(self, path: str) -> bool:
        """Whether the ELF file at ``path`` has a ``.nv_fatbin`` section (its section table read, nothing else)."""
        if path not in self._has:
            from ...frontends.prebuilt.fatbin import host_sections, is_host_elf

            try:
                with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                    self._has[path] = is_host_elf(m[:64]) and any(
                        s.name == ".nv_fatbin" for s in host_sections(m, path))
            except (OSError, ValueError, KernelpackError):
                self._has[path] = False
        return self._has[path]

    def where(self, address: int) -> str:
        """The library whose device code (``.nv_fatbin``) an image at ``address`` was, else ``memory``."""
        for lo, hi, path in self.maps:
            if lo <= address < hi:
                return path if self.has_device_code(path) else "memory"
        return "memory"

    def image(self, handle: int) -> _Origin | None:
        if handle not in self.log.images:
            return None
        if handle not in self._images:
            img = self.log.images[handle]
            where = self.where(img.address)
            cubins = _cubins(img.data, f"image {handle:#x}", self.sms) if kept(where, self.native_from) else []
            self._images[handle] = _Origin(where, cubins)
        return self._images[handle]

    def files(self) -> dict[str, _Origin]:
        """The device code of every kept library mapped here, read once."""
        if self._files is None:
            from ...frontends.prebuilt.fatbin import fatbin_section

            self._files = {}
            for path in sorted({p for _, _, p in self.maps}):
                if not kept(path, self.native_from) or not self.has_device_code(path):
                    continue
                try:
                    section = fatbin_section(read_bounded(path, "library"), path)
                except KernelpackError:
                    continue
                if section:
                    self._files[path] = _Origin(path, _cubins(section, path, self.sms))
        return self._files

    def find(self, symbol: str, function: int) -> _Origin | None:
        owner, _ = self.log.owner(function)
        origin = self.image(owner) if owner is not None else None
        if origin is not None and (not kept(origin.where, self.native_from) or origin.holding(symbol)):
            return origin
        return next((o for o in self.files().values() if o.holding(symbol)), origin)


def _cubins(data: bytes, where: str, sms: frozenset[int] | None = None) -> list[tuple[Cubin, bytes]]:
    """The cubins of an image (a cubin, or a fatbin's cubin entries: only those of ``sms`` are expanded), read."""
    from ...frontends.prebuilt.fatbin import is_fatbin, read_fatbin

    try:
        if is_cubin(data):
            return [(read_cubin(data), data)]
        if is_fatbin(data):
            keep = lambda kind, sm: kind == "cubin" and (sms is None or sm in sms)  # noqa: E731
            return [(read_cubin(e.data), e.data) for e in read_fatbin(data, where, keep=keep)]
    except KernelpackError:
        return []
    return []  # PTX: the driver compiled it; nothing of ours to ship


def kept(where: str, native_from: Sequence[str] | None) -> bool:
    """Whether a kernel from ``where`` (a path, or ``memory``) is captured: it matches one of ``native_from``
    (globs; ``memory`` for images from memory), or, without any, is not the framework's own."""
    if native_from:
        return any(fnmatch.fnmatch(where, g) or fnmatch.fnmatch(os.path.basename(where), g) for g in native_from)
    return not any(fnmatch.fnmatch(where, g) for g in FRAMEWORK)


def readable(symbol: str) -> str:
    """A family name from an entry symbol: the C++ function's name and template arguments (``scale_float``), as the
    prebuilt frontend names its family and variant."""
    from ...frontends.prebuilt.entry import symbol_names

    name, variant = symbol_names(symbol)
    return short_name(f"{name}_{variant}" if variant else name)[:64]


def launches(log: nlog.Log, archs: Sequence[str], native_from: Sequence[str] | None,
             skip: Callable[[str, str], None]) -> tuple[list[Launch], int]:
    """The capture launches of the log's launches of kept kernels, and how many launches were left out as the
    framework's own (or not matching ``native_from``)."""
    resolver = Resolver(log, native_from, archs=archs)
    out: list[Launch] = []
    left_out = 0
    facts: dict[tuple[int, str], _Facts | str | None] = {}
    for la in log.launches:
        symbol = la.name or log.owner(la.function)[1]
        if not symbol:
            skip(f"native launch of function {la.function:#x}", "the driver gave no name for it (cuFuncGetName needs "
                 "a CUDA 12.3 driver or newer) and no load recorded one")
            continue
        if la.result != 0:
            skip(f"native kernel {symbol}", f"the driver refused its launch (CUresult {la.result}): not recorded")
            continue
        key = (la.function, symbol)
        if key not in facts:
            facts[key] = _facts(resolver, symbol, la, archs, native_from, skip)
        got = facts[key]
        if got == _LEFT_OUT:
            left_out += 1
            continue
        if not isinstance(got, tuple):
            continue
        where, name, files, payload = got
        out.append(Launch(
            dsl="native", kernel=symbol, name=name, call="", family={"symbol": symbol}, variant={},
            options={"files": files, "from": os.path.basename(where)}, grid=la.grid,
            grid_consts={"block": list(la.block), "smem": la.smem, "cluster": list(la.cluster)},
            archs=tuple(archs), payload=payload))
    return out, left_out


def _facts(resolver: Resolver, symbol: str, la: nlog.Launch, archs: Sequence[str], native_from: Sequence[str] | None,
           skip: Callable[[str, str], None]) -> _Facts | str | None:
    """The kernel's origin, family name, project files and their bytes; :data:`_LEFT_OUT`; or None (skipped, said)."""
    origin = resolver.find(symbol, la.function)
    if origin is None or not kept(origin.where, native_from):
        return _LEFT_OUT  # the framework's own (its device code in no library kept), or not matching native_from
    from ...frontends.cuda.demangle import is_mangled

    holding = origin.holding(symbol)
    chosen = [(c, data) for c, data in holding if str(c.arch) in archs]
    if not chosen:
        have = sorted({str(c.arch) for c, _ in holding})
        skip(f"native kernel {symbol}", f"{origin.where} holds no cubin of it for {', '.join(archs)} (it has "
             f"{', '.join(have) or 'PTX only'})")
        return None
    if not is_mangled(symbol):
        skip(f"native kernel {symbol}", f"an extern \"C\" kernel (from {origin.where}): its name does not spell its "
             f"parameter types; add it with its C parameter list ([[cubin]] kernels = {{ {symbol} = \"...\" }})")
        return None
    for c, _ in chosen:
        why = _param_mismatch(c.kernel(symbol), la)
        if why:
            skip(f"native kernel {symbol}", f"{origin.where} ({c.arch}): {why}")
            return None
    stem = short_name(Path(origin.where).name.split(".")[0] if origin.where != "memory" else "memory")[:32]
    payload = {}
    for c, data in chosen:
        payload[f"{DIR}/{stem}_{hashlib.sha256(data).hexdigest()[:12]}.{c.arch}.cubin"] = data
    return origin.where, readable(symbol), sorted(payload), payload


def _param_mismatch(ck: CubinKernel, la: nlog.Launch) -> str:
    """Why the recorded parameters do not fit the cubin's table, or ""."""
    if la.buffer or not la.params:
        return ""
    if len(la.params) != len(ck.params):
        return f"the launch passed {len(la.params)} parameters, the cubin's kernel takes {len(ck.params)}"
    for i, (p, kp) in enumerate(zip(la.params, ck.params)):
        if p is not None and len(p) != kp.size:
            return f"parameter {i}: the launch passed {len(p)} bytes, the cubin's table says {kp.size}"
    return ""
