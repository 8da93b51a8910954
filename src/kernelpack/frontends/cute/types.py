"""Map CuTe DSL types (MLIR type spellings and numeric classes) onto kernelpack's ABI model.

A tensor's MLIR type spells its layout exactly as CuTe lowers it: ``!cute.memref<f32, gmem, align<16>,
"(?,?{i64},64):(?{i64},1,?)">`` has a dynamic 32-bit mode, a dynamic 64-bit mode and a static one; each ``?`` becomes
a struct field of its own width, static modes vanish. That is why kernelpack reads widths from the type and not
from ``use_32bit_stride`` (which is all CuTe's own header generator looks at).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...core.abi import DType, Field, Pointer, Scalar, Struct, TensorSpec
from ...core.errors import CompileError

_MLIR_SCALARS: dict[str, DType] = {
    "i1": DType.bool, "i8": DType.i8, "i16": DType.i16, "i32": DType.i32, "i64": DType.i64,
    "ui8": DType.u8, "ui16": DType.u16, "ui32": DType.u32, "ui64": DType.u64,
    "f16": DType.f16, "bf16": DType.bf16, "f32": DType.f32, "f64": DType.f64,
}

# cutlass numeric class name -> dtype (MLIR integer types carry no sign; the DSL class does)
_NUMERIC_CLASSES: dict[str, DType] = {
    "Boolean": DType.bool, "Int8": DType.i8, "Int16": DType.i16, "Int32": DType.i32, "Int64": DType.i64,
    "Uint8": DType.u8, "Uint16": DType.u16, "Uint32": DType.u32, "Uint64": DType.u64,
    "Float16": DType.f16, "BFloat16": DType.bf16, "Float32": DType.f32, "Float64": DType.f64,
    "Float8E4M3FN": DType.f8e4m3, "Float8E5M2": DType.f8e5m2,
}
# the MLIR fp8 element types that are NVIDIA's formats (elements only: a scalar of them has no C type)
_MLIR_FP8: dict[str, DType] = {"f8E4M3FN": DType.f8e4m3, "f8E5M2": DType.f8e5m2}

_COORD_TENSOR = re.compile(r'^!cute\.coord_tensor<\s*"(.*?)"\s*,\s*"(.*)"\s*>$')
_BASIS_LEAF = re.compile(r"(\?(?:\{[^}]*\})?|-?\d+)(?:@\d+)*")  # a stride leaf of a coordinate tensor: 1024@0
# layout-like DSL types that lower to no kernel parameter when every leaf is static (no "?" in the spelling)
_STATIC_KINDS = ("!cute.tiled_copy<", "!cute.tiled_mma<", "!cute.layout<", "!cute.coord_tensor<", "!cute.int_tuple<",
                 "!cute.shape<", "!cute.stride<", "!cute.tile<")
_MEMREF = re.compile(r'^!cute\.memref<\s*([^,]+?)\s*,\s*(\w+)\s*(?:,\s*align<(\d+)>)?\s*,\s*"(.*)"\s*>$')
_PTR = re.compile(r"^!cute\.ptr<\s*([^,>]+?)\s*,\s*(\w+)\s*(?:,\s*align<(\d+)>)?\s*>$")
_LEAF = re.compile(r"\?(?:\{([^}]*)\})?|-?\d+")
_SPACES = {"gmem": "global", "smem": "shared", "generic": "generic", "cmem": "const"}
STREAM_TYPES = ("!cuda.stream",)


def mlir_ir() -> Any:
    """CuTe's MLIR Python bindings (``cutlass._mlir.ir``), imported lazily and untyped."""
    import importlib

    return importlib.import_module("cutlass._mlir.ir")


def numeric_dtype(cls: object) -> DType | None:
    """The dtype of a cutlass numeric class (``cutlass.Int32``) or instance; None for anything else."""
    klass = cls if isinstance(cls, type) else type(cls)
    for k in getattr(klass, "__mro__", ()):
        if k.__name__ in _NUMERIC_CLASSES and k.__module__.startswith("cutlass"):
            return _NUMERIC_CLASSES[k.__name__]
    return None


def element_dtype(spelling: str) -> DType:
    """An element or scalar MLIR type; NVIDIA's fp8 formats are f8e4m3/f8e5m2, other 8-bit and narrower float formats
    (f8E8M0FNU scales, fnuz variants, f6, f4) are carried as raw bytes (u8)."""
    s = spelling.strip()
    if s in _MLIR_SCALARS:
        return _MLIR_SCALARS[s]
    if s in _MLIR_FP8:
        return _MLIR_FP8[s]
    if s.startswith(("f8", "f6", "f4", "!cute.f8", "f4E2M1")):
        return DType.u8
    raise CompileError(f"MLIR type {spelling!r} has no kernelpack dtype")


@dataclass(frozen=True)
class Mode:
    """One flattened mode of a layout: a static value, or dynamic with a width."""

    static: int | None
    width: int = 32
    divisibility: int = 1


def parse_modes(text: str) -> tuple[Mode, ...]:
    """Leaves of a CuTe shape or stride spelling, flattened in order: ``(?,(4,?{i64 div=16}))``."""
    out = []
    for m in _LEAF.finditer(text):
        tok = m.group(0)
        if not tok.startswith("?"):
            out.append(Mode(int(tok)))
            continue
        width, div = 32, 1
        for part in (m.group(1) or "").split():
            if part in ("i64", "i32"):
                width = int(part[1:])
            elif part.startswith("div="):
                div = int(part[4:])
        out.append(Mode(None, width, div))
    return tuple(out)


def split_layout(layout: str) -> tuple[str, str]:
    """``"(?,?):(?{i64},1)"`` -> shape and stride spellings (the top-level ``:``)."""
    depth = 0
    for i, ch in enumerate(layout):
        depth += ch == "("
        depth -= ch == ")"
        if ch == ":" and depth == 0:
            return layout[:i], layout[i + 1:]
    raise CompileError(f"CuTe layout {layout!r} has no ':' between shape and stride")


def tensor_spec(type_text: str) -> tuple[TensorSpec, str]:
    """TensorSpec and address space of a ``!cute.memref`` spelling."""
    m = _MEMREF.match(type_text.strip())
    if not m:
        raise CompileError(f"not a CuTe tensor type: {type_text}")
    elem, space, align, layout = m.groups()
    shape_text, stride_text = split_layout(layout)
    shape, stride = parse_modes(shape_text), parse_modes(stride_text)
    if len(shape) != len(stride):
        raise CompileError(f"CuTe layout {layout!r}: shape has {len(shape)} leaves, stride {len(stride)}")
    spec = TensorSpec(
        dtype=element_dtype(elem),
        shape=tuple(md.static for md in shape),
        stride=tuple(md.static for md in stride),
        shape_dtype=_width("shape", layout, shape),
        stride_dtype=_width("stride", layout, stride),
        align=int(align) if align else element_dtype(elem).size,
    )
    return spec, _SPACES.get(space, "global")


def _width(what: str, layout: str, modes: tuple[Mode, ...]) -> DType:
    widths = {md.width for md in modes if md.static is None}
    if len(widths) > 1:
        # CuTe nests shapes and strides as separate LLVM structs; mixed widths would add padding a flat C struct
        # does not have. Refuse rather than guess.
        raise CompileError(f"CuTe layout {layout!r}: dynamic {what} modes mix 32- and 64-bit widths; use one width "
                           f"per tensor (SymInt(width=...))")
    return DType.i64 if widths == {64} else DType.i32


def tensor_checks(type_text: str) -> tuple[tuple[str, int], ...]:
    """Run-time contracts a tensor's MLIR type states: ``(field, divisor)`` for the data pointer's assumed byte
    alignment and each dynamic mode declared ``div=N``. CuTe compiles code that relies on them."""
    m = _MEMREF.match(type_text.strip())
    if not m:
        return ()
    elem, _space, align, layout = m.groups()
    out: list[tuple[str, int]] = []
    if align and int(align) > element_dtype(elem).size:
        out.append(("data", int(align)))
    shape_text, stride_text = split_layout(layout)
    for kind, modes in (("shape", parse_modes(shape_text)), ("stride", parse_modes(stride_text))):
        out += [(f"{kind}{i}", md.divisibility) for i, md in enumerate(modes)
                if md.static is None and md.divisibility > 1]
    return tuple(out)


def tensor_struct_name(spec: TensorSpec) -> str:
    """A readable, deterministic C struct name for a tensor descriptor, shape then stride, modes joined by ``x``:
    ``tensor_f32_dxd_Dx1`` (d = dynamic i32, D = dynamic i64, digits = static)."""
    def code(modes: tuple[int | None, ...], dt: DType) -> str:
        return "x".join(("D" if dt == DType.i64 else "d") if s is None else str(s) for s in modes)

    return f"tensor_{spec.dtype.value}_{code(spec.shape, spec.shape_dtype)}_{code(spec.stride, spec.stride_dtype)}"


def is_static(type_text: str) -> bool:
    """Whether a DSL value of this type is compile-time only: a layout-like value (tiled copy or MMA, layout, shape,
    coordinate tensor) with no dynamic leaf lowers to no kernel parameter. (TMA atoms carry a descriptor: never.)
    Every derived ABI is verified against the cubin's parameter table, which would catch a wrong guess."""
    t = type_text.strip()
    return t.startswith(_STATIC_KINDS) and "?" not in t and "tma" not in t


def coord_tensor_struct(type_text: str) -> Struct:
    """A coordinate (identity) tensor with dynamic leaves, ``!cute.coord_tensor<"(0,0)", "((1024),(?,?)):((1@0),
    (1024@0,1@1))">``: a struct of its dynamic leaves, as CuTe lowers it (``shape0, shape1`` here). Only one of its
    coordinate, shape and stride may be dynamic: with several, the order of the lowered fields is not known here."""
    m = _COORD_TENSOR.match(type_text.strip())
    if not m:
        raise CompileError(f"cannot read CuTe coordinate tensor type {type_text}")
    coord_text, layout = m.groups()
    shape_text, stride_text = split_layout(layout)
    stride = parse_modes(",".join(x.group(1) for x in _BASIS_LEAF.finditer(stride_text)))
    groups = [(kind, [md for md in modes if md.static is None])
              for kind, modes in (("coord", parse_modes(coord_text)), ("shape", parse_modes(shape_text)),
                                  ("stride", stride))]
    dynamic = [(kind, modes) for kind, modes in groups if modes]
    if len(dynamic) != 1:
        raise CompileError(f"CuTe coordinate tensor {type_text}: dynamic leaves in its "
                           f"{' and '.join(k for k, _ in dynamic)} have no known C layout in kernelpack")
    kind, modes = dynamic[0]
    widths = {md.width for md in modes}
    if len(widths) > 1:
        raise CompileError(f"CuTe coordinate tensor {type_text}: its dynamic {kind} mixes 32- and 64-bit leaves")
    dt = DType.i64 if widths == {64} else DType.i32
    code = "x".join("D" if dt == DType.i64 else "d" for _ in modes)
    return Struct(f"coord_tensor_{kind}_{code}", tuple(Field(f"{kind}{i}", Scalar(dt)) for i in range(len(modes))))


def abi_type(type_text: str, dtype_hint: DType | None = None) -> Scalar | Pointer | Struct:
    """The ABI type of one flattened DSL value, from its MLIR spelling (``dtype_hint`` restores signedness)."""
    t = type_text.strip()
    if t.startswith("!cute.coord_tensor<"):
        return coord_tensor_struct(t)
    if t.startswith("!cute.memref<"):
        spec, _space = tensor_spec(t)
        return Struct.tensor_descriptor(tensor_struct_name(spec), spec)
    if t.startswith("!cute.ptr<"):
        m = _PTR.match(t)
        if not m:
            raise CompileError(f"cannot read CuTe pointer type {t}")
        return Pointer(element_dtype(m.group(1)), space=_SPACES.get(m.group(2), "global"))
    if t in STREAM_TYPES or t.startswith("!llvm.ptr"):
        return Pointer(None)
    if t in _MLIR_SCALARS:
        base = _MLIR_SCALARS[t]
        if dtype_hint is not None and dtype_hint.size == base.size and dtype_hint.is_float == base.is_float:
            return Scalar(dtype_hint)
        return Scalar(base)
    if t in _MLIR_FP8:
        raise CompileError(f"a scalar of MLIR type {t}: fp8 ({_MLIR_FP8[t].value}) is an element type of tensors and "
                           f"pointers only; pass the value as Float32 and convert it in the kernel")
    raise CompileError(f"DSL values of MLIR type {t} have no C form in kernelpack (tensors, pointers, scalars and "
                       f"streams do)")
