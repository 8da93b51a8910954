"""What an artifact says about launching its kernel: a :class:`LaunchSpec` (block, dynamic shared memory, cluster,
scratch buffers, tensor descriptors, PDL, cooperative launch, and the grid as a formula of the arguments), and where
an arch's binaries launch otherwise (:class:`ArchLaunch`). Data only: the launch model (:mod:`kernelpack.launch`)
reads it, the artifact (:mod:`kernelpack.bundle.artifact`) carries it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from . import _reprs
from .abi import Abi
from .errors import KernelpackError
from .records import record

if TYPE_CHECKING:  # imported where a launch has tensor descriptors (a CuTe host program's checks need none)
    from .arch import Arch
    from .tma import TensorDescSpec

Dim3 = tuple[int, int, int]


def _dim3(value: Any, what: str) -> Dim3 | None:
    if value is None:
        return None
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise KernelpackError(f"{what} must be 1 to 3 ints >= 1 (got {value!r})")
    return (dims + (1, 1))[:3]  # type: ignore[return-value]


GRID_OPS = ("add", "sub", "mul", "div", "ceil_div", "min", "max")
GridExpr = int | tuple  # int | ("arg", param, field | None) | (op, GridExpr, GridExpr)


def _grid_expr(e: Any) -> GridExpr:
    """Validate one grid formula (JSON lists or tuples) and return it as nested tuples."""
    if isinstance(e, bool) or not isinstance(e, (int, list, tuple)):
        raise KernelpackError(f"grid expression must be an int or a list (got {e!r})")
    if isinstance(e, int):
        if e < 1:
            raise KernelpackError(f"constant grid dimension must be >= 1 (got {e})")
        return e
    if len(e) == 3 and e[0] == "arg" and isinstance(e[1], str) and (e[2] is None or isinstance(e[2], str)):
        return ("arg", e[1], e[2])
    if len(e) == 2 and e[0] == "arg" and isinstance(e[1], str):  # a scalar parameter (TOML has no null)
        return ("arg", e[1], None)
    if len(e) == 3 and e[0] in GRID_OPS:
        return (e[0], _grid_operand(e[1]), _grid_operand(e[2]))
    raise KernelpackError(f"malformed grid expression {e!r}: expected an int, ['arg', param], ['arg', param, "
                          f"field|null] or [op, a, b] with op in {GRID_OPS}")


def _grid_operand(e: Any) -> GridExpr:
    return e if isinstance(e, int) and not isinstance(e, bool) else _grid_expr(e)


def _grid_json(e: GridExpr) -> Any:
    return e if isinstance(e, int) else [_grid_json(x) if isinstance(x, tuple) else x for x in e]


def grid_text(e: GridExpr) -> str:
    """A grid formula as text: ``ceil_div(n, 256)``, ``c.shape1``."""
    if isinstance(e, int):
        return str(e)
    if e[0] == "arg":
        return e[1] + (f".{e[2]}" if e[2] else "")
    return f"{e[0]}({grid_text(e[1])}, {grid_text(e[2])})"


# compiled on first use (re caches it): the runtime imports this module, and few programs parse a grid formula
_GRID_TOKEN = r"\s*(?:(\d+)|([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)|(//|[-+*/(),]))"


def parse_grid_text(text: str, consts: Mapping[str, Any] | None = None) -> GridExpr:
    """A grid formula written as text (what :func:`grid_text` writes, and infix ``+ - * //``): ``ceil_div(n, 256)``,
    ``cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)``, ``c.shape1``, ``64``. A name in ``consts`` is replaced by its (integer)
    value, any other names a parameter (``x.shape1``: a field of one). KernelpackError for anything else."""
    pos, toks, token = 0, [], re.compile(_GRID_TOKEN)
    while pos < len(text):
        m = token.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip():
                raise KernelpackError(f"grid formula {text!r}: cannot read {text[pos:]!r}")
            break
        toks.append(m.groups())
        pos = m.end()
    consts = consts or {}
    at = [0]

    def peek() -> str | None:
        return toks[at[0]][2] if at[0] < len(toks) else None

    def take(sym: str) -> None:
        if peek() != sym:
            raise KernelpackError(f"grid formula {text!r}: expected {sym!r}")
        at[0] += 1

    def atom() -> GridExpr:
        if at[0] >= len(toks):
            raise KernelpackError(f"grid formula {text!r}: ends early")
        num, name, sym = toks[at[0]]
        at[0] += 1
        if num is not None:
            return int(num)
        if sym == "(":
            e = expr()
            take(")")
            return e
        if name is not None and peek() == "(":
            op = {"cdiv": "ceil_div"}.get(name, name)
            if op not in GRID_OPS:
                raise KernelpackError(f"grid formula {text!r}: unknown function {name}; expected one of "
                                      f"{', '.join(GRID_OPS)}")
            take("(")
            a = expr()
            take(",")
            b = expr()
            take(")")
            return (op, a, b)
        if name is not None:
            if name in consts:
                v = consts[name]
                if isinstance(v, bool) or not isinstance(v, int):
                    raise KernelpackError(f"grid formula {text!r}: constexpr {name} is {v!r}, not an integer")
                return int(v)
            param, _, fld = name.partition(".")
            return ("arg", param, fld or None)
        raise KernelpackError(f"grid formula {text!r}: unexpected {sym!r}")

    def term() -> GridExpr:
        e = atom()
        while peek() in ("*", "//", "/"):
            op = "mul" if peek() == "*" else "div"
            at[0] += 1
            e = (op, e, atom())
        return e

    def expr() -> GridExpr:
        e = term()
        while peek() in ("+", "-"):
            op = "add" if peek() == "+" else "sub"
            at[0] += 1
            e = (op, e, term())
        return e

    out = expr()
    if at[0] != len(toks):
        raise KernelpackError(f"grid formula {text!r}: unexpected {toks[at[0]][2] or toks[at[0]][1]!r}")
    return out


def bind_constexprs(formula: Any, consts: Mapping[str, Any]) -> Any:
    """One grid formula of a specialization, its constexprs put in so one formula serves every config of a family:
    text is read by :func:`parse_grid_text`; in a tuple formula an operand that names a constexpr (``("ceil_div",
    ("arg", "n", None), "BLOCK")``) is replaced by its integer value. Anything else comes back as given (LaunchSpec
    judges it). KernelpackError for a name that is no integer constexpr."""
    if isinstance(formula, str):
        return parse_grid_text(formula, consts)

    def sub(e: Any) -> Any:
        if isinstance(e, str):
            v = consts.get(e)
            if isinstance(v, bool) or not isinstance(v, int):
                from .suggest import hint

                raise KernelpackError(f"the grid names {e!r}, which is no integer constexpr of it "
                                      f"(constexprs: {', '.join(sorted(consts)) or 'none'}{hint(e, consts)})")
            return v
        if isinstance(e, (list, tuple)) and e and e[0] != "arg":
            return [e[0], *(sub(x) for x in e[1:])]
        return e

    return sub(formula)


def grid_params(e: GridExpr) -> list[tuple[str, str | None]]:
    """The (param, field) pairs a grid formula reads."""
    if isinstance(e, int):
        return []
    if e[0] == "arg":
        return [(e[1], e[2])]
    return grid_params(e[1]) + grid_params(e[2])


def evaluate_grid(e: GridExpr, fields: Mapping[tuple[str, str | None], int]) -> int:
    """The reference semantics every launcher must match: 64-bit signed integer math on the argument values
    (``("arg", "c", "shape1")`` is field ``shape1`` of struct param ``c``; field None is a scalar param);
    ``div`` truncates; ``ceil_div(a, b)`` is ``(a + b - 1) / b`` and 0 for b <= 0. A dimension <= 0 means there
    is nothing to launch: the launcher returns success without launching."""
    if isinstance(e, int):
        return e
    if e[0] == "arg":
        return int(fields[(e[1], e[2])])
    a, b = evaluate_grid(e[1], fields), evaluate_grid(e[2], fields)
    op = e[0]
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":  # C semantics: truncate toward zero, exactly (no float detour above 2**53)
        if not b:
            return 0
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q
    if op == "ceil_div":
        return (a + b - 1) // b if b > 0 else 0
    return min(a, b) if op == "min" else max(a, b)


@record(frozen=True, repr=False)  # its own __repr__
class LaunchSpec:
    """What a launch must use. None means the caller chooses.

    ``block``: fixed block dims (a frontend's choice, e.g. Triton's 32 x num_warps; a cubin's REQNTID is
    read from the cubin itself). ``dynamic_smem``: bytes of dynamic shared memory the kernel needs.
    ``cluster``: cluster dims the launch must request (a cubin's explicit cluster is read from the cubin).
    ``global_scratch``/``profile_scratch``: bytes per CTA of the buffers passed in the params of those roles
    (Triton's hidden trailing pointers): 0 means pass NULL, else allocate ``size x grid CTAs`` bytes aligned to
    ``*_align`` for the launch. ``tensor_descs``: tensor-descriptor arguments the host encodes (see
    :mod:`kernelpack.core.tma`). ``grid``: per dimension, a formula of the kernel's arguments the launcher computes
    the grid from when the caller gives none (see :func:`evaluate_grid`). ``pdl``: launch with programmatic
    dependent launch (the kernel was built to overlap the one before it: ``griddepcontrol``; Triton's
    ``launch_pdl``). ``cooperative``: the kernel synchronizes its whole grid, so every launch is cooperative and
    its grid must fit on the device at once (Triton's ``launch_cooperative_grid``). The JSON form carries these
    only when set, so older bundles read unchanged.
    """

    block: Dim3 | None = None
    dynamic_smem: int | None = None
    cluster: Dim3 | None = None
    global_scratch: int = 0
    global_scratch_align: int = 1
    profile_scratch: int = 0
    profile_scratch_align: int = 1
    tensor_descs: tuple[TensorDescSpec, ...] = ()
    grid: tuple[GridExpr, GridExpr, GridExpr] | None = None
    pdl: bool = False
    cooperative: bool = False

    def __post_init__(self) -> None:
        for f in ("pdl", "cooperative"):
            if not isinstance(getattr(self, f), bool):
                raise KernelpackError(f"LaunchSpec.{f} must be True or False (got {getattr(self, f)!r})")
        if self.grid is not None:
            if not isinstance(self.grid, (tuple, list)) or len(self.grid) != 3:
                raise KernelpackError(f"LaunchSpec.grid must be 3 grid expressions (got {self.grid!r})")
            object.__setattr__(self, "grid", tuple(_grid_expr(e) for e in self.grid))
        object.__setattr__(self, "block", _dim3(self.block, "LaunchSpec.block"))
        object.__setattr__(self, "cluster", _dim3(self.cluster, "LaunchSpec.cluster"))
        object.__setattr__(self, "tensor_descs", tuple(self.tensor_descs))
        if self.dynamic_smem is not None and (not isinstance(self.dynamic_smem, int) or self.dynamic_smem < 0):
            raise KernelpackError(f"LaunchSpec.dynamic_smem must be an int >= 0 (got {self.dynamic_smem!r})")
        for f in ("global_scratch", "profile_scratch"):
            size, align = getattr(self, f), getattr(self, f + "_align")
            if not isinstance(size, int) or size < 0:
                raise KernelpackError(f"LaunchSpec.{f} must be an int >= 0 (got {size!r})")
            if not isinstance(align, int) or align < 1 or align & (align - 1):
                raise KernelpackError(f"LaunchSpec.{f}_align must be a power of two (got {align!r})")
        if self.tensor_descs and not all(isinstance(t, _tma().TensorDescSpec) for t in self.tensor_descs):
            raise KernelpackError("LaunchSpec.tensor_descs must hold TensorDescSpec values")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "block": list(self.block) if self.block else None,
            "dynamic_smem": self.dynamic_smem,
            "cluster": list(self.cluster) if self.cluster else None,
        }
        for f in ("global_scratch", "profile_scratch"):
            if getattr(self, f):
                out[f] = getattr(self, f)
                out[f + "_align"] = getattr(self, f + "_align")
        if self.tensor_descs:
            out["tensor_descs"] = [t.to_json() for t in self.tensor_descs]
        if self.grid is not None:
            out["grid"] = [_grid_json(e) for e in self.grid]
        for f in ("pdl", "cooperative"):
            if getattr(self, f):
                out[f] = True
        return out

    def __repr__(self) -> str:
        shown = []
        for f in ("block", "dynamic_smem", "cluster", "global_scratch", "profile_scratch", "pdl", "cooperative"):
            if getattr(self, f):
                shown.append(f"{f}={getattr(self, f)!r}")
        if self.tensor_descs:
            shown.append(f"tensor_descs={len(self.tensor_descs)}")
        if self.grid is not None:
            shown.append(f"grid=[{_reprs.clip(', '.join(map(grid_text, self.grid)), 120)}]")
        return f"LaunchSpec({', '.join(shown)})"

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LaunchSpec:
        return cls(d.get("block"), d.get("dynamic_smem"), d.get("cluster"), int(d.get("global_scratch", 0)),
                   int(d.get("global_scratch_align", 1)), int(d.get("profile_scratch", 0)),
                   int(d.get("profile_scratch_align", 1)),
                   tuple(_tma().TensorDescSpec.from_json(t) for t in d.get("tensor_descs", ())), d.get("grid"),
                   bool(d.get("pdl", False)), bool(d.get("cooperative", False)))


@record(frozen=True)
class ArchLaunch:
    """What the binaries of one arch launch with where it differs from their artifact (``KernelArtifact.per_arch``).

    ``launch``: the whole LaunchSpec of those binaries (None: the artifact's): the block, dynamic shared memory,
    cluster, scratch sizes and tensor-descriptor lowerings may differ per arch; the grid formula may not.
    ``abi``: their kernel parameters (None: the artifact's): the same caller-visible arguments, lowered
    differently -- a tensor descriptor as a CUtensorMap on sm_90a and as pointer, shapes and strides on sm_80.
    """

    launch: LaunchSpec | None = None
    abi: Abi | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.launch is not None:
            out["launch"] = self.launch.to_json()
        if self.abi is not None:
            out["abi"] = self.abi.to_json()
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ArchLaunch:
        return cls(LaunchSpec.from_json(d["launch"]) if d.get("launch") is not None else None,
                   Abi.from_json(d["abi"]) if d.get("abi") is not None else None)


PerArch: TypeAlias = "tuple[tuple[Arch, ArchLaunch], ...]"


def split_per_arch(items: Sequence[tuple[Arch, Abi, LaunchSpec]]) -> tuple[Abi, LaunchSpec, dict[Arch, ArchLaunch]]:
    """What a frontend that compiled one kernel for several archs passes to :class:`KernelArtifact`: the first arch's
    kernel parameters and LaunchSpec for the artifact, and each other arch's own where they differ (``per_arch``)."""
    _, abi, launch = items[0]
    per_arch = {arch: ArchLaunch(None if ls == launch else ls, None if a == abi else a)
                for arch, a, ls in items[1:] if ls != launch or a != abi}
    return abi, launch, per_arch


def _tma() -> Any:
    from . import tma

    return tma
