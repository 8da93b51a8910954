"""Grid formulas from a launch's grid function: ``lambda META: (triton.cdiv(n, META["BLOCK"]),)``.

The function is called with symbolic integers in place of the integer arguments and integer constexprs; arithmetic
on them (``+ - * //``, ``triton.cdiv``) builds kernelpack's grid formula (:mod:`kernelpack.core.launchspec`), with
constexprs kept by name (the build puts each specialization's value in: one formula serves every autotune config).
Anything else it does with them -- compare, ``min``/``max``, ``int()``, read a tensor's shape -- stops the trace: the
grid is then the captured numbers only. A traced formula is kept only where it gives the captured grid back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..core.launchspec import GridExpr, grid_text


class Untraceable(Exception):
    pass


CONST = "const"  # ("const", name): a constexpr by name, replaced by its value when built


class Sym:
    """A symbolic integer: its formula."""

    __slots__ = ("e",)

    def __init__(self, e: Any) -> None:
        self.e = e

    def _op(self, op: str, other: Any, swap: bool = False) -> Sym:
        o = _expr(other)
        a, b = (o, self.e) if swap else (self.e, o)
        return Sym(_simplify((op, a, b)))

    def __add__(self, o: Any) -> Sym:
        return self._op("add", o)

    def __radd__(self, o: Any) -> Sym:
        return self._op("add", o, True)

    def __sub__(self, o: Any) -> Sym:
        return self._op("sub", o)

    def __rsub__(self, o: Any) -> Sym:
        return self._op("sub", o, True)

    def __mul__(self, o: Any) -> Sym:
        return self._op("mul", o)

    def __rmul__(self, o: Any) -> Sym:
        return self._op("mul", o, True)

    def __floordiv__(self, o: Any) -> Sym:
        return self._op("div", o)

    def __rfloordiv__(self, o: Any) -> Sym:
        return self._op("div", o, True)

    def _refuse(self, *a: Any) -> Any:
        raise Untraceable("the grid function does more than + - * // and cdiv with its arguments")

    __bool__ = __index__ = __int__ = __float__ = __lt__ = __le__ = __gt__ = __ge__ = __truediv__ = _refuse
    __rtruediv__ = __mod__ = __rmod__ = __pow__ = __lshift__ = __rshift__ = __and__ = __or__ = __neg__ = _refuse

    def __eq__(self, o: object) -> bool:
        return self._refuse()  # type: ignore[no-any-return]

    __hash__ = None  # type: ignore[assignment]


class _Opaque:
    """A non-integer argument (a tensor): the grid function may pass it on, not look into it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        raise Untraceable(f"the grid function reads {self.name}.{attr}")


def _expr(v: Any) -> Any:
    if isinstance(v, Sym):
        return v.e
    if isinstance(v, bool) or not isinstance(v, int):
        raise Untraceable(f"the grid function computes with {type(v).__name__} {v!r}")
    return int(v)


def _simplify(e: Any) -> Any:
    """``(a + b - 1) // b`` (and ``triton.cdiv``'s ``(a + (b - 1)) // b``) becomes ``ceil_div(a, b)``; constant parts
    are folded."""
    op, a, b = e
    if op == "div" and isinstance(a, tuple) and a[0] == "sub" and a[2] == 1 and isinstance(a[1], tuple) \
            and a[1][0] == "add" and a[1][2] == b:  # (a + b - 1) // b
        return ("ceil_div", a[1][1], b)
    if op == "div" and isinstance(a, tuple) and a[0] == "add" and isinstance(a[2], tuple) and a[2][0] == "sub" \
            and a[2][1] == b and a[2][2] == 1:  # (a + (b - 1)) // b: triton.cdiv
        return ("ceil_div", a[1], b)
    if op == "div" and isinstance(a, tuple) and a[0] == "add" and isinstance(b, int) and a[2] == b - 1:
        return ("ceil_div", a[1], b)  # (a + 255) // 256
    if isinstance(a, int) and isinstance(b, int):
        return {"add": a + b, "sub": a - b, "mul": a * b, "div": a // b if b else 0}[op]
    return e


def trace(grid: Callable[[Mapping[str, Any]], Any], args: Mapping[str, Any], ints: set[str],
          consts: set[str]) -> tuple[Any, Any, Any]:
    """The formula of ``grid(args)`` per dimension: ``ints`` (integer runtime arguments) become arguments,
    ``consts`` (integer constexprs) constexprs by name; Untraceable where it does anything else."""
    meta: dict[str, Any] = {}
    for k, v in args.items():
        if k in ints:
            meta[k] = Sym(("arg", k, None))
        elif k in consts:
            meta[k] = Sym((CONST, k))
        elif v is None or isinstance(v, (bool, float, str)):
            meta[k] = v
        else:
            meta[k] = _Opaque(k)
    fn = _with_closure(grid, args, ints, consts)
    try:
        out = fn(meta)
    except Untraceable:
        raise
    except Exception as e:  # noqa: BLE001 - the user's function failed on symbols: it is not a formula of them
        raise Untraceable(f"the grid function failed on symbolic arguments: {type(e).__name__}: {e}") from None
    dims = list(out) if isinstance(out, (tuple, list)) else [out]
    if not 1 <= len(dims) <= 3:
        raise Untraceable(f"the grid function returned {len(dims)} dimensions")
    return tuple(_expr(d) for d in dims + [1] * (3 - len(dims)))  # type: ignore[return-value]


def _with_closure(grid: Any, args: Mapping[str, Any], ints: set[str], consts: set[str]) -> Any:
    """``grid`` with the integers it closes over made symbols: the argument (or constexpr) of the same name, else the
    one integer argument of the same value (the usual ``lambda META: (triton.cdiv(n, META["BLOCK"]),)`` where ``n``
    is the wrapper's local). An integer no argument explains, or a tensor, makes the grid untraceable: a number taken
    from one call's data is no formula."""
    import types

    code, cells = getattr(grid, "__code__", None), getattr(grid, "__closure__", None)
    if code is None or not cells:
        return grid
    new = []
    for var, cell in zip(code.co_freevars, cells):
        try:
            v = cell.cell_contents
        except ValueError:  # an empty cell
            new.append(cell)
            continue
        if isinstance(v, int) and not isinstance(v, bool):
            new.append(types.CellType(_symbol_for(var, v, args, ints, consts)))
        elif hasattr(v, "shape") and hasattr(v, "stride"):
            new.append(types.CellType(_Opaque(var)))
        else:
            new.append(cell)
    return types.FunctionType(code, grid.__globals__, grid.__name__, grid.__defaults__, tuple(new))


def _symbol_for(var: str, value: int, args: Mapping[str, Any], ints: set[str], consts: set[str]) -> Sym:
    if var in ints and args.get(var) == value:
        return Sym(("arg", var, None))
    if var in consts and args.get(var) == value:
        return Sym((CONST, var))
    same = [k for k in ints if args.get(k) == value]
    if len(same) == 1:
        return Sym(("arg", same[0], None))
    same_c = [k for k in consts if args.get(k) == value]
    if not same and len(same_c) == 1:
        return Sym((CONST, same_c[0]))
    why = "no integer argument" if not same and not same_c else f"several arguments ({', '.join(sorted(same))})"
    raise Untraceable(f"the grid function closes over {var} = {value}, which {why} of the launch explains")


def substitute(e: Any, consts: Mapping[str, Any]) -> GridExpr:
    """The formula with each constexpr replaced by its value."""
    if isinstance(e, int):
        return e
    if e[0] == CONST:
        v = consts.get(e[1])
        if isinstance(v, bool) or not isinstance(v, int):
            raise Untraceable(f"constexpr {e[1]} has no integer value")
        return int(v)
    if e[0] == "arg":
        return e  # type: ignore[no-any-return]
    return _simplify((e[0], substitute(e[1], consts), substitute(e[2], consts)))  # type: ignore[no-any-return]


def text(e: Any) -> str:
    """The formula as ``kernelpack.toml`` writes it (constexprs by name): ``ceil_div(n_elements, BLOCK_SIZE)``."""
    if isinstance(e, int):
        return str(e)
    if e[0] == CONST:
        return str(e[1])
    if e[0] == "arg":
        return grid_text(e)
    return f"{e[0]}({text(e[1])}, {text(e[2])})"
