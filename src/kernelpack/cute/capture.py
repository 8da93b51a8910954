"""Record every kernel launch a ``@cute.jit`` function makes while CuTe traces it.

``KernelLauncher.launch`` is wrapped for the duration of one compile (under a lock: CuTe compiles are not
reentrant anyway). For each launch we keep what only exists during tracing: the kernel's flattened typed
parameters, derived from the DSL values handed to it, and its launch configuration with the grid as a formula
of those parameters when it is one.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import KernelpackError
from .derive import Leaf, leaves
from .grid import Expr, grid_rule

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


def _record(launcher: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Launch:
    from cutlass.base_dsl.utils.mlir_value_tree import extract_mlir_values

    rec = Launch(getattr(launcher.funcBody, "__name__", "kernel"))
    try:
        rec.params = leaves(launcher.funcBody, launcher.func_args, launcher.func_kwargs, _types_of)
        from .derive import bind

        values = [v for _, a in bind(launcher.funcBody, launcher.func_args, launcher.func_kwargs)
                  for v in extract_mlir_values(a)]
        cfg = launcher.dsl.LaunchConfig(*args, **kwargs)
        if len(values) == len(rec.params):
            rec.grid = grid_rule(cfg.grid, [(v, lf.name, lf.type) for v, lf in zip(values, rec.params)])
        rec.block = _ints(cfg.block)
        rec.cluster = _ints(cfg.cluster) if cfg.has_cluster else None
        rec.smem = cfg.smem if type(cfg.smem) is int else None
    except KernelpackError as e:
        rec.error = e.message
    except Exception as e:  # noqa: BLE001 - an unexpected DSL object: no kernel-level artifact, host path still fine
        rec.error = f"{type(e).__name__}: {e}"
    return rec


@contextlib.contextmanager
def capture_launches() -> Iterator[list[Launch]]:
    """Within the block, every traced launch is appended to the yielded list."""
    from cutlass.cutlass_dsl.cutlass import KernelLauncher

    records: list[Launch] = []
    with _LOCK:
        original = KernelLauncher.launch

        def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
            rec = _record(self, args, kwargs)
            ret = original(self, *args, **kwargs)
            rec.symbol = self._launch_name or ""
            records.append(rec)
            return ret

        KernelLauncher.launch = launch  # type: ignore[method-assign]
        try:
            yield records
        finally:
            KernelLauncher.launch = original  # type: ignore[method-assign]
