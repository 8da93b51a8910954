"""Record every kernel launch a ``@cute.jit`` function makes while CuTe traces it.

``KernelLauncher.launch`` is wrapped for the duration of one compile (under a lock: CuTe compiles are not
reentrant anyway). For each launch we keep what only exists during tracing: the kernel's flattened typed
parameters, derived from the DSL values handed to it, and its launch configuration with the grid as a formula
of those parameters when it is one.

The launch configuration is the one the DSL itself builds from the launch call: while the original ``launch``
runs, the DSL's ``LaunchConfig`` class is shadowed on the DSL object by a subclass that records each instance it
constructs. So every launch form the DSL accepts (``stream=``, ``async_deps=``, ``cluster=``, ``smem=``, the
``kernel(...)(grid=...)`` call form, positional fields) is read exactly as the DSL reads it, and a launch the DSL
rejects fails the compile with the DSL's own diagnostic rather than ours.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import KernelpackError
from .derive import Leaf, bind, leaves
from .grid import Expr, grid_rule
from .types import is_static

_LOCK = threading.Lock()


@dataclass
class Launch:
    """One traced ``kernel(...).launch(...)``."""

    kernel: str  # the @cute.kernel function's Python name
    symbol: str = ""  # the entry symbol in the cubin
    params: list[Leaf] = field(default_factory=list)
    error: str = ""  # why no kernel-level ABI could be derived (TMA descriptors, unsupported values)
    grid: tuple[Expr, Expr, Expr] | None = None  # formula, or None: the caller passes the grid
    block: tuple[int, int, int] | None = None
    cluster: tuple[int, int, int] | None = None
    smem: int | None = None
    pdl: bool = False  # LaunchConfig.use_pdl: programmatic dependent launch
    cooperative: bool = False  # LaunchConfig.cooperative: the kernel synchronizes its whole grid
    config: Any = None  # the DSL's own LaunchConfig for this launch (None if the DSL built none)


def _types_of(obj: Any) -> list[str]:
    from cutlass.base_dsl.typing import get_mlir_types

    return [str(t) for t in get_mlir_types(obj)]


def _ints(values: Any) -> tuple[int, int, int] | None:
    if values is None:
        return None
    vals = list(values)
    if len(vals) != 3 or not all(type(v) is int for v in vals):
        return None
    return tuple(vals)  # type: ignore[return-value]


def _params(launcher: Any, rec: Launch) -> list[Any]:
    """The kernel's flattened parameters into ``rec`` (or ``rec.error``); returns their DSL values."""
    from cutlass.base_dsl.utils.mlir_value_tree import extract_mlir_values

    try:
        rec.params = leaves(launcher.funcBody, launcher.func_args, launcher.func_kwargs, _types_of, kernel=True)
        return [v for _, a in bind(launcher.funcBody, launcher.func_args, launcher.func_kwargs)
                for v in extract_mlir_values(a) if not is_static(str(v.type))]
    except KernelpackError as e:
        rec.error = e.message
    except Exception as e:  # noqa: BLE001 - an unexpected DSL object: no kernel-level artifact, host path still fine
        rec.error = f"{type(e).__name__}: {e}"
    return []


def _configure(rec: Launch, cfg: Any, values: list[Any]) -> None:
    """Launch facts from the DSL's own config: grid formula, block, cluster, static dynamic-smem bytes."""
    if cfg is None:
        rec.error = rec.error or "the DSL built no launch configuration for this launch (an unknown DSL version?)"
        return
    rec.pdl = getattr(cfg, "use_pdl", False) is True
    rec.cooperative = getattr(cfg, "cooperative", False) is True
    if rec.error:
        return
    try:
        if len(values) == len(rec.params):
            rec.grid = grid_rule(cfg.grid, [(v, lf.name, lf.type) for v, lf in zip(values, rec.params)])
        rec.block = _ints(cfg.block)
        rec.cluster = _ints(cfg.cluster) if cfg.has_cluster else None
        rec.smem = cfg.smem if type(cfg.smem) is int else None
    except KernelpackError as e:
        rec.error = e.message
    except Exception as e:  # noqa: BLE001 - an unexpected config value: no kernel-level artifact
        rec.error = f"{type(e).__name__}: {e}"


def _hidden_from_dsl_locations(fn: Any) -> Any:
    """Make ``fn``'s frames look like the DSL's own to its diagnostics, which point at the first frame outside the
    DSL (our wrappers sit between the user's launch call and the DSL): a filename in angle brackets counts as
    internal there. Tracebacks still name the function, this module and the line."""
    fn.__code__ = fn.__code__.replace(co_filename=f"<{__name__}>")
    return fn


@contextlib.contextmanager
def _observe_configs(dsl: Any) -> Iterator[list[Any]]:
    """Within the block, every ``LaunchConfig`` the DSL object ``dsl`` constructs is appended to the list."""
    seen: list[Any] = []
    real = type(dsl).LaunchConfig
    had_own = "LaunchConfig" in vars(dsl)
    own = vars(dsl).get("LaunchConfig")

    class ObservedLaunchConfig(real):  # type: ignore[misc, valid-type]
        @_hidden_from_dsl_locations
        def __post_init__(self) -> None:
            super().__post_init__()
            seen.append(self)

    ObservedLaunchConfig.__qualname__ = real.__qualname__
    dsl.LaunchConfig = ObservedLaunchConfig
    try:
        yield seen
    finally:
        if had_own:
            dsl.LaunchConfig = own
        else:
            del dsl.LaunchConfig


@contextlib.contextmanager
def capture_launches() -> Iterator[list[Launch]]:
    """Within the block, every traced launch is appended to the yielded list."""
    from cutlass.cutlass_dsl.cutlass import KernelLauncher

    records: list[Launch] = []
    with _LOCK:
        original = KernelLauncher.launch

        @_hidden_from_dsl_locations
        def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
            rec = Launch(getattr(self.funcBody, "__name__", "kernel"))
            values = _params(self, rec)
            with _observe_configs(self.dsl) as seen:
                ret = original(self, *args, **kwargs)
            rec.config = seen[0] if seen else None
            _configure(rec, rec.config, values)
            rec.symbol = self._launch_name or ""
            records.append(rec)
            return ret

        KernelLauncher.launch = launch  # type: ignore[method-assign]
        try:
            yield records
        finally:
            KernelLauncher.launch = original  # type: ignore[method-assign]
