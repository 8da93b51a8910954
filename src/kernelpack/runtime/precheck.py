"""What a launch can be refused for with no driver at hand: the arguments, the device of their memory (CPU memory is
refused), the specialization they choose, and the launch options the kernel's own facts decide (a grid or a block it
needs). Run when the driver cannot be loaded, so a machine without a GPU reports the caller's mistake -- a CPU
tensor, an int32 tensor for a float kernel, a missing ``block`` -- before "no driver" (the same checks, in the same
order, as :meth:`KernelFamily.call` makes with one; the device's own limits wait for a device).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.errors import KernelpackError, LaunchError
from ..launch.facts import binary_facts
from . import adapters, checks
from .errors import ArgumentTypeError, ArgumentValueError, DescriptorArgumentError

if TYPE_CHECKING:
    from ..launch.family import Specialization
    from .family import KernelFamily


class _NoDriver:
    """Where memory lives, asked of no driver: a bare ``__cuda_array_interface__`` pointer is taken as device memory
    (torch tensors and DLPack producers say their device themselves)."""

    @staticmethod
    def pointer_device(ptr: int) -> int:
        return 0


def check_without_device(fam: KernelFamily, values: list[Any], grid: Any, block: Any, smem: Any, cluster: Any,
                         pdl: Any, cooperative: Any) -> None:
    """Raise what :meth:`KernelFamily.call` would raise for these arguments before it asks a device anything."""
    views = [fam._view(i, v, _NoDriver()) for i, v in enumerate(values)]  # type: ignore[arg-type]
    adapters.launch_device(f"kernel {fam.label}", zip(fam.arg_names, views))
    spec = _choose(fam, values, views)
    label = spec.label
    launch = spec.src.launch
    if grid is None and launch.grid is None:
        raise LaunchError(f"kernel {label}: grid is required (grid=blocks or grid=(x, y, z))")
    for what, value in (("grid", grid), ("block", block), ("cluster", cluster)):
        if value is not None:
            checks.positive_dims(value, what, label)
    if block is None and all(f.block is None for f in _facts(spec)):
        raise LaunchError(f"kernel {label}: block is required: the kernel fixes no block shape (no REQNTID in its "
                          f"cubin, no LaunchSpec.block)")
    if smem is not None:
        checks.smem_bytes(smem, label)
    checks.flag_types(pdl, cooperative, label)


def _choose(fam: KernelFamily, values: list[Any],
            views: list[adapters.TensorView | adapters.ListView | None]) -> Specialization:
    """The first specialization (the family's dispatch order, any device) that takes the arguments; else the
    refusal a launch would give."""
    reasons: list[tuple[str, KernelpackError]] = []
    for s in fam.specs:
        try:
            fam._fit(s.label, s.plan, values, views)
        except DescriptorArgumentError:
            raise
        except (ArgumentTypeError, ArgumentValueError) as err:
            if len(fam.specs) == 1:
                raise _single(err) from None
            reasons.append((s.label, err))
            continue
        return s
    fam.refuse(reasons, values, views)
    raise AssertionError("refuse() raises")  # pragma: no cover


def _single(err: KernelpackError) -> KernelpackError:
    from .family import _no_match

    return _no_match(err)


def _facts(spec: Specialization) -> list[Any]:
    """The launch facts of each of the specialization's binaries (its cubins read; no driver)."""
    src = spec.src
    out = []
    for i in range(len(src.bins)):
        name, b = src.binary(i)
        out.append(binary_facts(name, src.launch_of(i), src.layout_of[i], b))
    return out
