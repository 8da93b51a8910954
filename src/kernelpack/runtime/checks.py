"""Checks of one argument against one parameter slot, and of the launch configuration against a kernel and a
device. Each check returns the value to pack or raises an error naming the kernel, the parameter (index and
name), what was expected and what was given. Nothing here touches the driver.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..core.abi import DType, Struct, TensorList
from ..core.errors import KernelpackError, LaunchError
from ..core.launchspec import Dim3, LaunchSpec
from ..core.packing import pack_value
from ..launch.codes import MAX_PORTABLE_CLUSTER, PDL_MIN_MAJOR, SMEM_DEFAULT_LIMIT  # noqa: F401 - SMEM_DEFAULT_LIMIT re-exported
from ..launch.plan import INT_RANGE, OP_BYTES, OP_DESC, OP_LIST, OP_PTR, OP_SCALAR, OP_TENSOR, Slot
from .adapters import ListView, TensorView
from .errors import ArgumentTypeError, ArgumentValueError, DescriptorArgumentError

if TYPE_CHECKING:  # an argument's checks (a CuTe host program's too) need no loader
    from .driver import DeviceInfo
    from .loader import LaunchFacts


def _where(kernel: str, s: Slot) -> str:
    return f"kernel {kernel}: parameter {s.index} '{s.name}'"


def _got(value: Any, view: TensorView | None) -> str:
    if view is not None:
        return f"a {view.describe()}"
    return f"{type(value).__name__} {value!r}" if isinstance(value, (int, float)) else type(value).__name__


def _unnamed(where: str, view: TensorView) -> ArgumentTypeError:
    """An array whose element type kernelpack has no dtype for (complex, fnuz fp8, ...) where a typed one is needed: the
    C library's KP_ERROR_INVALID_ARGUMENT for a kp_tensor whose dtype is no kp_dtype, not a dispatch mismatch."""
    return ArgumentTypeError(f"{where}: expected an array of a kernelpack dtype, got a {view.describe()} (an "
                             f"element type kernelpack cannot name{_fp8_hint(view.dtype_name)})")


def _fp8_hint(name: str) -> str:
    """Why an 8-bit float a producer names is not one of kernelpack's (f8e4m3 and f8e5m2 are NVIDIA's OCP formats)."""
    if "fnuz" in name:
        return ("; the fnuz fp8 formats (no infinities, no negative zero, another exponent bias) are not NVIDIA's: "
                "kernelpack's fp8 dtypes are f8e4m3 = float8_e4m3fn and f8e5m2 = float8_e5m2")
    if "float8" in name:
        return "; kernelpack's fp8 dtypes are f8e4m3 = float8_e4m3fn and f8e5m2 = float8_e5m2"
    return ""


def _aligned(ptr: int, align: int) -> int:
    """The largest power of two (up to 256) dividing ptr, for messages."""
    if ptr == 0:
        return 256
    return min(ptr & -ptr, 256)


def check_arg(kernel: str, s: Slot, value: Any, view: TensorView | None) -> Any:
    """The packable value of ``value`` for slot ``s`` (see :meth:`Plan.pack`)."""
    if s.op == OP_PTR:
        return _pointer(kernel, s, value, view)
    if s.op == OP_SCALAR:
        return _scalar(kernel, s, value, view)
    if s.op == OP_TENSOR:
        return _tensor(kernel, s, value, view)
    if s.op == OP_BYTES:
        return _bytes(kernel, s, value, view)
    if s.op == OP_DESC:
        return _desc(kernel, s, value, view)
    if s.op == OP_LIST:
        return _list(kernel, s, value, view)
    return None


Element = tuple[int, tuple[int, ...], tuple[int, ...]]  # a list element's data pointer, extents, strides


@functools.lru_cache(maxsize=256)
def _list_rules(t: TensorList) -> tuple[Any, ...]:
    """What a list's elements are checked against, per mode only where there is something to check: (dtype, rank,
    index range, static (mode, is stride, value), divisors (mode, is stride, d), least strides (mode, m), align)."""
    e = t.element
    lo, hi = INT_RANGE[e.shape_dtype]
    static = tuple((i, st, w) for st, want in ((0, e.shape), (1, e.stride)) for i, w in enumerate(want)
                   if w is not None)
    divs = tuple((i, st, d) for st, ds in ((0, t.shape_div), (1, t.stride_div)) for i, d in enumerate(ds) if d > 1)
    least = tuple((i, m) for i, m in enumerate(t.stride_min) if m is not None)
    return e.dtype, e.rank, lo, hi, static, divs, least, e.align


def _list(kernel: str, s: Slot, value: Any, view: Any) -> tuple[Element, ...]:
    """Every tensor of a list argument (read before dispatch: ``adapters.list_view``) against what the list's
    elements must be (kernelpack.core.abi.TensorList), as ``(ptr, shape, strides)`` each; the launch copies them
    into device memory as the kernel's descriptors (a list's launch pays this per tensor: the checks are data)."""
    t = s.tlist
    assert t is not None
    if not isinstance(view, ListView):
        raise ArgumentTypeError(f"{_where(kernel, s)}: expected a list of {t.element.dtype.value} tensors, got "
                                f"{_got(value, view)}")
    dt, rank, lo, hi, static, divs, least, align = _list_rules(t)
    out = []
    for v in view.items:
        shape, strides = v.shape, v.strides
        if v.dtype is not dt or len(shape) != rank or (align > 1 and v.ptr % align):
            raise _list_refusal(kernel, s, view, t)
        for i, st, w in static:
            if (strides if st else shape)[i] != w:
                raise _list_refusal(kernel, s, view, t)
        if min(shape) < lo or max(shape) > hi or min(strides) < lo or max(strides) > hi:
            raise _list_refusal(kernel, s, view, t)
        for i, st, d in divs:
            if (strides if st else shape)[i] % d:
                raise _list_refusal(kernel, s, view, t)
        for i, m in least:
            if strides[i] < m:
                raise _list_refusal(kernel, s, view, t)
        out.append((v.ptr, shape, strides))
    return tuple(out)


def _list_refusal(kernel: str, s: Slot, view: ListView, t: TensorList) -> KernelpackError:
    """The error for the first tensor of a list that does not fit ``t``, naming it and why."""
    e = t.element
    lo, hi = INT_RANGE[e.shape_dtype]
    for k, v in enumerate(view.items):
        where = f"{_where(kernel, s)}: element {k}"
        if v.dtype is None:
            return _unnamed(where, v)
        if v.dtype != e.dtype:
            return ArgumentValueError(f"{where}: expected a {e.dtype.value} tensor, got a {v.dtype_name} tensor "
                                      f"(every tensor of the list: {t.describe()})")
        if len(v.shape) != e.rank:
            return ArgumentValueError(f"{where}: expected a tensor of rank {e.rank}, got rank {len(v.shape)} (shape "
                                      f"{list(v.shape)})")
        for what, want, got, divs in (("shape", e.shape, v.shape, t.shape_div),
                                      ("stride", e.stride, v.strides, t.stride_div)):
            for i, (w, g, div) in enumerate(zip(want, got, divs)):
                if w is not None and w != g:
                    return ArgumentValueError(f"{where}: {what}[{i}] must be {w} (fixed when compiled), got {g} "
                                              f"({what} {list(got)})")
                if not lo <= g <= hi:
                    return ArgumentValueError(f"{where}: {what}[{i}] = {g} does not fit the kernel's "
                                              f"{e.shape_dtype.value} index type")
                if g % div:
                    return ArgumentValueError(f"{where}: {what}[{i}] must be a multiple of {div}, got {g}")
        for i, (m, g) in enumerate(zip(t.stride_min, v.strides)):
            if m is not None and g < m:
                return ArgumentValueError(f"{where}: stride[{i}] must be at least {m}, got {g}")
        if e.align > 1 and v.ptr % e.align:
            return ArgumentValueError(f"{where}: the data must be {e.align}-byte aligned, got address 0x{v.ptr:x} "
                                      f"({_aligned(v.ptr, e.align)}-byte aligned)")
    raise AssertionError("a list refused with every tensor fitting")  # _list and this check the same rules


def _desc(kernel: str, s: Slot, value: Any, view: TensorView | None) -> TensorView:
    """A tensor for a tensor-descriptor argument; the launch encodes it (``kernelpack.core.tma.encode_args``)."""
    d = s.desc
    assert d is not None
    want = d.element_dtype
    where = f"kernel {kernel}: tensor descriptor {d.arg} (parameter {s.index})"
    if view is None:
        raise ArgumentTypeError(f"{where}: expected a {d.dtype} tensor of rank {d.rank}, got {_got(value, view)}")
    if want is not None and view.dtype is None:
        raise _unnamed(where, view)
    if want is not None and view.dtype != want:  # dtype and rank choose the specialization (the launch model)
        raise ArgumentValueError(f"{where}: expected a {d.dtype} tensor, got a {view.dtype_name} tensor")
    if len(view.shape) != d.rank:
        raise ArgumentValueError(f"{where}: expected a rank-{d.rank} tensor, got rank {len(view.shape)}")
    _check_ranges(kernel, s, view.shape, 0)
    from ..core.tma import encode_args  # imported by the first tensor-descriptor argument

    try:  # anything else about it is checked when it is encoded, for the chosen specialization
        encode_args(d, view.ptr, view.shape, view.strides, kernel=kernel)
    except LaunchError as e:
        raise DescriptorArgumentError(e.message) from None
    return view


def _pointer(kernel: str, s: Slot, value: Any, view: TensorView | None) -> int:
    if view is not None:
        if s.dtype is not None and view.dtype is None:
            raise _unnamed(_where(kernel, s), view)
        if s.dtype is not None and view.dtype != s.dtype:
            raise ArgumentValueError(f"{_where(kernel, s)}: expected a {s.dtype.value} tensor, got a {view.dtype_name} "
                                     f"tensor")
        if not view.contiguous:
            raise ArgumentValueError(f"{_where(kernel, s)}: a pointer parameter needs a contiguous tensor, got shape "
                                     f"{list(view.shape)} with strides {list(view.strides)}; pass t.contiguous(), or "
                                     f"t.data_ptr() to pass the raw address on purpose")
        ptr = view.ptr
    elif value is None:
        return 0
    elif isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < 1 << 64:
            raise ArgumentValueError(f"{_where(kernel, s)}: device pointer {value} is outside [0, 2**64)")
        ptr = value
    else:
        what = f"a {s.dtype.value} tensor" if s.dtype is not None else "a tensor"
        raise ArgumentTypeError(f"{_where(kernel, s)}: expected {what} (or an int device pointer), got "
                                f"{_got(value, view)}")
    if s.align > 1 and ptr % s.align:
        raise ArgumentValueError(f"{_where(kernel, s)}: the data must be {s.align}-byte aligned, got address "
                                 f"0x{ptr:x} ({_aligned(ptr, s.align)}-byte aligned)")
    return ptr


def _scalar(kernel: str, s: Slot, value: Any, view: TensorView | None) -> Any:
    dt = s.dtype
    assert dt is not None
    if view is not None:
        raise ArgumentTypeError(f"{_where(kernel, s)}: expected a Python number for {dt.value}, got "
                                f"{_got(value, view)} (use .item(), which waits for the GPU, or change the kernel)")
    if dt.is_integer:
        if isinstance(value, (bool, float)) or not hasattr(value, "__index__"):
            raise ArgumentTypeError(f"{_where(kernel, s)}: expected an int for {dt.value}, got {_got(value, None)}")
        v = operator.index(value)
        lo, hi = INT_RANGE[dt]
        if not lo <= v <= hi:
            raise ArgumentValueError(f"{_where(kernel, s)}: {v} does not fit {dt.value} [{lo}, {hi}]")
        if s.divisor > 1 and v % s.divisor:
            raise ArgumentValueError(f"{_where(kernel, s)}: must be a multiple of {s.divisor}, got {v}")
        _check_ranges(kernel, s, None, v)
        return v
    if dt is DType.bool:
        if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
            return bool(value)
        raise ArgumentTypeError(f"{_where(kernel, s)}: expected a bool, got {_got(value, None)}")
    if isinstance(value, bool) or not (isinstance(value, (int, float)) or hasattr(value, "__float__")):
        raise ArgumentTypeError(f"{_where(kernel, s)}: expected a float for {dt.value}, got {_got(value, None)}")
    f = float(value)
    if dt in (DType.f16, DType.bf16, DType.f32):
        try:
            struct.pack("<e" if dt is DType.f16 else "<f", f)
        except OverflowError:
            raise ArgumentValueError(f"{_where(kernel, s)}: {f!r} overflows {dt.value}") from None
    return f


def _tensor(kernel: str, s: Slot, value: Any, view: TensorView | None) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    assert s.tensor is not None
    spec = s.tensor.spec
    if view is None:
        raise ArgumentTypeError(f"{_where(kernel, s)}: expected a {spec.dtype.value} tensor of rank {spec.rank}, got "
                                f"{_got(value, view)}")
    if view.dtype is None:
        raise _unnamed(_where(kernel, s), view)
    if view.dtype != spec.dtype:
        raise ArgumentValueError(f"{_where(kernel, s)}: expected a {spec.dtype.value} tensor, got a {view.dtype_name} "
                                 f"tensor")
    if len(view.shape) != spec.rank:
        raise ArgumentValueError(f"{_where(kernel, s)}: expected a tensor of rank {spec.rank}, got rank "
                                 f"{len(view.shape)} (shape {list(view.shape)})")
    for what, want, got, dt in (("shape", spec.shape, view.shape, spec.shape_dtype),
                                ("stride", spec.stride, view.strides, spec.stride_dtype)):
        lo, hi = INT_RANGE[dt]
        for i, (w, g) in enumerate(zip(want, got)):
            if w is not None and w != g:
                raise ArgumentValueError(f"{_where(kernel, s)}: {what}[{i}] must be {w} (fixed when compiled), got "
                                         f"{g} ({what} {list(got)})")
            if w is None and not lo <= g <= hi:
                raise ArgumentValueError(f"{_where(kernel, s)}: {what}[{i}] = {g} does not fit the kernel's "
                                         f"{dt.value} {what} field")
    if s.align > 1 and view.ptr % s.align:
        raise ArgumentValueError(f"{_where(kernel, s)}: the data must be {s.align}-byte aligned, got address "
                                 f"0x{view.ptr:x} ({_aligned(view.ptr, s.align)}-byte aligned)")
    _check_ranges(kernel, s, view.shape, 0)
    return view.ptr, view.shape, view.strides


def _check_ranges(kernel: str, s: Slot, shape: Sequence[int] | None, value: int) -> None:
    """The slot's range constraints (kernelpack.launch.ranges): the integer ``value``, or the extents ``shape``."""
    if not s.ranges:
        return
    from ..launch.ranges import INT64_MAX, Range  # imported by the first slot with a range

    for mode, lo, hi in s.ranges:
        v = value if mode < 0 else shape[mode] if shape is not None and mode < len(shape) else None
        if v is not None and (v < lo or (v > hi and hi < INT64_MAX)):  # INT64_MAX: no bound (a uint64 above it)
            r = Range(s.name, mode, lo, hi)
            what = "" if mode < 0 else f" shape[{mode}]"
            raise ArgumentValueError(f"{_where(kernel, s)}:{what} must satisfy {r.text()}, got {v}")


def _bytes(kernel: str, s: Slot, value: Any, view: TensorView | None) -> bytes:
    t = s.param.type
    if isinstance(value, (bytes, bytearray, memoryview)):
        b = bytes(value)
        if len(b) != s.size:
            raise ArgumentValueError(f"{_where(kernel, s)}: expected {s.size} bytes for {t.c_type}, got {len(b)}")
        return b
    if isinstance(t, Struct) and view is None and isinstance(value, (Mapping, Sequence)) \
            and not isinstance(value, str):
        try:
            return pack_value(t, value, _where(kernel, s))
        except KernelpackError as e:
            raise ArgumentTypeError(e.message) from None
    raise ArgumentTypeError(f"{_where(kernel, s)}: expected {s.size} bytes for {t.c_type}"
                            f"{' (or a mapping / sequence of its fields)' if isinstance(t, Struct) else ''}, got "
                            f"{_got(value, view)}")


# ---------------------------------------------------------------- launch configuration


def dims(value: Any, what: str, kernel: str) -> Dim3:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(items) <= 3 or not all(isinstance(d, int) and not isinstance(d, bool) for d in items):
        raise ArgumentTypeError(f"kernel {kernel}: {what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    return (items + (1, 1))[:3]  # type: ignore[return-value]


def positive_dims(value: Any, what: str, kernel: str) -> Dim3:
    """:func:`dims` of a block or a cluster the caller gives, every dimension >= 1."""
    d = dims(value, what, kernel)
    if any(v < 1 for v in d):
        raise LaunchError(f"kernel {kernel}: {what} {d} has a dimension < 1")
    return d


def smem_bytes(smem: Any, kernel: str) -> int:
    """The dynamic shared memory the caller gives (``smem=``): an int number of bytes, >= 0."""
    if isinstance(smem, bool) or not isinstance(smem, int):
        raise ArgumentTypeError(f"kernel {kernel}: smem must be an int number of bytes, got {smem!r}")
    if smem < 0:
        raise LaunchError(f"kernel {kernel}: smem is {smem}; dynamic shared memory must be >= 0 bytes")
    return smem


def flag_types(pdl: Any, cooperative: Any, kernel: str) -> None:
    """``pdl=`` and ``cooperative=``: True, False or None."""
    for name, v in (("pdl", pdl), ("cooperative", cooperative)):
        if v is not None and not isinstance(v, bool):
            raise LaunchError(f"kernel {kernel}: {name} must be True, False or None (got {v!r})")


def check_grid(grid: Any, dev: DeviceInfo, kernel: str) -> Dim3:
    if grid is None:
        raise LaunchError(f"kernel {kernel}: grid is required (grid=blocks or grid=(x, y, z))")
    g = dims(grid, "grid", kernel)
    for i, (v, hi) in enumerate(zip(g, dev.max_grid)):
        if v < 1:
            raise LaunchError(f"kernel {kernel}: grid[{i}] is {v}; every grid dimension must be >= 1 (grid {g})")
        if v > hi:
            raise LaunchError(f"kernel {kernel}: grid[{i}] = {v} exceeds device {dev.ordinal}'s limit {hi} (grid {g})")
    return g


def check_block(block: Any, facts: LaunchFacts, dev: DeviceInfo, kernel: str) -> Dim3:
    fixed = facts.block
    if block is None:
        if fixed is None:
            raise LaunchError(f"kernel {kernel}: block is required: the kernel fixes no block shape (no REQNTID in "
                              f"its cubin, no LaunchSpec.block)")
        return fixed
    b = positive_dims(block, "block", kernel)
    if facts.reqntid is not None and b != facts.reqntid:
        raise LaunchError(f"kernel {kernel}: block {b} differs from the block the kernel requires (REQNTID) "
                          f"{facts.reqntid}; leave block out to use it")
    if facts.fixed_block is not None and b != facts.fixed_block:
        raise LaunchError(f"kernel {kernel}: block {b} differs from the kernel's fixed block {facts.fixed_block}; "
                          f"leave block out to use it")
    threads = b[0] * b[1] * b[2]
    for i, (v, hi) in enumerate(zip(b, dev.max_block)):
        if v > hi:
            raise LaunchError(f"kernel {kernel}: block[{i}] = {v} exceeds device {dev.ordinal}'s limit {hi}")
    if threads > dev.max_threads:
        raise LaunchError(f"kernel {kernel}: block {b} has {threads} threads; device {dev.ordinal} allows "
                          f"{dev.max_threads}")
    if facts.max_threads and threads > facts.max_threads:
        raise LaunchError(f"kernel {kernel}: block {b} has {threads} threads; the kernel allows at most "
                          f"{facts.max_threads} (__launch_bounds__)")
    return b


def check_smem(smem: Any, facts: LaunchFacts, dev: DeviceInfo, kernel: str) -> int:
    n = facts.dyn_smem if smem is None else smem_bytes(smem, kernel)  # LaunchSpec.dynamic_smem: >= 0 (checked)
    if n < facts.dyn_smem:
        raise LaunchError(f"kernel {kernel}: smem {n} is less than the {facts.dyn_smem} bytes the kernel needs "
                          f"(LaunchSpec.dynamic_smem); leave smem out to use that")
    if n + facts.static_smem > dev.smem_optin:
        raise LaunchError(f"kernel {kernel}: smem {n} + static {facts.static_smem} bytes of shared memory exceed the "
                          f"{dev.smem_optin} bytes per block device {dev.ordinal} allows")
    return n


def check_cluster(cluster: Any, grid: Dim3, facts: LaunchFacts, dev: DeviceInfo, kernel: str) -> Dim3 | None:
    """The cluster to request with cuLaunchKernelEx (None: plain launch; a compile-time cluster is implied)."""
    want = None if cluster is None else positive_dims(cluster, "cluster", kernel)
    fixed = facts.cluster or facts.spec_cluster
    if fixed is not None and want is not None and want != fixed:
        kind = "compile-time" if facts.cluster else "fixed"
        raise LaunchError(f"kernel {kernel}: cluster {want} differs from the kernel's {kind} cluster {fixed}; "
                          f"leave cluster out to use it")
    use = want or fixed
    if use is None:
        return None
    if not dev.cluster_launch:
        raise LaunchError(f"kernel {kernel}: thread block clusters need compute capability 9.0 or newer; device "
                          f"{dev.ordinal} is {dev.arch_name}")
    size = use[0] * use[1] * use[2]
    if size > MAX_PORTABLE_CLUSTER:
        raise LaunchError(f"kernel {kernel}: cluster {use} has {size} blocks; at most {MAX_PORTABLE_CLUSTER} "
                          f"(the portable cluster size) are allowed")
    if any(g % c for g, c in zip(grid, use)):
        raise LaunchError(f"kernel {kernel}: grid {grid} is not a multiple of the cluster {use}")
    return None if facts.cluster else use


def check_flags(pdl: Any, cooperative: Any, spec: LaunchSpec, dev: DeviceInfo, kernel: str) -> tuple[bool, bool]:
    """(PDL, cooperative) for one launch: the kernel's launch flags (``spec``) with the caller's ``pdl=`` /
    ``cooperative=`` (None: the kernel's own; ``pdl=False`` launches without PDL, as C's KP_LAUNCH_NO_PDL). PDL
    needs compute capability 9.0; a cooperative grid's size is checked at launch (:func:`check_cooperative_grid`)."""
    flag_types(pdl, cooperative, kernel)
    use_pdl = spec.pdl if pdl is None else pdl
    if cooperative is False and spec.cooperative:
        raise LaunchError(f"kernel {kernel}: cooperative=False, but the kernel's launch flags make every launch "
                          f"cooperative (it synchronizes its whole grid)")
    use_coop = spec.cooperative or cooperative is True
    if use_pdl and dev.major < PDL_MIN_MAJOR:
        own = ", the kernel's launch flag" if pdl is None else ""
        raise LaunchError(f"kernel {kernel}: programmatic dependent launch (PDL{own}) "
                          f"needs compute capability {PDL_MIN_MAJOR}.0 or newer; device {dev.ordinal} is "
                          f"{dev.arch_name}{' (pass pdl=False to launch without)' if own else ''}")
    if use_coop and not dev.cooperative_launch:
        raise LaunchError(f"kernel {kernel}: device {dev.ordinal} ({dev.arch_name}) does not support cooperative "
                          f"launches")
    return use_pdl, use_coop


def check_cooperative_grid(grid: Dim3, block: Dim3, smem: int, per_sm: int, dev: DeviceInfo, kernel: str) -> None:
    """A cooperative grid must fit on the device at once: ``per_sm`` (cuOccupancyMaxActiveBlocksPerMultiprocessor)
    x SMs blocks at most."""
    total, threads = grid[0] * grid[1] * grid[2], block[0] * block[1] * block[2]
    most = max(per_sm, 0) * max(dev.sm_count, 0)
    if total > most:
        raise LaunchError(f"kernel {kernel}: cooperative launch of grid {{{grid[0]},{grid[1]},{grid[2]}}} ({total} "
                          f"blocks of {threads} threads, {smem} bytes of dynamic shared memory) exceeds the {most} "
                          f"blocks that can be co-resident on device {dev.ordinal} ({dev.arch_name}): {per_sm} per SM "
                          f"x {dev.sm_count} SMs")
