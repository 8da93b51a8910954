"""The tag of a wheel, read from the shared objects it holds (the runtime's launch extension, ``libNAME.so``).

Every kernelpack wheel is tagged for the machine that will load it: cubins run only where a CUDA driver does, which
is Linux on x86_64 or aarch64 here, so a wheel must not install on a Mac. Its interpreter and ABI tags are
``cp310-abi3`` when it carries the runtime's launch extension (built for the limited API of CPython 3.10: every
CPython >= 3.10 loads it), else ``py3-none``. Its platform tag is checked as auditwheel checks one: each shared
object's CPU from its ELF header (so a cross compiler in ``CC`` tags correctly), the libraries it needs
(``DT_NEEDED``: only glibc's own, PEP 600) and the newest ``GLIBC_X.Y`` symbol version it needs (``.gnu.version_r``),
never older than 2.17, the oldest glibc current CUDA drivers support: ``manylinux_2_17_x86_64``. A library that
needs a shared library beyond glibc's own is tagged ``linux_<arch>`` (installable from the file, not from PyPI).
"""

from __future__ import annotations

import platform
import re
import struct
from dataclasses import dataclass

from .meta import WheelError

MACHINES = {62: "x86_64", 183: "aarch64", 21: "ppc64le", 22: "s390x"}
FIRST_MANYLINUX = {"x86_64": (2, 17), "aarch64": (2, 17), "ppc64le": (2, 17), "s390x": (2, 17)}  # CUDA's floor
PLATFORMS = ("x86_64", "aarch64")  # CPUs with a CUDA driver
_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}
# what PEP 600 lets a manylinux wheel assume (glibc's libraries and the dynamic loader)
GLIBC_LIBRARIES = frozenset(("libc.so.6", "libdl.so.2", "libpthread.so.0", "libm.so.6", "librt.so.1", "libutil.so.1",
                             "libresolv.so.2", "libcrypt.so.1", "libnsl.so.1", "ld-linux-x86-64.so.2",
                             "ld-linux-aarch64.so.1", "ld64.so.2", "ld64.so.1"))
SHT_DYNAMIC, SHT_GNU_VERNEED, DT_NEEDED = 6, 0x6FFFFFFE, 1
_GLIBC = re.compile(r"GLIBC_([0-9]+)\.([0-9]+)(?:\.[0-9]+)?")


@dataclass(frozen=True)
class SharedObject:
    """What a tag depends on: the CPU, the libraries needed and the symbol versions needed from each."""

    arch: str
    needed: tuple[str, ...]
    versions: tuple[str, ...]  # e.g. GLIBC_2.34

    @property
    def glibc(self) -> tuple[int, int]:
        found = [(int(m[1]), int(m[2])) for v in self.versions if (m := _GLIBC.fullmatch(v))]
        return max([FIRST_MANYLINUX[self.arch], *found])

    @property
    def foreign(self) -> tuple[str, ...]:
        """Needed libraries a manylinux wheel may not assume."""
        return tuple(n for n in self.needed if n not in GLIBC_LIBRARIES)

    @property
    def tag(self) -> str:
        if self.foreign:
            return f"linux_{self.arch}"
        major, minor = self.glibc
        return f"manylinux_{major}_{minor}_{self.arch}"


def check_platform(given: str | None) -> str:
    """The target CPU of a wheel: ``given`` (``x86_64``, ``aarch64``) or this machine's."""
    raw = given if given is not None else platform.machine()
    arch = _ALIASES.get(raw.lower(), raw.lower()) if isinstance(raw, str) else raw
    if arch not in PLATFORMS:
        where = "--platform" if given is not None else f"this machine ({platform.machine()!r})"
        raise WheelError(f"{where}: {raw!r:.40} is not a CPU with a CUDA driver; a kernelpack wheel targets "
                         f"{' or '.join(PLATFORMS)} (pass --platform)")
    return arch


def kernels_tag(arch: str, python: str = "py3-none") -> str:
    """The tag of a wheel without host code of its own, for CPU ``arch`` (``python``: its interpreter and ABI tags,
    ``cp310-abi3`` when it carries the runtime's launch extension)."""
    major, minor = FIRST_MANYLINUX[arch]
    return f"{python}-manylinux_{major}_{minor}_{arch}"


def wheel_tag(python: str, arch: str, objects: list[SharedObject]) -> tuple[str, tuple[str, ...]]:
    """The tag of a wheel for CPU ``arch`` holding the shared ``objects`` (all built for ``arch``), and the libraries
    they need that a manylinux wheel may not assume: the newest glibc any of them needs (at least 2.17), or
    ``linux_<arch>`` when one needs a library beyond glibc's."""
    foreign = tuple(dict.fromkeys(n for o in objects for n in o.foreign))
    if foreign:
        return f"{python}-linux_{arch}", foreign
    major, minor = max([FIRST_MANYLINUX[arch], *(o.glibc for o in objects)])
    return f"{python}-manylinux_{major}_{minor}_{arch}", ()


def read_shared_object(data: bytes, source: str) -> SharedObject:
    """The architecture, DT_NEEDED entries and needed symbol versions of a 64-bit little-endian ELF library."""
    elf = _Elf(data, source)
    needed: list[str] = []
    versions: list[str] = []
    for i, (kind, link, info) in enumerate(elf.kinds):
        if kind == SHT_DYNAMIC:
            dyn, strtab = elf.body(i), elf.body(link)
            for off in range(0, len(dyn) - 15, 16):
                tag, val = struct.unpack_from("<qQ", dyn, off)
                if tag == DT_NEEDED:
                    needed.append(elf.text(strtab, val))
        elif kind == SHT_GNU_VERNEED:
            versions += elf.verneed(elf.body(i), elf.body(link), info)
    return SharedObject(elf.arch, tuple(needed), tuple(sorted(set(versions))))


class _Elf:
    """Bounds-checked reads of an ELF64 LE file's section table."""

    def __init__(self, data: bytes, source: str) -> None:
        self.data, self.source = data, source
        if data[:4] != b"\x7fELF" or len(data) < 64:
            raise self.bad("not an ELF file")
        if data[4] != 2 or data[5] != 1:
            raise self.bad("not a 64-bit little-endian ELF file")
        machine = struct.unpack_from("<H", data, 18)[0]
        arch = MACHINES.get(machine)
        if arch is None:
            raise self.bad(f"ELF machine {machine} has no manylinux platform")
        self.arch = arch
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        if shentsize != 64 or shoff + shnum * 64 > len(data):
            raise self.bad("its section headers lie outside the file")
        self.sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * 64) for i in range(shnum)]
        self.kinds = [(sh[1], sh[6], sh[7]) for sh in self.sections]

    def bad(self, why: str) -> WheelError:
        return WheelError(f"{self.source}: cannot read its platform ({why}); the wheel's tag depends on it")

    def body(self, i: int) -> bytes:
        if not 0 <= i < len(self.sections):
            raise self.bad(f"section {i} does not exist")
        off, size = self.sections[i][4], self.sections[i][5]
        if off + size > len(self.data):
            raise self.bad(f"section {i} lies outside the file")
        return self.data[off:off + size]

    def text(self, strtab: bytes, off: int) -> str:
        end = strtab.find(b"\0", off) if 0 <= off < len(strtab) else -1
        if end < 0:
            raise self.bad("a name lies outside its string table")
        return strtab[off:end].decode("ascii", "replace")

    def verneed(self, sec: bytes, strtab: bytes, count: int) -> list[str]:
        """The version names of ``count`` Verneed entries (each with its chain of Vernaux)."""
        out = []
        off = 0
        for _ in range(count):
            if off + 16 > len(sec):
                raise self.bad("a version need lies outside its section")
            _, cnt, _, aux, nxt = struct.unpack_from("<HHIII", sec, off)
            a = off + aux
            for _ in range(cnt):
                if a + 16 > len(sec):
                    raise self.bad("a version name lies outside its section")
                _, _, _, name, anext = struct.unpack_from("<IHHII", sec, a)
                out.append(self.text(strtab, name))
                if not anext:
                    break
                a += anext
            if not nxt:
                break
            off += nxt
        return out
