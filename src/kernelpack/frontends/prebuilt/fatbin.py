"""Fatbins, the container nvcc packs device code into, split into their cubins and PTX in pure Python (no toolkit).

Layout (little-endian), read from nvcc 13.0 output and checked against ``cuobjdump -xelf all`` / ``-xptx all``:

* a container: ``u32 magic 0xBA55ED50; u16 version (1); u16 header size (16); u64 bytes of entries``, then the
  entries back to back;
* an entry: ``u16 kind (1 PTX, 2 ELF); u16 (0x0101); u32 header size (64; 80 for PTX, 112 for sm_100+ ELF);
  u64 payload size (padded to 8); u32 compressed size (0: stored as is); u32; u16 minor, u16 major (of the PTX
  ISA or the ELF format); u32 SM number (90 for sm_90a and compute_90); u32, u32 (a name, unused by nvcc);
  u64 flags; u64; u64 uncompressed size``, then the payload at the header size;
* flags seen: 0x1 64-bit, 0x10 Linux host, 0x2000 LZ4, 0x8000 zstd, 0x100000 arch-specific (``a``), 0x200000
  family-specific (``f``);
* compression by nvcc 13.0's ``-compress-mode``: ``default``/``balance`` zstd for PTX only, ``size`` (and
  ``-Xfatbin -compress-all``) zstd for every entry, ``speed`` LZ4 for PTX, ``none``/``-no-compress`` nothing;
  both are decoded (:mod:`kernelpack.frontends.prebuilt.decompress`), every zstd frame stating its content size;
* what an entry may expand to is checked before it is decoded: no more than its format can expand its compressed
  bytes to (:data:`~kernelpack.frontends.prebuilt.decompress.ZSTD_MAX_RATIO` = 32768 for zstd, 255 for LZ4: real nvcc
  output reaches
  10,608 for a cubin holding a 16 MiB zero-filled ``__device__`` array, 40 for code alone), and no more than
  ``limit`` bytes for one entry and for all of a file's entries together;
* PTX payloads are NUL-terminated text (comments and indentation stripped by ``fatbinary``);
* a host object, shared library or executable keeps its fatbins in an ELF section ``.nv_fatbin``: one container
  per translation unit, back to back (8-byte aligned). A ``-rdc`` build's cubins are relocatable: link them first.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from ...core import config
from ...core.errors import CubinError, DecompressError
from ...core.files import human
from .decompress import LZ4_MAX_RATIO, ZSTD_MAX_RATIO, lz4_block, zstd

if TYPE_CHECKING:
    from mmap import mmap

MAGIC = 0xBA55ED50
_KINDS = {1: "ptx", 2: "cubin"}
_LZ4, _ZSTD = 0x2000, 0x8000
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")  # 64 bytes


class FatbinError(CubinError):
    """A fatbin (or the ``.nv_fatbin`` section of an object) is malformed, truncated or uses what kernelpack lacks."""


@dataclass(frozen=True)
class FatbinEntry:
    """One entry of a fatbin, expanded."""

    kind: str  # "cubin" | "ptx"
    sm: int  # the SM number its header names (90 for sm_90a and compute_90); a cubin's own ELF says the suffix
    data: bytes  # the cubin, or the PTX text without its trailing NULs
    compression: str  # how it was stored: "" | "lz4" | "zstd"
    where: str  # "k.fatbin: entry 2 (byte 5048)", for messages


def is_fatbin(data: bytes) -> bool:
    """Whether ``data`` starts with a fatbin container header."""
    return len(data) >= 4 and struct.unpack_from("<I", data)[0] == MAGIC


def read_fatbin(data: bytes, source: str = "fatbin", limit: int | None = None,
                keep: Callable[[str, int], bool] | None = None) -> list[FatbinEntry]:
    """Every entry of the containers in ``data`` (one, or several back to back as in ``.nv_fatbin``), expanded.
    ``limit``: the most bytes the compressed entries may expand to, each and all together (default: the
    ``max_file_bytes`` knob). ``keep(kind, sm)``: only the entries it accepts are expanded and returned."""
    limit = config.knobs().max_file_bytes if limit is None else limit
    out: list[FatbinEntry] = []
    budget = _Expansion(limit)
    pos = 0
    while pos < len(data):
        if pos % 8 == 0 and not any(data[pos:pos + 8]):
            pos += 8  # alignment padding between containers
            continue
        if len(data) - pos < 16 or not is_fatbin(data[pos:pos + 4]):
            raise FatbinError(f"{source}: no fatbin container at byte {pos} (starts with {bytes(data[pos:pos + 8])!r}; "
                              f"expected magic 0x{MAGIC:08X})")
        _, version, hsize, size = struct.unpack_from("<IHHQ", data, pos)
        if version != 1 or hsize < 16:
            raise FatbinError(f"{source}: fatbin container at byte {pos} has version {version}, header size {hsize}; "
                              f"expected version 1")
        end = pos + hsize + size
        if end > len(data):
            raise FatbinError(f"{source}: truncated fatbin: the container at byte {pos} claims {size} bytes of "
                              f"entries, {len(data) - pos - hsize} are there")
        out += _entries(data, pos + hsize, end, source, budget, len(out), keep)
        pos = end
    if not out:
        raise FatbinError(f"{source}: the fatbin holds no entries")
    return out


class _Expansion:
    """What the compressed entries of one file may still expand to."""

    def __init__(self, limit: int) -> None:
        self.limit = self.left = limit


def _entries(data: bytes, pos: int, end: int, source: str, budget: _Expansion, first: int,
             keep: Callable[[str, int], bool] | None = None) -> list[FatbinEntry]:
    out: list[FatbinEntry] = []
    while pos < end:
        where = f"{source}: entry {first + len(out) + 1} (byte {pos})"
        if pos + _ENTRY.size > end:
            raise FatbinError(f"{where}: truncated fatbin: the entry header runs past the container")
        kind, _, hsize, size, csize, _, _, _, sm, _, _, flags, _, usize = _ENTRY.unpack_from(data, pos)
        if hsize < _ENTRY.size or pos + hsize + size > end:
            raise FatbinError(f"{where}: truncated fatbin: header of {hsize} bytes and payload of {size} bytes run "
                              f"past the container's end (byte {end})")
        if kind not in _KINDS or (keep is not None and not keep(_KINDS[kind], sm)):
            pos += hsize + size  # a kind nvcc may add later (not device code kernelpack can ship), or not asked for
            continue
        try:
            body, how = _expand(data, pos + hsize, size, csize, usize, flags, where, budget)
            if _KINDS[kind] == "ptx":
                body = body.rstrip(b"\0")
        except MemoryError:
            raise FatbinError(f"{where}: cannot allocate the {usize} bytes it expands to") from None
        out.append(FatbinEntry(_KINDS[kind], sm, body, how, where))
        pos += hsize + size
    return out


def _expand(data: bytes, start: int, size: int, csize: int, usize: int, flags: int, where: str,
            budget: _Expansion) -> tuple[bytes, str]:
    if not flags & (_LZ4 | _ZSTD):
        return data[start:start + size], ""
    how = "zstd" if flags & _ZSTD else "lz4"
    ratio = ZSTD_MAX_RATIO if how == "zstd" else LZ4_MAX_RATIO
    if csize > size:
        raise FatbinError(f"{where}: its header's compressed size {csize} is larger than its payload ({size} bytes)")
    if usize > ratio * csize:
        raise FatbinError(f"{where}: its header says {csize} {how}-compressed bytes expand to {usize} bytes, more than "
                          f"{how} can expand them to ({ratio} times: no {how} data expands further)")
    if usize > budget.left:
        raise FatbinError(f"{where}: its {how}-compressed payload expands to {human(usize)}, past the "
                          f"{human(budget.limit)} the compressed entries of one file may expand to together "
                          f"({human(budget.limit - budget.left)} so far; KERNELPACK_MAX_FILE_BYTES)")
    budget.left -= usize
    try:
        payload = data[start:start + csize]
        body = zstd(payload, usize, need_size=True) if how == "zstd" else lz4_block(payload, usize)
    except DecompressError as e:
        raise FatbinError(f"{where}: cannot expand its {how}-compressed payload: {e.message} (rebuild with nvcc "
                          f"-compress-mode=none to store it uncompressed)") from None
    return body, how


# ------------------------------------------------------------------------------------------------ host objects

_EM_CUDA = 190


def is_host_elf(data: bytes) -> bool:
    """An ELF64 little-endian file for a machine other than CUDA (a host object, shared library or executable)."""
    return (len(data) >= 64 and data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1
            and struct.unpack_from("<H", data, 18)[0] != _EM_CUDA)


class HostSection(NamedTuple):
    """One section of a host ELF file: its name, type (``SHT_*``), bytes' offset and size, and linked section."""

    name: str
    kind: int
    offset: int
    size: int
    link: int

    def bytes_of(self, data: bytes | mmap, source: str) -> bytes:
        if self.kind == 8 or self.offset + self.size > len(data):  # SHT_NOBITS, or past the end
            raise FatbinError(f"{source}: its {self.name} section has no bytes in the file")
        return bytes(data[self.offset:self.offset + self.size])


def host_sections(data: bytes | mmap, source: str = "object") -> list[HostSection]:
    """The sections of a host ELF file (ELF64, little-endian), read from its section header table (a mapped file
    too: only the table and the section names are read)."""
    try:
        shoff = struct.unpack_from("<Q", data, 40)[0]
        entsize, count, strndx = struct.unpack_from("<HHH", data, 58)
        if entsize < 64 or shoff + count * entsize > len(data) or strndx >= count:
            raise FatbinError(f"{source}: truncated or malformed ELF section header table")
        headers = [struct.unpack_from("<IIQQQQI", data, shoff + i * entsize) for i in range(count)]
    except struct.error:
        raise FatbinError(f"{source}: truncated ELF file ({len(data)} bytes)") from None
    names_off, names_size = headers[strndx][4], headers[strndx][5]
    names = data[names_off:names_off + names_size]
    out = []
    for name, kind, _, _, offset, size, link in headers:
        end = names.find(b"\0", name)
        out.append(HostSection(names[name:end if end >= 0 else len(names)].decode("latin-1"), kind, offset, size,
                               link))
    return out


def fatbin_section(data: bytes, source: str = "object") -> bytes | None:
    """The ``.nv_fatbin`` section of a host ELF file (object, shared library, executable), or None without one."""
    for section in host_sections(data, source):
        if section.name == ".nv_fatbin":
            return section.bytes_of(data, source)
    return None
