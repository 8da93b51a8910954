"""cuTile launches: ``cuda.tile.launch`` hooked for the block; each launch's signature is cuTile's own
(``KernelSignature.from_kernel_args``, through :func:`kernelpack.cutile.signature_from_args`). GPU-less,
``cuda.tile.tune.exhaustive_search`` (and every module's imported copy) picks the config ``configs`` names without
measuring; on a GPU it measures as it would, and the launch it makes with the winner is recorded."""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..core.errors import KernelpackError
from .records import Launch
from .refs import reference
from .values import Unwritable, source, to_meta
from .world import patched, real

if TYPE_CHECKING:
    from .session import Capture

_SHORT = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64"}


@contextlib.contextmanager
def hooks(cap: Capture) -> Iterator[None]:
    try:
        import cuda.tile as ct
    except Exception:  # noqa: BLE001 - no cuTile (or one that cannot load here): nothing to hook
        yield
        return
    original = ct.launch

    def launch(stream: Any, grid: Any, kernel: Any, args: Any) -> Any:
        with real():
            record(cap, kernel, tuple(args), grid)
        return original(stream, grid, kernel, args) if cap.gpu else None

    patches: list[tuple[Any, str, Any]] = [(ct, "launch", launch)]
    if not cap.gpu:
        patches += _tuner_patches(cap)
    with patched(patches):
        yield


def _pyfunc(kernel: Any) -> Any:
    af = getattr(kernel, "_annotated_function", None)
    return af.pyfunc if af is not None else getattr(kernel, "pyfunc", kernel)


def record(cap: Capture, kernel: Any, args: tuple[Any, ...], grid: Any) -> Launch | None:
    from ..frontends.cutile.signature import signature_from_args

    fn = _pyfunc(kernel)
    name, module = str(getattr(fn, "__name__", "kernel")), str(getattr(fn, "__module__", ""))
    made: dict[str, Any] | None = None
    try:
        ref, held = reference(kernel, module)
        if held is not kernel:
            raise LookupError("a module attribute holds another kernel object of it")
    except LookupError:  # made in a function, or given other hints: compiled while it lives (kernelpack capture)
        ref, made = f"{module}:{name}", made_as(kernel)
    meta = tuple(to_meta(a) for a in args)
    try:
        sig = signature_from_args(kernel, meta)
    except KernelpackError as e:
        cap.skip(f"cutile kernel {ref}", e.message)
        return None
    parts = [_split(c) for c in sig.parameters]
    imports: set[str] = set()
    try:
        text = source(meta, imports)
    except Unwritable as e:
        cap.skip(f"cutile kernel {ref}", f"an argument cannot be written into the project: {e}")
        return None
    g = [int(x) for x in (grid if isinstance(grid, (tuple, list)) else (grid,))]
    dtypes: list[str] = []
    for _, var in parts:
        _dtypes(var, dtypes)
    family: dict[str, Any] = {"kernel": ref, "params": [p[0] for p in parts]}
    if made is not None:
        family["made"] = made
    launch = Launch("cutile", ref, name, text, family, {"params": [p[1] for p in parts]},
                    options={"live": True} if made is not None else {},
                    grid=tuple((g + [1, 1, 1])[:3]),  # type: ignore[arg-type]
                    label="_".join(dtypes), imports=tuple(sorted(imports)), payload={"kernel": kernel, "args": meta})
    cap.add(launch)
    return launch


def made_as(kernel: Any) -> dict[str, Any]:
    """What a kernel no module attribute holds was made with: its compiler hints and the values its function closes
    over, by name (a factory's ``n_cols``), so that two kernels made differently are two families."""
    import re

    def plain(v: Any) -> Any:
        return v if isinstance(v, (bool, int, float, str)) else re.sub(r" at 0x[0-9a-fA-F]+", "", repr(v))[:80]

    opts = getattr(kernel, "_compiler_options", None)
    out = {k: plain(v) for k, v in sorted(vars(opts).items()) if v is not None} if hasattr(opts, "__dict__") else {}
    fn = _pyfunc(kernel)
    for name, cell in zip(getattr(getattr(fn, "__code__", None), "co_freevars", ()), fn.__closure__ or ()):
        try:
            out[name] = plain(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    return out


def _dtypes(v: Any, out: list[str]) -> None:
    if isinstance(v, dict) and "dtype" in v:
        d = str(_SHORT.get(v["dtype"], v["dtype"]))
        if d not in out:
            out.append(d)
    elif isinstance(v, list):
        for x in v:
            _dtypes(x, out)


def _split(c: Any) -> tuple[Any, Any]:
    """(family part, specialization part) of one parameter's constraint: kernelpack's cuTile ABI drops constants and
    passes every shape and stride, so a constant, an index width, a rank or a constant stride/shape (which a launch
    does not check) separate families; element types and divisibility (which dispatch checks) separate
    specializations."""
    from cuda.tile.compilation import ArrayConstraint, ConstantConstraint, ScalarConstraint, TupleConstraint

    if isinstance(c, ConstantConstraint):
        return {"const": repr(c.value)}, None
    if isinstance(c, ScalarConstraint):
        return {"scalar": c.dtype.name}, None
    if isinstance(c, TupleConstraint):
        parts = [_split(x) for x in c.items]
        return {"tuple": [p[0] for p in parts]}, [p[1] for p in parts]
    if isinstance(c, ArrayConstraint):
        fam = {"ndim": c.ndim, "index": c.index_dtype.name, "stride_constant": list(c.stride_constant),
               "shape_constant": list(c.shape_constant), "alias": list(c.alias_groups),
               "internal_alias": c.may_alias_internally, "stride_lower": list(c.stride_lower_bound_incl)}
        var = {"dtype": c.dtype.name, "base": c.base_addr_divisible_by, "shape_div": list(c.shape_divisible_by),
               "stride_div": list(c.stride_divisible_by)}
        return fam, var
    return {"other": repr(c)}, None


def _tuner_patches(cap: Capture) -> list[tuple[Any, str, Any]]:
    """``exhaustive_search`` (and every module's imported copy of it) without measuring: the config ``configs``
    names (``c<N>``, else the first) is "best"; the wrapper then launches the kernel with it (recorded)."""
    try:
        import cuda.tile.tune as tune
    except ImportError:
        return []
    original = getattr(tune, "exhaustive_search", None)
    if original is None:
        return []

    def search(configs: Any, stream: Any, grid_fn: Any, kernel: Any, *a: Any, **k: Any) -> Any:
        configs = list(configs)
        i = int(cap.configs[1:]) if cap.configs[:1] == "c" and cap.configs[1:].isdigit() else 0
        if i >= len(configs):
            cap.note(f"{getattr(_pyfunc(kernel), '__name__', 'kernel')}: --configs {cap.configs}, but cuTile's "
                     f"search has {len(configs)} config(s): c0 runs")
            i = 0
        best = types.SimpleNamespace(config=configs[i], mean_us=0.0, time_us=0.0)
        return types.SimpleNamespace(best=best, successes=(best,), failures=())

    out: list[tuple[Any, str, Any]] = [(tune, "exhaustive_search", search)]
    for mod in list(sys.modules.values()):
        if mod is not None and mod is not tune and getattr(mod, "exhaustive_search", None) is original:
            out.append((mod, "exhaustive_search", search))
    return out
