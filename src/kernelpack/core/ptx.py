"""What PTX text says about its kernels, read without a compiler: the target arch and each ``.entry``'s parameters.

PTX loses what the cubin's parameter table keeps (signedness, a struct's layout), but it does fix each kernel
parameter's size: ``.param .u64 p`` is 8 bytes, ``.param .align 8 .b8 p[16]`` 16. :func:`verify_ptx_abi` checks a
typed ABI against that as far as it goes (count and sizes), the PTX counterpart of
:func:`kernelpack.core.verify.verify_abi`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .abi import Abi
from .arch import Arch
from .errors import AbiMismatch, KernelpackError

_WIDTH = {"8": 1, "16": 2, "32": 4, "64": 8, "16x2": 4}
_TYPE = re.compile(r"^\.(?:[usbf](8|16|32|64)|f16x2|bf16x2|bf16)$")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$%][\w$%]*)\s*(\()?")
_TARGET = re.compile(r"^\s*\.target\s+(sm_\d+[af]?)", re.M)
_VERSION = re.compile(r"^\s*\.version\s+(\d+\.\d+)", re.M)


@dataclass(frozen=True)
class PtxParam:
    """One ``.param`` of a kernel entry."""

    name: str
    size: int  # bytes
    align: int  # the ``.align`` given, else the element's width


def ptx_target(text: str) -> Arch:
    """The arch of ``.target sm_90a`` (the first target named); KernelpackError without one."""
    m = _TARGET.search(_COMMENTS.sub(" ", text))
    if m is None:
        raise KernelpackError("PTX without a .target sm_XY directive")
    return Arch.parse(m.group(1))


def ptx_isa_version(text: str) -> str | None:
    """The PTX ISA version of ``.version 8.7`` (None without one): a driver JIT-compiles only the versions its CUDA
    release knows (CUDA 13.0: up to 9.0)."""
    m = _VERSION.search(_COMMENTS.sub(" ", text))
    return m.group(1) if m else None


def ptx_entries(text: str) -> dict[str, tuple[PtxParam, ...]]:
    """Each ``.entry`` (kernel) of the PTX text with its parameters, in declaration order."""
    code = _COMMENTS.sub(" ", text)
    out: dict[str, tuple[PtxParam, ...]] = {}
    for m in _ENTRY.finditer(code):
        params: list[PtxParam] = []
        if m.group(2):
            end = code.find(")", m.end())
            if end < 0:
                raise KernelpackError(f"PTX entry {m.group(1)}: unterminated parameter list")
            for decl in code[m.end():end].split(","):
                if decl.strip():
                    params.append(_param(m.group(1), decl))
        out[m.group(1)] = tuple(params)
    return out


def _param(entry: str, decl: str) -> PtxParam:
    tokens = decl.split()
    if not tokens or tokens[0] != ".param":
        raise KernelpackError(f"PTX entry {entry}: cannot read parameter {decl.strip()!r}")
    align = width = 0
    name, ptr = "", False
    i = 1
    while i < len(tokens):
        t = tokens[i]
        if t == ".ptr":
            ptr = True  # an .align after it is the pointee's
        elif t == ".align" and i + 1 < len(tokens) and tokens[i + 1].isdigit():
            align = align if ptr else int(tokens[i + 1])
            i += 1
        elif _TYPE.match(t):
            width = _WIDTH.get(re.sub(r"^\.[a-z]+", "", t), 2)
        elif not t.startswith("."):
            name = t
        i += 1
    m = re.fullmatch(r"([\w$%]+)(?:\[(\d+)\])?", name)
    if not width or m is None:
        raise KernelpackError(f"PTX entry {entry}: cannot read parameter {decl.strip()!r}")
    count = int(m.group(2)) if m.group(2) else 1
    return PtxParam(m.group(1), width * count, align or width)


def verify_ptx_abi(kernel: str, abi: Abi, entry: str, params: tuple[PtxParam, ...], arch: Arch) -> None:
    """Raise AbiMismatch unless ``abi`` has the PTX entry's parameter count and sizes (what PTX fixes)."""
    where = f"kernel {kernel} ({arch.ptx_name} PTX)"
    if len(abi.params) != len(params):
        raise AbiMismatch(f"{where}: the ABI has {len(abi.params)} parameters ({abi.describe() or 'none'}) but the PTX "
                          f"entry {entry} has {len(params)} (sizes {[p.size for p in params]})")
    for i, (p, q) in enumerate(zip(abi.params, params)):
        if p.type.size != q.size:
            raise AbiMismatch(f"{where}: parameter {i} '{p.name}' ({p.type.c_type}): expected {p.type.size} bytes, "
                              f"the PTX has {q.size} bytes")
