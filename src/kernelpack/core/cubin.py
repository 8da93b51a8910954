"""Read a kernel's launch facts from a CUDA cubin (ELF64) in pure Python: no toolkit, driver, GPU or ELF library.

The cubin tells entry names, the parameter buffer layout (ordinal, offset, size), registers, stack, static shared
memory, launch bounds and cluster shape; it does not tell C types (see DESIGN.md). Every read is bounds-checked,
so truncated or garbled input raises :class:`CubinError` and nothing else.

Findings from nvcc 13.0 cubins, checked against ``cuobjdump -elf`` and ``-res-usage``:

* Param offsets are relative to the start of the param area in constant bank 0 (PARAM_CBANK): 0x160 on sm_80,
  0x210 on sm_90a, 0x380 on sm_100a and sm_120. Alignment applies to the *absolute* bank address, so offsets
  depend on the arch: in ``(char c, const __grid_constant__ CUtensorMap m)`` (CUtensorMap is alignas(128) in
  CUDA 13) ``m`` sits at 0x20 / 0x70 / 0x80, i.e. at absolute 0x180 / 0x280 / 0x400.
* KPARAM_INFO (0x17): size in bytes in flags bits 18-31. KPARAM_INFO_V2 (0x45, once params pass 4352 bytes)
  keeps the 12-byte layout ``u32 index; u16 ordinal; u16 offset; u32 flags`` with the size in bits 0-15.
* Arch: ELF ABI version 7 (ptxas <= 12.5 seen) has the SM in ``e_flags & 0xff`` and 0x800 = "a" (from sm_90;
  some sm_60 cubins set that bit too and cuobjdump ignores it). ABI version 8 (ptxas 12.7 and 13 seen) has the SM
  in bits 8-15 and "a" only in ``.nv.compat`` record 0x09. An "f" (family) cubin is not marked in the ELF at all
  (only in the ptxas command line in ``.note.nv.tkinfo``) and reads as the plain arch, as cuobjdump reads it.
* toolkit_version: "release X.Y" in ``.note.nv.tkinfo`` (ptxas 12.x/13 with ABI 8), else the u32 toolkit field
  (10*major+minor) of ``.note.nv.cuinfo``, else ``e_version`` of an ABI-7 cubin (both what cuobjdump prints),
  else a kernel's CUDA_API_VERSION (0x37). ptxas 12.x ABI-8 cubins have ``.note.nv.cuver`` without a version.
* Static shared memory: on sm_90+ every ``.nv.shared.<kernel>`` includes the 1 KiB system reserve (a kernel
  with only dynamic shared memory gets a 1024-byte section); the driver reports size - 1024.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from . import records
from ._reprs import clip, listing
from .arch import Arch
from .errors import CubinError

_EM_CUDA = 190
_ET_REL, _ET_EXEC = 1, 2
_SHT_SYMTAB, _SHT_STRTAB, _SHT_NOTE, _SHT_NOBITS, _SHT_CUDA_INFO = 2, 3, 7, 8, 0x70000000
_STT_FUNC, _STO_CUDA_ENTRY = 2, 0x10
_SHARED_RESERVE = 1024
_COMPAT_ACCELERATOR = 0x09  # EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET

# EIATTR ids in .nv.info sections
_MAX_THREADS, _PARAM_CBANK, _REQNTID, _FRAME_SIZE, _MIN_STACK_SIZE = 0x05, 0x0A, 0x10, 0x11, 0x12
_KPARAM_INFO, _CBANK_PARAM_SIZE, _MAXREG_COUNT, _REGCOUNT = 0x17, 0x19, 0x1B, 0x2F
_CUDA_API_VERSION, _CTA_PER_CLUSTER, _EXPLICIT_CLUSTER, _MAX_CLUSTER_RANK = 0x37, 0x3D, 0x3E, 0x3F
_KPARAM_INFO_V2 = 0x45
_MODULE_IDS = (_REGCOUNT, _MIN_STACK_SIZE, _FRAME_SIZE)


@records.record(frozen=True)
class KParam:
    """One entry of a kernel's parameter buffer."""

    ordinal: int
    offset: int  # byte offset relative to the start of the param buffer (add CubinKernel.param_base for absolute)
    size: int  # bytes


@records.record(frozen=True)
class CubinKernel:
    """Launch facts of one entry point, as the cubin records them."""

    name: str  # entry symbol (mangled for C++)
    params: tuple[KParam, ...]  # sorted by ordinal; unused params included
    param_bytes: int  # CBANK_PARAM_SIZE; 0 when none
    param_base: int  # absolute constant-bank-0 address where params start; 0 if absent
    registers: int
    stack_bytes: int  # MIN_STACK_SIZE: local memory incl. spills
    frame_bytes: int
    static_smem: int  # user bytes of .nv.shared.<kernel>, system reserve excluded
    smem_reserved: int  # system reserve included in that section (1024 on sm_90+ when present, else 0)
    reqntid: tuple[int, int, int] | None  # the only block shape the driver accepts
    max_threads: tuple[int, int, int] | None  # __launch_bounds__ max threads
    max_registers: int | None  # MAXREG_COUNT register cap (255 = only the hardware limit)
    cluster_dims: tuple[int, int, int] | None
    explicit_cluster: bool  # the driver rejects launches with any other cluster shape
    max_cluster_rank: int | None

    def __repr__(self) -> str:
        facts = [f"{len(self.params)} params ({self.param_bytes} bytes)", f"{self.registers} registers"]
        facts += [f"{self.static_smem} B static smem"] if self.static_smem else []
        facts += [f"{self.stack_bytes} B stack"] if self.stack_bytes else []
        facts += [f"reqntid {self.reqntid}"] if self.reqntid else []
        facts += [f"cluster {self.cluster_dims}{' explicit' if self.explicit_cluster else ''}"] if self.cluster_dims \
            else []
        return f"<CubinKernel {clip(self.name, 80)}: {', '.join(facts)}>"


_UNREAD = object()


class Cubin:
    """A parsed, linked (non-relocatable) cubin: its ``arch``, ``toolkit_version`` (e.g. "13.0") and ``kernels`` (in
    symbol-table order). The headers, sections and symbols are read and checked at once; each kernel's records when
    that kernel is first asked for (:meth:`kernel`), so reading one kernel of a cubin of hundreds costs one kernel's
    records; :attr:`kernels` reads them all."""

    __slots__ = ("arch", "_data", "_by_name", "_entries", "_module", "_done", "_all", "_toolkit")

    def __init__(self, arch: Arch, data: bytes, by_name: dict[str, _Section], entries: list[tuple[int, str]],
                 module: dict[int, dict[int, int]]) -> None:
        self.arch = arch
        self._data, self._by_name, self._entries, self._module = data, by_name, entries, module
        self._done: dict[str, CubinKernel] = {}
        self._all: tuple[CubinKernel, ...] | None = None
        self._toolkit: str | None | object = _UNREAD

    @property
    def kernels(self) -> tuple[CubinKernel, ...]:
        got = self._all
        if got is None:
            got = self._all = tuple(self._kernel(i, n) for i, n in self._entries)
        return got

    @property
    def toolkit_version(self) -> str | None:
        if self._toolkit is _UNREAD:
            self._toolkit = _toolkit(self._data, self._by_name, self._api_version)
        return self._toolkit  # type: ignore[return-value]

    def _api_version(self) -> int | None:
        """The first kernel's CUDA_API_VERSION record (symbol order), read only when no note names the toolkit."""
        for _, name in self._entries:
            info = self._by_name.get(f".nv.info.{name}")
            records = _records(info) if info is not None else iter(())
            got = next((_scalar(r, name) for r in records if r[0] == _CUDA_API_VERSION), None)
            if got:
                return got
        return None

    def __repr__(self) -> str:
        toolkit = f" (CUDA {self.toolkit_version})" if self.toolkit_version else ""
        names = [n for _, n in self._entries]
        return (f"<Cubin {self.arch}{toolkit}: {len(names)} kernel{'s' * (len(names) != 1)} "
                f"({listing(names, 160)})>")

    def __contains__(self, name: object) -> bool:
        """Whether the cubin has an entry point ``name`` (its symbol table only: no records read)."""
        return any(n == name for _, n in self._entries)

    def kernel(self, name: str) -> CubinKernel:
        got = self._done.get(name)
        if got is not None:
            return got
        for index, n in self._entries:
            if n == name:
                return self._kernel(index, name)
        names = ", ".join(n for _, n in self._entries) or "none"
        raise CubinError(f"no kernel {name!r} in this {self.arch} cubin; available: {names}")

    def _kernel(self, index: int, name: str) -> CubinKernel:
        got = self._done.get(name)
        if got is None:
            by_name = self._by_name
            info = by_name.get(f".nv.info.{name}")
            records = list(_records(info)) if info is not None else []
            shared = by_name.get(f".nv.shared.{name}")
            got = _kernel(name, records, self._module.get(index, {}), shared.size if shared is not None else None,
                          self.arch)
            self._done.setdefault(name, got)
        return got


class _Section(NamedTuple):
    name: str
    type: int
    size: int
    link: int
    info: int
    entsize: int
    data: bytes  # empty for NOBITS


class _Symbol(NamedTuple):
    name: str
    info: int
    other: int


def is_cubin(data: bytes) -> bool:
    """Cheap check: ELF magic and e_machine EM_CUDA. Says nothing about whether the rest is sound."""
    return len(data) >= 20 and bytes(data[:4]) == b"\x7fELF" and data[18] | data[19] << 8 == _EM_CUDA


def read_cubin(data: bytes) -> Cubin:
    """Parse a linked cubin; :class:`CubinError` says what is wrong with malformed or unsupported input (a kernel's
    own records are read, and checked, when that kernel is first asked for)."""
    data = bytes(data)
    flags = _check_header(data)
    sections = _sections(data)
    symbols = _symbols(sections)
    by_name = {s.name: s for s in sections}
    module = _module_info(by_name.get(".nv.info"), symbols)
    arch = _arch(data, flags, by_name.get(".nv.compat"))
    entries = [(i, sym.name) for i, sym in enumerate(symbols)
               if sym.info & 0xF == _STT_FUNC and sym.other & _STO_CUDA_ENTRY]
    return Cubin(arch, data, by_name, entries, module)


def _check_header(data: bytes) -> int:
    if len(data) < 4 or data[:4] != b"\x7fELF":
        raise CubinError(f"not an ELF file (starts with {data[:4]!r}); expected a cubin")
    if len(data) > 4 and data[4] != 2:
        raise CubinError(f"{'32-bit' if data[4] == 1 else f'bad class {data[4]}'} ELF; cubins are ELF64")
    if len(data) < 64:
        raise CubinError(f"truncated cubin: {len(data)} bytes, shorter than the 64-byte ELF64 header")
    if data[5] != 1:
        raise CubinError("big-endian ELF; cubins are little-endian")
    e_type, machine = struct.unpack_from("<HH", data, 16)
    if machine != _EM_CUDA:
        raise CubinError(f"ELF for machine {machine}, not a CUDA cubin (EM_CUDA = {_EM_CUDA})")
    if e_type == _ET_REL:
        raise CubinError("relocatable cubin (compiled with -rdc=true / -dc): link it with nvlink -cubin first")
    if e_type != _ET_EXEC:
        raise CubinError(f"unsupported ELF type {e_type}; expected an executable cubin (ET_EXEC)")
    return int(struct.unpack_from("<I", data, 48)[0])


def _sections(data: bytes) -> list[_Section]:
    shoff = struct.unpack_from("<Q", data, 40)[0]
    entsize, count, strndx = struct.unpack_from("<HHH", data, 58)
    if count == 0 or entsize < 64:
        raise CubinError(f"no usable section header table (e_shnum={count}, e_shentsize={entsize})")
    if shoff + count * entsize > len(data):
        raise CubinError(f"truncated cubin: section headers end at {shoff + count * entsize}, file has {len(data)}")
    phoff, (ph_entsize, ph_count) = struct.unpack_from("<Q", data, 32)[0], struct.unpack_from("<HH", data, 54)
    if phoff + ph_count * ph_entsize > len(data):
        raise CubinError(
            f"truncated cubin: program headers end at {phoff + ph_count * ph_entsize}, file has {len(data)}"
        )
    if strndx >= count:
        raise CubinError(f"section-name table index {strndx} out of range ({count} sections)")
    if entsize == 64:  # one unpack of the whole table (every cubin seen)
        raw = list(struct.iter_unpack("<IIQQQQIIQQ", data[shoff : shoff + count * 64]))
    else:
        raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize) for i in range(count)]
    size = len(data)
    blobs = []
    for i, (_, kind, _, _, offset, length, *_) in enumerate(raw):
        if kind == _SHT_NOBITS:
            blobs.append(b"")
            continue
        if offset + length > size:
            raise CubinError(f"truncated cubin: section {i} spans [{offset}, {offset + length}), file has {size}")
        blobs.append(data[offset : offset + length])
    names = blobs[strndx]
    return [_Section(_cstr(names, r[0], "name of section", i), r[1], r[5], r[6], r[7], r[9], blobs[i])
            for i, r in enumerate(raw)]


def _cstr(table: bytes, offset: int, what: str, index: int | None = None) -> str:
    """The NUL-terminated UTF-8 string at ``offset`` of a string table; errors name ``what`` (and ``index``)."""
    end = table.find(b"\0", offset) if offset < len(table) else -1
    if end < 0:
        where = what if index is None else f"{what} {index}"
        raise CubinError(f"{where}: string offset {offset} outside its string table ({len(table)} bytes)")
    try:
        return table[offset:end].decode("utf-8")
    except UnicodeDecodeError as e:
        where = what if index is None else f"{what} {index}"
        raise CubinError(f"{where}: not valid UTF-8 ({table[offset:end]!r})") from e


def _symbols(sections: list[_Section]) -> list[_Symbol]:
    symtab = next((s for s in sections if s.type == _SHT_SYMTAB), None)
    if symtab is None:
        raise CubinError("cubin has no symbol table (.symtab)")
    if symtab.entsize < 24 or symtab.link >= len(sections) or sections[symtab.link].type != _SHT_STRTAB:
        raise CubinError(f"bad .symtab header (entry size {symtab.entsize}, string table {symtab.link})")
    strings = sections[symtab.link].data
    n, table = len(symtab.data) // symtab.entsize, symtab.data
    if symtab.entsize == 24:  # one unpack of the whole table (every cubin seen)
        rows = [r[:3] for r in struct.iter_unpack("<IBBHQQ", table[: n * 24])]
    else:
        rows = [struct.unpack_from("<IBB", table, i * symtab.entsize) for i in range(n)]
    return [_Symbol(_cstr(strings, name, "name of symbol", i), info, other)
            for i, (name, info, other) in enumerate(rows)]


def _records(section: _Section) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(attribute id, format, payload)`` for each record of an .nv.info-style section."""
    data, pos = section.data, 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise CubinError(f"{section.name}: record header at byte {pos} runs past the section end ({len(data)})")
        fmt, attr, half = data[pos], data[pos + 1], data[pos + 2 : pos + 4]
        if fmt == 4:
            length = half[0] | half[1] << 8
            if pos + 4 + length > len(data):
                raise CubinError(
                    f"{section.name}: record 0x{attr:02x} at byte {pos} claims {length} bytes, "
                    f"past the section end ({len(data)})"
                )
            yield attr, fmt, data[pos + 4 : pos + 4 + length]
            pos += 4 + length
        elif fmt in (1, 2, 3):
            yield attr, fmt, half
            pos += 4
        else:
            raise CubinError(f"{section.name}: record at byte {pos} has unknown format {fmt}")


def _u32s(record: tuple[int, int, bytes], count: int, where: str) -> tuple[int, ...]:
    attr, fmt, payload = record
    if fmt != 4 or len(payload) < 4 * count:
        raise CubinError(f"{where}: record 0x{attr:02x} has {len(payload)} bytes, expected {4 * count}")
    return struct.unpack_from(f"<{count}I", payload)


def _scalar(record: tuple[int, int, bytes], where: str) -> int:
    attr, fmt, payload = record
    if fmt == 1:
        return 0
    if fmt == 2:
        return payload[0]
    if fmt == 3:
        return payload[0] | payload[1] << 8
    return _u32s(record, 1, where)[0]


def _module_info(section: _Section | None, symbols: list[_Symbol]) -> dict[int, dict[int, int]]:
    """Module-wide .nv.info: {symbol index: {attribute id: value}} for REGCOUNT, MIN_STACK_SIZE, FRAME_SIZE."""
    out: dict[int, dict[int, int]] = {}
    for record in _records(section) if section is not None else ():
        if record[0] in _MODULE_IDS:
            sym, value = _u32s(record, 2, ".nv.info")
            if sym >= len(symbols):
                raise CubinError(f".nv.info: record 0x{record[0]:02x} names symbol {sym}, table has {len(symbols)}")
            out.setdefault(sym, {})[record[0]] = value
    return out


def _kernel(
    name: str, records: list[tuple[int, int, bytes]], module: dict[int, int], shared: int | None, arch: Arch
) -> CubinKernel:
    where = f"kernel {name}"
    params: list[KParam] = []
    found: dict[int, tuple[int, int, bytes]] = {}
    for record in records:
        if record[0] == _KPARAM_INFO:
            _, ordinal_offset, flags = _u32s(record, 3, where)
            params.append(KParam(ordinal_offset & 0xFFFF, ordinal_offset >> 16, flags >> 18))
        elif record[0] == _KPARAM_INFO_V2:
            _, ordinal_offset, flags = _u32s(record, 3, where)
            params.append(KParam(ordinal_offset & 0xFFFF, ordinal_offset >> 16, flags & 0xFFFF))
        else:
            found.setdefault(record[0], record)

    def dim3(attr: int) -> tuple[int, int, int] | None:
        if attr not in found:
            return None
        x, y, z = _u32s(found[attr], 3, where)
        return (x, y, z)

    def scalar(attr: int) -> int | None:
        return _scalar(found[attr], where) if attr in found else None

    param_base = _u32s(found[_PARAM_CBANK], 2, where)[1] & 0xFFFF if _PARAM_CBANK in found else 0
    reserved = _SHARED_RESERVE if shared is not None and arch.sm >= 90 and shared >= _SHARED_RESERVE else 0
    return CubinKernel(
        name=name,
        params=tuple(sorted(params, key=lambda p: p.ordinal)),
        param_bytes=scalar(_CBANK_PARAM_SIZE) or 0,
        param_base=param_base,
        registers=module.get(_REGCOUNT, 0),
        stack_bytes=module.get(_MIN_STACK_SIZE, 0),
        frame_bytes=module.get(_FRAME_SIZE, 0),
        static_smem=(shared or 0) - reserved,
        smem_reserved=reserved,
        reqntid=dim3(_REQNTID),
        max_threads=dim3(_MAX_THREADS),
        max_registers=scalar(_MAXREG_COUNT),
        cluster_dims=dim3(_CTA_PER_CLUSTER),
        explicit_cluster=_EXPLICIT_CLUSTER in found,
        max_cluster_rank=scalar(_MAX_CLUSTER_RANK),
    )


def _arch(data: bytes, flags: int, compat: _Section | None) -> Arch:
    if data[8] >= 8:  # ELF ABI version 8 (ptxas 12.7+ seen)
        sm = flags >> 8 & 0xFF
        records = _records(compat) if compat is not None else iter(())
        accel = any(r[0] == _COMPAT_ACCELERATOR and _scalar(r, ".nv.compat") for r in records)
    else:
        sm = flags & 0xFF
        accel = bool(flags & 0x800) and sm >= 90
    if sm < 10:
        raise CubinError(f"e_flags 0x{flags:x} (ELF ABI version {data[8]}) names no SM version")
    return Arch(sm // 10, sm % 10, "a" if accel else "")


_RELEASE = re.compile(rb"release (\d+\.\d+)")


def _toolkit(data: bytes, by_name: dict[str, _Section], api_version: Callable[[], int | None]) -> str | None:
    tkinfo = by_name.get(".note.nv.tkinfo")
    if tkinfo is not None and (m := _RELEASE.search(tkinfo.data)):
        return m.group(1).decode()
    version = _note_toolkit(by_name.get(".note.nv.cuinfo"))
    if version is None and data[8] < 8:  # ABI-7 cubins keep the toolkit in e_version
        version = int(struct.unpack_from("<I", data, 20)[0])
    version = version or api_version()
    return f"{version // 10}.{version % 10}" if version and version > 1 else None


def _note_toolkit(section: _Section | None) -> int | None:
    """The toolkit field (10*major+minor) of the NVIDIA note in .note.nv.cuinfo, if there is one."""
    if section is None or section.type != _SHT_NOTE or len(section.data) < 12:
        return None
    namesz, descsz, _ = struct.unpack_from("<III", section.data)
    desc = 12 + (namesz + 3) // 4 * 4
    if descsz < 8 or desc + 8 > len(section.data):
        return None
    return int(struct.unpack_from("<I", section.data, desc + 4)[0]) or None
