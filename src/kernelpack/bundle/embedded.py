"""Find the kernelpack bundle(s) embedded in a built library: an ELF shared object, executable, object file, or a
static archive of them. The generator places each bundle, 64-byte aligned, in section ``.kpack``; a program that
statically links several kernelpack libraries holds several bundles there, one after another. CuTe host programs
linked in are described in section ``.kpack_host`` (``kernelpack.bundle.host_manifest``).
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import BundleError
from ..core.files import read_bounded
from ..core.records import record
from .host_manifest import SECTION as HOST_SECTION
from .host_manifest import HostEntryInfo
from .host_manifest import parse as parse_hosts

if TYPE_CHECKING:
    from .kpack import Bundle

SECTION = ".kpack"  # the ELF section of a built library holding its bundle (clib/dataobj.py writes it)
NOTE_SECTION = ".note.kernelpack"  # the ELF note holding its build id (clib/buildid.py writes it)
NOTE_OWNER = b"kernelpack\0"
NOTE_TYPE = 0x4B50  # "KP"


def ids_in_note(section: bytes) -> dict[str, str]:
    """Library name -> build id of each kernelpack note in an ELF ``.note.kernelpack`` section (several where a
    program links several kernelpack libraries statically); other notes are skipped."""
    out: dict[str, str] = {}
    pos = 0
    while pos + 12 <= len(section):
        namesz, descsz, kind = (int.from_bytes(section[pos + i:pos + i + 4], "little") for i in (0, 4, 8))
        name_end = pos + 12 + namesz
        desc_at = name_end + (-namesz % 4)
        end = desc_at + descsz
        if end > len(section):
            break
        if kind == NOTE_TYPE and section[pos + 12:name_end] == NOTE_OWNER:
            m = re.fullmatch(rb"kernelpack-build-id:([A-Za-z0-9_]+):([0-9a-f]{64})\0", section[desc_at:end])
            if m:
                out[m.group(1).decode()] = m.group(2).decode()
        pos = end + (-descsz % 4)
    return out

_AR_MAGIC = b"!<arch>\n"


def _elf_section(data: bytes, name: str, source: str) -> bytes | None:
    if data[:4] != b"\x7fELF" or len(data) < 64:
        return None
    if data[4] != 2 or data[5] != 1:
        raise BundleError(f"{source}: only 64-bit little-endian ELF files are supported")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shentsize < 40 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise BundleError(f"{source}: truncated or malformed ELF section table")

    def header(i: int) -> tuple[int, int, int, int]:
        nm, typ, _flags, _addr, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return nm, typ, off, size

    _, _, str_off, str_size = header(shstrndx)
    for i in range(shnum):
        nm, typ, off, size = header(i)
        end = data.find(b"\0", str_off + nm, str_off + str_size)
        if data[str_off + nm:end].decode(errors="replace") == name:
            if typ == 8 or off + size > len(data):  # NOBITS or truncated
                raise BundleError(f"{source}: section {name} has no contents in the file")
            return data[off:off + size]
    return None


def check_library_head(head: bytes, size: int, source: str) -> None:
    """Before a library is read whole: its first 64 bytes must open an ar archive or a 64-bit little-endian ELF file
    whose section table lies inside the file's ``size`` bytes (else there is no bundle to find)."""
    if head.startswith(_AR_MAGIC):
        return
    if head[:4] != b"\x7fELF" or len(head) < 64:
        raise BundleError(f"{source}: no kernelpack bundle inside (neither an ELF file nor an ar archive)")
    if head[4] != 2 or head[5] != 1:
        raise BundleError(f"{source}: only 64-bit little-endian ELF files are supported")
    shoff, = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
    if shoff + shnum * shentsize > size:
        raise BundleError(f"{source}: truncated or malformed ELF section table (it ends at byte "
                          f"{shoff + shnum * shentsize}, the file has {size})")


def _ar_members(data: bytes, source: str) -> Iterator[tuple[str, bytes]]:
    pos, names = len(_AR_MAGIC), b""
    while pos + 60 <= len(data):
        head = data[pos:pos + 60]
        field = head[48:58].strip()
        if not field.isdigit() or head[58:60] != b"`\n":
            raise BundleError(f"{source}: malformed ar member header at byte {pos}")
        name, size = head[:16].decode(errors="replace").strip(), int(field)
        body = data[pos + 60:pos + 60 + size]
        if name == "//":
            names = body
        elif name.startswith("/") and name[1:].isdigit():
            start = int(name[1:])
            name = names[start:names.find(b"\n", start)].decode(errors="replace").rstrip("/")
        if name not in ("/", "//", "/SYM64/"):
            yield name.rstrip("/"), body
        pos += 60 + size + (size & 1)
    if pos != len(data):
        raise BundleError(f"{source}: truncated ar archive")


def _bundles_in(section: bytes, source: str) -> Iterator[bytes]:
    from .kpack import HEADER_SIZE, MAGIC

    pos = 0
    while pos + HEADER_SIZE <= len(section):
        if section[pos:pos + len(MAGIC)] != MAGIC:
            pos += 64
            continue
        moff, msize = struct.unpack_from("<QQ", section, pos + 16)
        end = pos + moff + msize
        yield section[pos:end]
        pos = -(-end // 64) * 64


@record(frozen=True)
class Embedded:
    """What a built library, object or program carries: its bundles and its CuTe host programs' descriptions."""

    bundles: tuple[Bundle, ...]
    host_programs: tuple[HostEntryInfo, ...]
    archive: bool  # a static archive: Python can read it but not call its host programs
    build_ids: tuple[tuple[str, str], ...] = ()  # (library, build id) of each kernelpack library in it (buildid.py)


def read_embedded(path: str | os.PathLike[str], *, data: bytes | None = None) -> Embedded:
    """Every bundle (section ``.kpack``) and host-program description (``.kpack_host``) in a library, object or
    program, in section order (archive members in order); either may be empty. ``data``: the file's bytes when the
    caller read them already (else the file is read bounded, see ``kernelpack.core.files``)."""
    source = str(path)
    if data is None:
        data = read_bounded(path, "library", error=BundleError,
                            check_head=lambda head, size: check_library_head(head, size, source))
    archive = data.startswith(_AR_MAGIC)
    objects = list(_ar_members(data, source)) if archive else [(Path(path).name, data)]
    bundles, hosts, ids = [], [], {}
    for member, blob in objects:
        where = f"{source}({member})" if archive else source
        section = _elf_section(blob, SECTION, where)
        if section:  # the .kpack format's reader, imported for libraries with kernels only
            from .kpack import Bundle

            bundles += [Bundle.from_bytes(raw, source=where) for raw in _bundles_in(section, where)]
        host = _elf_section(blob, HOST_SECTION, where)
        if host is not None:
            hosts += parse_hosts(host, where)
        ids.update(ids_in_note(_elf_section(blob, NOTE_SECTION, where) or b""))
    return Embedded(tuple(bundles), tuple(hosts), archive, tuple(sorted(ids.items())))


def read_embedded_bundles(path: str | os.PathLike[str], *, data: bytes | None = None) -> list[Bundle]:
    """Every bundle embedded in a library, object or program, in section order (archive members in order)."""
    found = read_embedded(path, data=data)
    if not found.bundles:
        raise BundleError(f"{path}: no kernelpack bundle inside (no {SECTION} section; not built by kernelpack?)")
    return list(found.bundles)


def read_embedded_bundle(path: str | os.PathLike[str], *, data: bytes | None = None) -> Bundle:
    """The bundle embedded in a kernelpack library (``libNAME.so`` / ``libNAME.a``); several are merged."""
    from .kpack import Bundle

    bundles = read_embedded_bundles(path, data=data)
    return bundles[0] if len(bundles) == 1 else Bundle.of(*bundles)
