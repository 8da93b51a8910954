"""Recover a kernel launch's grid as a formula of the kernel's own parameters, from the traced IR.

When a ``@cute.jit`` function computes ``grid=[cute.ceil_div(n, 32), ...]`` from the shapes of tensors it passes
straight to the kernel, the grid value's defining ops lead back to those kernel arguments. This module walks
them symbolically and returns, per grid dimension, an expression over kernel parameter fields::

    expr := int | ["arg", param, field-or-null] | [op, expr, expr]      (kernelpack.bundle.artifact.GRID_OPS)

Anything it does not understand (a persistent grid from the SM count, a derived tensor, an unknown op) gives
None: the caller then passes the grid, which is always allowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.launchspec import GRID_OPS, evaluate_grid
from .types import mlir_ir, parse_modes, split_layout

Expr = Any  # int | list (JSON tree), see kernelpack.core.launchspec.evaluate_grid


class _Unknown(Exception):
    pass


def grid_rule(grid: Sequence[Any], arg_values: Sequence[tuple[Any, str, Any]]) -> tuple[Expr, Expr, Expr] | None:
    """``grid``: the 3 launch values (ints or DSL integers); ``arg_values``: (ir.Value, param name, ABI type) per
    kernel parameter. Returns 3 expressions, or None when any dimension is not a formula of the parameters."""
    try:
        w = _Walker(arg_values)
        out = tuple(_simplify(w.scalar(g)) for g in grid)
    except _Unknown:
        return None
    return out if len(out) == 3 else None  # type: ignore[return-value]


def _simplify(e: Expr) -> Expr:
    if isinstance(e, list) and e[0] in GRID_OPS:
        a, b = _simplify(e[1]), _simplify(e[2])
        if isinstance(a, int) and isinstance(b, int):
            return evaluate_grid((e[0], a, b), {})
        if e[0] in ("mul", "div", "ceil_div") and b == 1:
            return a
        if e[0] == "mul" and a == 1:
            return b
        return [e[0], a, b]
    return e


class _Walker:
    def __init__(self, arg_values: Sequence[tuple[Any, str, Any]]) -> None:
        self.args = list(arg_values)

    def scalar(self, v: Any) -> Expr:
        if isinstance(v, int):
            return v
        flat = self.value(_raw(v))
        if len(flat) != 1:
            raise _Unknown
        return flat[0]

    def value(self, v: Any) -> list[Expr]:
        """A value as a flat list of leaf expressions (scalars are 1-element lists)."""
        static = _static_leaves(str(v.type))
        if static is not None:
            return static
        for raw, name, t in self.args:
            if _same(v, raw):
                if getattr(t, "tensor", None) is not None:
                    return [("tensor", name, t.tensor)]
                return [["arg", name, None]]
        owner = v.owner
        if not hasattr(owner, "operands") or not hasattr(owner, "name"):
            raise _Unknown  # a block argument that is not a kernel argument
        return self.op(owner, v)

    def op(self, op: Any, v: Any) -> list[Expr]:
        name = op.name
        ins = [_raw(o) for o in op.operands]
        if name in ("cute.get_layout", "cute.get_shape", "cute.get_stride"):
            (x,) = [self.value(i) for i in ins]
            return self._layout_part(x, name)
        if name == "cute.get_leaves":
            (x,) = [self.value(i) for i in ins]
            k = _result_number(op, v)
            return [x[k]] if len(op.results) > 1 else x
        if name in ("cute.to_int_tuple", "cute.get_scalars", "arith.index_cast", "arith.extsi", "arith.extui",
                    "arith.trunci", "arith.index_castui"):
            return self.value(ins[0])
        if name == "cute.make_int_tuple":
            dyn = [e for i in ins for e in self.value(i)]
            modes = _type_modes(str(v.type))
            if modes is None or sum(m is None for m in modes) != len(dyn):
                raise _Unknown
            it = iter(dyn)
            return [next(it) if m is None else m for m in modes]
        binop = _BINOPS.get(name)
        if binop is not None:
            a, b = (self.value(i) for i in ins)
            if len(b) == 1 and len(a) > 1:
                b = b * len(a)
            if len(a) != len(b):
                raise _Unknown
            return [[binop, x, y] for x, y in zip(a, b)]
        if name == "arith.constant":
            return [int(str(op.attributes["value"]).split(":")[0].strip())]
        raise _Unknown

    def _layout_part(self, x: list[Expr], name: str) -> list[Expr]:
        if len(x) == 1 and isinstance(x[0], tuple) and x[0][0] == "tensor":
            _, pname, spec = x[0]
            if name == "cute.get_layout":
                return [("layout", pname, spec)]
            raise _Unknown
        if len(x) == 1 and isinstance(x[0], tuple) and x[0][0] == "layout":
            _, pname, spec = x[0]
            kind = "shape" if name == "cute.get_shape" else "stride"
            modes = spec.shape if kind == "shape" else spec.stride
            return [["arg", pname, f"{kind}{i}"] if m is None else m for i, m in enumerate(modes)]
        raise _Unknown


_BINOPS = {
    "cute.tuple_mul": "mul", "cute.tuple_add": "add", "cute.tuple_sub": "sub", "cute.tuple_div": "div",
    "cute.ceil_div": "ceil_div", "cute.tuple_max": "max", "cute.tuple_min": "min",
    "arith.muli": "mul", "arith.addi": "add", "arith.subi": "sub", "arith.divsi": "div", "arith.divui": "div",
    "arith.ceildivsi": "ceil_div", "arith.ceildivui": "ceil_div", "arith.maxsi": "max", "arith.minsi": "min",
}


def _raw(v: Any) -> Any:
    """The ir.Value behind a DSL object (DSL integers and tensors wrap one)."""
    ir = mlir_ir()

    if isinstance(v, ir.Value):
        return v
    if hasattr(v, "ir_value"):
        return v.ir_value()
    if hasattr(v, "__extract_mlir_values__"):
        vals = v.__extract_mlir_values__()
        if len(vals) == 1:
            return vals[0]
    raise _Unknown


def _same(a: Any, b: Any) -> bool:
    """Identity of two IR values (DSL value classes overload ``==`` to emit a comparison op)."""
    ir = mlir_ir()

    return bool(ir.Value.__eq__(ir.Value(a), ir.Value(b)))


def _result_number(op: Any, v: Any) -> int:
    for i, r in enumerate(op.results):
        if _same(r, v):
            return i
    raise _Unknown


def _type_modes(type_text: str) -> list[int | None] | None:
    """Leaves of ``!cute.int_tuple<"(?,4)">``/``!cute.shape<...>``/``!cute.tile<"32:1">`` (a tile's shape)."""
    if "<\"" not in type_text:
        return None
    body = type_text.split('<"', 1)[1].rsplit('">', 1)[0]
    if type_text.startswith("!cute.tile") or type_text.startswith("!cute.layout"):
        body = split_layout(body)[0] if ":" in body else body
    return [m.static for m in parse_modes(body)]


def _static_leaves(type_text: str) -> list[Expr] | None:
    if type_text.startswith(("!cute.layout", "!cute.memref")):
        return None
    if type_text.startswith("!cute.tile"):
        modes = _type_modes(type_text)
        return modes if modes is not None and None not in modes else None  # type: ignore[return-value]
    if type_text.startswith(("!cute.int_tuple", "!cute.shape", "!cute.stride", "!cute.coord")):
        modes = _type_modes(type_text)
        if modes is not None and None not in modes:
            return modes  # type: ignore[return-value]
    return None
