"""Read what CuTe actually lowered: the host function's LLVM signature and constant launch facts.

``compiled.ir_module`` is LLVM dialect after ``cute.compile``. The C-interface wrapper
``_mlir_ciface_<function>`` takes one LLVM value per flattened argument (a tensor is
``!llvm.struct<(ptr<1>, struct<(struct<(i32, i32)>, i64)>)>``); its byte layout, leaf by leaf, is the ground truth
a derived ABI is checked against: a field of the wrong width is caught even where the total size agrees.
"""

from __future__ import annotations

import re
from typing import Any

from ...core.abi import Opaque, ParamType, Pointer, Scalar, Struct, align_up
from ...core.errors import AbiMismatch, CompileError
from .types import mlir_ir

Leaves = tuple[tuple[int, int, str], ...]  # (offset, size, kind) with kind in i/f/p/b

_SCALAR = {"i1": (1, "i"), "i8": (1, "i"), "i16": (2, "i"), "i32": (4, "i"), "i64": (8, "i"),
           "f16": (2, "f"), "bf16": (2, "f"), "f32": (4, "f"), "f64": (8, "f")}


def split_top(text: str, sep: str = ",") -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        depth += ch in "(<["
        depth -= ch in ")>]"
        if ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def llvm_layout(t: str) -> tuple[int, int, Leaves]:
    """Size, alignment and scalar leaves of an LLVM type spelling (x86-64 data layout)."""
    t = t.strip().removeprefix("!llvm.")
    if t in _SCALAR:
        size, kind = _SCALAR[t]
        return size, size, ((0, size, kind),)
    if t == "ptr" or t.startswith("ptr<"):
        return 8, 8, ((0, 8, "p"),)
    m = re.fullmatch(r"array<(\d+) x (.+)>", t)
    if m:
        n = int(m.group(1))
        size, align, leaves = llvm_layout(m.group(2))
        if set(k for _, _, k in leaves) == {"i"} and size == 1:
            return n, 1, ((0, n, "b"),)  # byte arrays (CUtensorMap) compare as opaque bytes
        return size * n, align, tuple((off + i * size, s, k) for i in range(n) for off, s, k in leaves)
    m = re.fullmatch(r"struct<(?:packed\s*)?\((.*)\)>", t)
    if m:
        cur, align, out = 0, 1, []
        for ft in split_top(m.group(1)):
            size, a, leaves = llvm_layout(ft)
            cur = align_up(cur, a)
            out += [(cur + off, s, k) for off, s, k in leaves]
            cur += size
            align = max(align, a)
        return align_up(cur, align), align, tuple(out)
    raise CompileError(f"cannot lay out LLVM type {t!r}")


def abi_layout(t: ParamType) -> tuple[int, Leaves]:
    if isinstance(t, Scalar):
        return t.size, ((0, t.size, "f" if t.dtype.is_float else "i"),)
    if isinstance(t, Pointer):
        return 8, ((0, 8, "p"),)
    if isinstance(t, Opaque):
        return t.size, ((0, t.size, "b"),)
    assert isinstance(t, Struct)
    out: list[tuple[int, int, str]] = []
    for f, off in zip(t.fields, t.field_offsets):
        out += [(off + o, s, k) for o, s, k in abi_layout(f.type)[1]]
    return t.size, tuple(out)


def _func_op(ir_module: Any, name: str) -> Any:
    found = []

    def visit(op: Any) -> Any:
        ir = mlir_ir()

        if op.name == "llvm.func" and op.attributes["sym_name"].value == name:
            found.append(op)
        return ir.WalkResult.ADVANCE

    ir_module.operation.walk(visit)
    if not found:
        raise CompileError(f"the compiled module has no function {name}")
    return found[0]


def host_arg_types(ir_module: Any, function_name: str) -> list[str]:
    """LLVM argument types of the C-interface wrapper CuTe generated for the ``@cute.jit`` function."""
    op = _func_op(ir_module, f"_mlir_ciface_{function_name}")
    ftype = str(op.attributes["function_type"])  # !llvm.func<i32 (struct<...>, i32)>
    m = re.fullmatch(r"!llvm\.func<\s*(.+?)\s*\((.*)\)\s*>", ftype, re.S)
    if not m:
        raise CompileError(f"cannot read the host function type {ftype}")
    if m.group(1) != "i32":
        raise CompileError(f"host function {function_name} returns {m.group(1)}, expected i32 (a CUDA status)")
    return split_top(m.group(2))


def check_host_abi(function: str, names: list[str], types: list[ParamType], llvm_types: list[str]) -> None:
    """Raise AbiMismatch unless each derived parameter has exactly the byte layout CuTe lowered."""
    if len(types) != len(llvm_types):
        raise AbiMismatch(f"host function {function}: derived {len(types)} parameters ({', '.join(names)}) but CuTe "
                          f"lowered {len(llvm_types)}: {llvm_types}")
    for i, (n, t, lt) in enumerate(zip(names, types, llvm_types)):
        size, leaves = abi_layout(t)
        lsize, _align, lleaves = llvm_layout(lt)
        if (size, leaves) != (lsize, lleaves):
            raise AbiMismatch(f"host function {function}: parameter {i} '{n}' ({t.c_type}) has layout "
                              f"{size} bytes {list(leaves)}, CuTe lowered {lt} = {lsize} bytes {list(lleaves)}")


_GEP_SMEM = re.compile(r"(%\d+) = llvm\.getelementptr (%\d+)\[0, 2\] : \(!llvm\.ptr\) -> !llvm\.ptr, "
                       r"!llvm\.struct<\(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32\)>")


def launch_smem_bytes(ir_text: str, function_name: str) -> int | None:
    """The constant dynamic shared memory bytes of the single launch in the host function, if it is constant."""
    start = ir_text.find(f"llvm.func @{function_name}(")
    if start < 0:
        return None
    body = ir_text[start:ir_text.find("\n  }\n", start)]
    geps = _GEP_SMEM.findall(body)
    if len(geps) != 1:
        return None
    store = re.search(rf"llvm\.store (%\d+), {re.escape(geps[0][0])} : i64", body)
    if not store:
        return None
    const = re.search(rf"{re.escape(store.group(1))} = llvm\.mlir\.constant\((\d+) : i64\)", body)
    return int(const.group(1)) if const else None
