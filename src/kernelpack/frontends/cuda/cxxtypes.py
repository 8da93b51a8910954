"""C/C++ parameter types to ABI types: from demangled symbols, and from declaration text.

Only what a kernel can take by value is mapped: integer/float scalars of exact width, half types, pointers,
``CUtensorMap`` and other structs (as opaque bytes whose size comes from the cubin).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...core.abi import Abi, DType, Opaque, Param, ParamType, Pointer, Scalar
from ...core.cubin import CubinKernel
from ...core.errors import AbiError
from .demangle import Builtin, CxxType, Named, PointerTo, Qualified, spell

# C/C++ spellings (builtins as the demangler spells them, stdint and CUDA names) -> dtype.
# CUDA device code is LP64 on x86-64/aarch64 hosts: long is 64 bits; plain char is signed.
SCALAR_NAMES: dict[str, DType] = {
    "bool": DType.bool, "_Bool": DType.bool,
    "char": DType.i8, "signed char": DType.i8, "unsigned char": DType.u8,
    "short": DType.i16, "short int": DType.i16, "signed short": DType.i16, "unsigned short": DType.u16,
    "unsigned short int": DType.u16,
    "int": DType.i32, "signed": DType.i32, "signed int": DType.i32, "unsigned": DType.u32, "unsigned int": DType.u32,
    "long": DType.i64, "long int": DType.i64, "signed long": DType.i64, "unsigned long": DType.u64,
    "unsigned long int": DType.u64, "long long": DType.i64, "long long int": DType.i64, "signed long long": DType.i64,
    "unsigned long long": DType.u64, "unsigned long long int": DType.u64,
    "int8_t": DType.i8, "int16_t": DType.i16, "int32_t": DType.i32, "int64_t": DType.i64,
    "uint8_t": DType.u8, "uint16_t": DType.u16, "uint32_t": DType.u32, "uint64_t": DType.u64,
    "size_t": DType.u64, "ptrdiff_t": DType.i64, "intptr_t": DType.i64, "uintptr_t": DType.u64,
    "float": DType.f32, "double": DType.f64,
    "_Float16": DType.f16, "__half": DType.f16, "half": DType.f16, "__nv_half": DType.f16,
    "__bf16": DType.bf16, "__nv_bfloat16": DType.bf16, "nv_bfloat16": DType.bf16,
}
# element types of pointers only (cuda_fp8.h): a by-value __nv_fp8_e4m3 stays a 1-byte opaque struct
ELEMENT_NAMES: dict[str, DType] = {"__nv_fp8_e4m3": DType.f8e4m3, "__nv_fp8_e5m2": DType.f8e5m2}
TENSOR_MAP_NAMES = ("CUtensorMap", "CUtensorMap_st")


def _dtype_of(name: str) -> DType | None:
    return SCALAR_NAMES.get(name.removeprefix("std::").removeprefix("::"))


def _element_of(name: str) -> DType | None:
    """The pointee dtype of a pointer to ``name``: a scalar type's or an fp8 element type's."""
    plain = name.removeprefix("std::").removeprefix("::")
    return SCALAR_NAMES.get(plain) or ELEMENT_NAMES.get(plain)


def opaque_for(name: str, size: int, offset_abs: int | None = None) -> Opaque:
    """An opaque by-value struct of ``size`` bytes (from the cubin).

    Its alignment is not in the cubin: take the largest power of two (<= 16) that divides the size and,
    when known, the absolute constant-bank address the cubin placed it at. ABI verification on every
    arch then confirms the guess; a user-given signature overrides it.
    """
    if name.split("::")[-1] in TENSOR_MAP_NAMES:
        # alignas(64) in CUDA 12's cuda.h, alignas(128) in CUDA 13's: the cubin's placement tells which.
        return Opaque(128, 128 if offset_abs is None or offset_abs % 128 == 0 else 64, "CUtensorMap")
    align = 16
    while align > 1 and (size % align or (offset_abs is not None and offset_abs % align)):
        align //= 2
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name.split("<")[0].split("::")[-1]) or "struct"
    return Opaque(size, align, ident)


def abi_type_from_cxx(t: CxxType, *, size: int | None = None, offset_abs: int | None = None) -> ParamType:
    """Map one demangled parameter type. ``size``/``offset_abs`` (from the cubin) size opaque structs."""
    if isinstance(t, Qualified):  # top-level const on a by-value param does not change the ABI
        return abi_type_from_cxx(t.inner, size=size, offset_abs=offset_abs)
    if isinstance(t, PointerTo):
        inner, const = t.pointee, False
        while isinstance(inner, Qualified):
            const = const or inner.const
            inner = inner.inner
        name = inner.name if isinstance(inner, (Builtin, Named)) else ""
        return Pointer(_element_of(name), const)
    if isinstance(t, Builtin):
        dt = _dtype_of(t.name)
        if dt is None:
            raise AbiError(f"C++ type {t.name!r} has no kernelpack ABI mapping")
        return Scalar(dt)
    if isinstance(t, Named):
        dt = _dtype_of(t.name)
        if dt is not None:
            return Scalar(dt)
        if size is None:
            raise AbiError(f"struct parameter of type {t.name!r} needs its size from the cubin")
        return opaque_for(t.name, size, offset_abs)
    raise AbiError(f"C++ parameter type {t!r} cannot be passed to a kernel")


# ------------------------------------------------------------------ declaration text

_QUALIFIERS = {"__restrict__", "restrict", "__restrict", "volatile", "__grid_constant__", "struct", "class",
               "typename", "register", "__device__", "__constant__"}


def split_params(text: str) -> list[str]:
    """Split a parameter list on top-level commas (template args and parens kept together)."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    last = "".join(cur).strip()
    if last and last != "void":
        out.append(last)
    return out


def parse_decl(decl: str) -> tuple[str, ParamType | None, str]:
    """Parse one parameter declaration into (name, type, base type name).

    ``const float* __restrict__ x`` -> ("x", Pointer(f32, const=True), "float"). The type is None for a
    struct by value (its size is the cubin's). Default values are dropped.
    """
    decl = decl.split("=")[0]
    decl = re.sub(r"__attribute__\s*\(\(.*?\)\)|alignas\s*\(.*?\)", " ", decl)
    tokens = re.findall(r"[A-Za-z_][A-Za-z0-9_:]*|\*|&", decl)
    stars = tokens.count("*")
    if "&" in tokens:
        raise AbiError(f"parameter {decl.strip()!r}: kernels cannot take references")
    words = [t for t in tokens if t not in _QUALIFIERS and t != "*"]
    const_pointee = stars > 0 and "const" in tokens[: tokens.index("*")]
    words = [w for w in words if w != "const"]
    name = ""
    type_words = words
    if len(words) >= 2 and words[-1] not in SCALAR_NAMES and words[-1] not in ("long", "short", "int", "char"):
        name, type_words = words[-1], words[:-1]
    base = " ".join(type_words)
    dt = _dtype_of(base)
    if stars:
        return name, Pointer(_element_of(base), const_pointee), base
    return name, (Scalar(dt) if dt is not None else None), base


def abi_from_params(text: str, ck: CubinKernel, kernel: str) -> Abi:
    """The ABI of a C parameter list (``"float a, const float* x, float* y, int n"``) of the cubin entry ``ck``.

    Scalars and pointers map by their C names; any other type name is a struct passed by value, an opaque blob
    whose size is the cubin's for that parameter (see :func:`opaque_for`). Unnamed parameters are ``p0``, ``p1``...
    AbiError (naming ``kernel``) for a list the cubin cannot size.
    """
    params = []
    for i, decl in enumerate(split_params(text)):
        name, ptype, base = parse_decl(decl)
        name = name or f"p{i}"
        if ptype is None:
            if i >= len(ck.params):
                raise AbiError(f"kernel {kernel}: signature has more parameters than the cubin ({len(ck.params)})")
            kp = ck.params[i]
            ptype = opaque_for(base or "struct", kp.size, ck.param_base + kp.offset)
        params.append(Param(name, ptype))
    return Abi(tuple(params))


def abi_from_cxx(types: Sequence[CxxType], names: Sequence[str], ck: CubinKernel, kernel: str, hint: str) -> Abi:
    """The ABI of C++ parameter types (a demangled symbol, a compiler probe) with their ``names``, sized by the cubin
    entry ``ck`` where a type needs it; a type kernelpack cannot pass is AbiError naming ``kernel``, the parameter
    and ``hint`` (how to give the parameter list instead)."""
    params = []
    for i, (t, n) in enumerate(zip(types, names, strict=True)):
        kp = ck.params[i] if i < len(ck.params) else None
        try:
            ptype = abi_type_from_cxx(t, size=kp.size if kp else None,
                                      offset_abs=ck.param_base + kp.offset if kp else None)
        except AbiError as e:
            raise AbiError(f"kernel {kernel}: parameter {i} '{n}' ({spell(t)}): {e.message}; {hint}") from None
        params.append(Param(n, ptype))
    return Abi(tuple(params))


def declared_param_names(source: str, function: str) -> list[str] | None:
    """Parameter names of ``__global__ ... function(...)`` in the source, or None when not found/ambiguous."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    found: list[list[str]] = []
    for m in re.finditer(r"__global__[^;{}]*?\b" + re.escape(function) + r"\s*\(", code):
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            i += 1
        names = [parse_decl(d)[0] for d in split_params(code[m.end():i - 1])]
        found.append(names)
    if len(found) != 1 or not all(names for names in found[0]):
        return None
    return found[0]
