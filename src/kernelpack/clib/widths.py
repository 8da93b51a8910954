"""The integers a generated library holds, each checked against the C type it is written as before any file is
written. A bundle is data (anyone who writes a ``.kpack`` can recompute its hashes): a literal that does not fit
its field is truncated by the compiler or the assembler with a warning at most, and the library would launch with
a value the bundle does not hold -- a dynamic shared memory of 2**32 + 16 bytes as 16, a block of 2**32 + 32 threads
as 32, ``sm_count == 2**64 + 132`` as 132, a divisibility of 2**64 + 4 as 4. The runtime's C extension checks the same
values where it reads them (``runtime/_launch.h``: KP_NARROW).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..core.errors import KernelpackError

CType = tuple[str, int, int]  # name, lowest, highest value
U8: CType = ("uint8_t", 0, 2**8 - 1)
U16: CType = ("uint16_t", 0, 2**16 - 1)
U32: CType = ("uint32_t", 0, 2**32 - 1)
I64: CType = ("int64_t", -(2**63), 2**63 - 1)
DIVISOR: CType = ("int64_t", 1, 2**63 - 1)  # a divisibility or alignment, the literal an argument is reduced by


def fit(value: Any, ctype: CType, where: str, what: str) -> int:
    """``value`` when it is an int that ``ctype`` holds; else KernelpackError naming ``where`` (the kernel), ``what``
    (the field), the value and the range."""
    name, lo, hi = ctype
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise KernelpackError(f"{where}: {what} is {value!r:.60}; a generated library holds it as {name} "
                              f"({lo}..{hi}): the bundle is malformed")
    return value


def fit_all(values: Iterable[Any], ctype: CType, where: str, what: str) -> None:
    for v in values:
        fit(v, ctype, where, what)


def _grid_ints(e: Any) -> Iterable[int]:
    """The constants of a grid formula (kernelpack.bundle.artifact.GridExpr)."""
    if isinstance(e, int):
        yield e
    elif isinstance(e, tuple) and e and e[0] != "arg":
        for x in e[1:]:
            yield from _grid_ints(x)


def check_layout(label: str, launch: Any, slots: Sequence[Any], requirements: Sequence[tuple[str, int]]) -> None:
    """What one parameter layout of kernel ``label`` puts in the library's tables and checks: its launch spec
    (kp_bin_launch: block, cluster, dynamic shared memory; the scratch sizes and alignments kp_run_scratch takes;
    the grid formula's constants; each tensor descriptor's kp_desc_info row), the dispatch constraints of its
    slots (divisibility and alignment literals, range bounds, static extents and strides: int64) and the device
    requirements (kp_require.value)."""
    where = f"kernel {label}"
    for f in ("block", "cluster"):
        fit_all(getattr(launch, f) or (), U32, where, f"LaunchSpec.{f}")
    fit(launch.dynamic_smem or 0, U32, where, "LaunchSpec.dynamic_smem")
    for f in ("global_scratch", "global_scratch_align", "profile_scratch", "profile_scratch_align"):
        fit(getattr(launch, f), U32, where, f"LaunchSpec.{f}")
    for e in launch.grid or ():
        fit_all(_grid_ints(e), I64, where, "a grid formula's constant")
    for d in launch.tensor_descs:
        fit_all(d.block_shape, U32, where, f"tensor descriptor {d.arg}'s box")
        for f in ("rank", "elem_size", "elem_type", "swizzle"):
            fit(getattr(d, f), U8, where, f"tensor descriptor {d.arg}'s {f}")
    for s in slots:
        what = f"parameter '{s.param.name}'"
        fit(s.divisor, DIVISOR, where, f"{what}: its divisibility")
        fit(s.align, DIVISOR, where, f"{what}: its alignment")
        for _, lo, hi in s.ranges:
            fit_all((lo, hi), I64, where, f"{what}: a range bound")
        if s.tensor is not None:
            spec = s.tensor.spec
            fit_all((d for d in (*spec.shape, *spec.stride) if d is not None), I64, where, f"{what}: a static mode")
    for name, value in requirements:
        fit(value, I64, where, f"device requirement {name}")
