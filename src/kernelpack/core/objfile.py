"""Check a CuTe ``export_to_c`` object before linking it: ELF64 relocatable for this host, a known object format
version, and imports the kernelpack shim can satisfy.

The object defines ``<prefix>_version`` (a C string, ``"1.1"`` for nvidia-cutlass-dsl 4.x), ``<prefix>_kernel_info``
(JSON), the host entry ``_mlir_<prefix>__mlir_ciface_<function>`` (packed: ``void(void** args, int32_t n)``) and
``_mlir_<prefix>_cuda_init``/``_mlir_<prefix>_cuda_load_to_device``. A version kernelpack was not written against
may change any of these, so it is refused.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from ._reprs import clip, listing
from .errors import KernelpackError

SUPPORTED_VERSIONS = ("1.1",)

# What the shim implements (shim.c); anything else the object imports from CUDA is refused.
SHIM_SYMBOLS = frozenset({
    "_cudaLibraryLoadData", "_cudaLibraryGetKernel", "_cudaLaunchKernelEx", "_cudaLaunchKernel", "_cudaGetDevice",
    "_cudaDeviceGetAttribute", "_cudaFuncSetAttribute", "_cudaKernelSetAttributeForDevice", "_cuKernelGetAttribute",
    "_cuTensorMapEncodeTiled", "_cudaOccupancyMaxActiveBlocksPerMultiprocessor",
})
# libc/libm symbols the object's host code may use
LIBC_OK = frozenset({"printf", "puts", "abort", "memcpy", "memset", "memmove", "malloc", "free", "fprintf", "stderr",
                     "_GLOBAL_OFFSET_TABLE_", "__assert_fail", "fflush", "exit"})

_EM = {62: "x86_64", 183: "aarch64"}


class ObjectFormatError(KernelpackError):
    """A CuTe export object kernelpack cannot link (format version, architecture, or imports)."""


@dataclass(frozen=True)
class ObjectInfo:
    machine: str
    version: str
    defined: frozenset[str]
    undefined: frozenset[str]
    kernel_info: dict[str, dict]

    def __repr__(self) -> str:
        return (f"<ObjectInfo {self.machine} format {clip(self.version, 16)}: {len(self.defined)} symbols defined, "
                f"{len(self.undefined)} imported ({listing(sorted(self.undefined), 120)})>")

    def entry(self, prefix: str) -> str:
        cands = sorted(s for s in self.defined if s.startswith(f"_mlir_{prefix}__mlir_ciface_"))
        if len(cands) != 1:
            raise ObjectFormatError(f"object for prefix {prefix!r}: expected one packed entry "
                                    f"_mlir_{prefix}__mlir_ciface_*, found {cands}")
        return cands[0]


def _u(fmt: str, data: bytes, off: int) -> tuple:
    try:
        return struct.unpack_from("<" + fmt, data, off)
    except struct.error:
        raise ObjectFormatError(f"truncated ELF object (reading at offset {off})") from None


def read_object(data: bytes, prefix: str, *, host_machine: str = "x86_64") -> ObjectInfo:
    """Parse and check a CuTe export object; ``prefix`` is the ``function_prefix``/file name it was exported with."""
    if data[:4] != b"\x7fELF" or len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise ObjectFormatError("not a little-endian ELF64 object (CuTe export_to_c writes one)")
    e_type, e_machine = _u("HH", data, 16)
    if e_type != 1:
        raise ObjectFormatError(f"ELF type {e_type} is not a relocatable object (ET_REL)")
    machine = _EM.get(e_machine, f"EM {e_machine}")
    if machine != host_machine:
        raise ObjectFormatError(f"object is for {machine}, the library is built for {host_machine}")
    (shoff,) = _u("Q", data, 40)
    shentsize, shnum = _u("HH", data, 58)
    sections = [_u("IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    symtab = next((s for s in sections if s[1] == 2), None)
    if symtab is None:
        raise ObjectFormatError("object has no symbol table")
    strtab = sections[symtab[6]]
    strings = data[strtab[4]:strtab[4] + strtab[5]]
    defined, undefined, values = set(), set(), {}
    for off in range(symtab[4], symtab[4] + symtab[5], 24):
        st_name, st_info, _other, st_shndx, st_value, st_size = _u("IBBHQQ", data, off)
        name = strings[st_name:strings.index(b"\0", st_name)].decode()
        if not name or st_info >> 4 == 0:  # local
            continue
        if st_shndx == 0:
            undefined.add(name)
        else:
            defined.add(name)
            if st_shndx < len(sections) and sections[st_shndx][1] == 1:  # PROGBITS
                sec = sections[st_shndx]
                values[name] = data[sec[4] + st_value:sec[4] + st_value + st_size]
    version = _cstring(values, f"{prefix}_version")
    if version not in SUPPORTED_VERSIONS:
        raise ObjectFormatError(f"CuTe export object format version {version!r} is not supported (kernelpack knows "
                                f"{', '.join(SUPPORTED_VERSIONS)}); use nvidia-cutlass-dsl 4.8.x or upgrade kernelpack")
    try:
        kernel_info = json.loads(_cstring(values, f"{prefix}_kernel_info"))
    except ValueError:
        raise ObjectFormatError(f"object symbol {prefix}_kernel_info is not JSON") from None
    for sym in (f"_mlir_{prefix}_cuda_init", f"_mlir_{prefix}_cuda_load_to_device"):
        if sym not in defined:
            raise ObjectFormatError(f"object has no {sym} (format {version} always defines it)")
    info = ObjectInfo(machine, version, frozenset(defined), frozenset(undefined), kernel_info)
    info.entry(prefix)
    unknown = sorted(s for s in undefined if s not in SHIM_SYMBOLS and s not in LIBC_OK)
    if unknown:
        raise ObjectFormatError(f"object imports {unknown}, which kernelpack's driver shim does not provide")
    return info


def _cstring(values: dict[str, bytes], name: str) -> str:
    raw = values.get(name)
    if raw is None:
        raise ObjectFormatError(f"object has no {name} symbol: not a CuTe DSL export_to_c object, or an unknown "
                                f"format (kernelpack knows {', '.join(SUPPORTED_VERSIONS)})")
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")
