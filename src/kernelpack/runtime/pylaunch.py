"""What the Python launch path computes around a launch (the C extension does the same in C): the grid from the
kernel's grid formula, the tensor maps of its descriptor arguments (encoded, kept per family), Triton's scratch
buffers allocated on the launch stream, and the device copy of a tensor list's descriptors. Imported by
:mod:`.family` on the Python path's first use."""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..core.abi import Scalar, Struct
from ..core.errors import LaunchError
from ..core.launchspec import LaunchSpec, evaluate_grid, grid_params
from ..core.tma import encode_args
from ..launch.family import Specialization
from ..launch.plan import OP_DESC, OP_DESC_FIELD, OP_DEVICE, Plan, Slot
from . import packer
from .driver import Driver

if TYPE_CHECKING:
    from .family import DeviceEntry


def grid_from_rule(entry: DeviceEntry, packed: list[Any]) -> tuple[int, int, int]:
    """The grid ``LaunchSpec.grid`` computes from the checked arguments and the device-derived values
    (``kernelpack.core.launchspec.evaluate_grid``)."""
    spec = entry.spec
    assert spec is not None  # the Python path's: the family is whole
    by_name = {s.param.name: s for s in entry.layout.slots if s.op == OP_DEVICE}
    by_name.update({s.name: s for s in entry.layout.args})
    fields: dict[tuple[str, str | None], int] = {}
    rule = spec.src.launch.grid
    assert rule is not None
    for e in rule:
        for name, fld in grid_params(e):
            s = by_name.get(name)
            if s is not None and s.op == OP_DEVICE:
                fields[(name, fld)] = entry.values[s.param.role]
            else:
                fields[(name, fld)] = _grid_field(spec, s, packed, name, fld)
    return evaluate_grid(rule[0], fields), evaluate_grid(rule[1], fields), evaluate_grid(rule[2], fields)


def _grid_field(spec: Specialization, s: Slot | None, packed: list[Any], name: str, fld: str | None) -> int:
    if s is None or s.op in (OP_DESC, OP_DESC_FIELD):
        raise LaunchError(f"kernel {spec.label}: the grid formula reads {name}, which is not a caller argument "
                          f"(a parameter filled from a tensor descriptor or a hidden one); pass grid=...")
    v = packed[s.arg]
    if fld is None:
        return int(v)
    if s.tensor is not None:
        ptr, shape, strides = v
        return int(shape[int(fld[5:])] if fld.startswith("shape") else strides[int(fld[6:])])
    t = s.param.type
    assert isinstance(t, Struct)
    off = dict(zip((f.name for f in t.fields), t.field_offsets))[fld]
    ft = next(f.type for f in t.fields if f.name == fld)
    assert isinstance(ft, Scalar)  # checked when the artifact was made
    return int(struct.unpack_from("<" + ft.dtype.struct_format, bytes(v), off)[0])


def scratch_sizes(ls: LaunchSpec) -> tuple[int, int, int, int] | None:
    if not (ls.global_scratch or ls.profile_scratch):
        return None
    return ls.global_scratch, ls.global_scratch_align, ls.profile_scratch, ls.profile_scratch_align


TMAP_CACHE = 16  # encoded tensor maps kept per family on the Python path (as KP_TMAP_CACHE in _launch.h)


def encode_descs(d: Driver, plan: Plan, packed: list[Any], kernel: str, where: str,
                  cache: OrderedDict[tuple[Any, ...], tuple[Driver, list[Any]]] | None = None) -> list[Any]:
    """Replace each tensor-descriptor argument by the values of the params it fills (the map encoded). ``cache``:
    the family's maps, by descriptor slot, address, shape and strides (least recently used dropped; the driver that
    encoded one must be ``d``)."""
    out = list(packed)
    for s in plan.args:
        if s.op != OP_DESC:
            continue
        view, spec = packed[s.arg], s.desc
        assert spec is not None
        key = (id(s), view.ptr, tuple(view.shape), tuple(view.strides))
        hit = cache.get(key) if cache is not None else None
        if hit is not None and hit[0] is d:
            cache.move_to_end(key)  # type: ignore[union-attr]
            out[s.arg] = hit[1]
            continue
        args = encode_args(spec, view.ptr, view.shape, view.strides, driver_version=d.version, kernel=kernel)
        values = list(args.values)
        if args.encode is not None:
            values[0] = d.encode_tensor_map(args.encode, where)
            if cache is not None:
                cache[key] = (d, values)
                cache.move_to_end(key)
                while len(cache) > TMAP_CACHE:
                    cache.popitem(last=False)
        out[s.arg] = values
    return out


def launch_with_scratch(d: Driver, entry: DeviceEntry, grid: tuple[int, int, int], block: tuple[int, int, int],
                         smem: int, cluster: tuple[int, int, int] | None, stream: int, packed: list[Any],
                         where: str, flags: tuple[bool, bool] = (False, False)) -> None:
    """Triton scratch: ``size x CTAs`` bytes per buffer, one stream-ordered allocation on the launch stream for
    this launch only (cuMemAllocAsync, cuMemFreeAsync right after the launch), as ``kp_run_scratch`` in the C
    library does; the current context is the launch device's."""
    sizes = scratch_sizes(entry.spec_launch)
    assert sizes is not None
    gsize, galign, psize, palign = sizes
    ctas = grid[0] * grid[1] * grid[2]
    gbytes, pbytes = ctas * gsize, ctas * psize
    align = max(galign, palign)
    poff = (gbytes + palign - 1) // palign * palign
    total = poff + pbytes + (align if align > 256 else 0)  # the driver's pools align to 256 bytes
    base = d.mem_alloc_async(total, stream, where)
    try:
        start = (base + align - 1) // align * align if align > 256 else base
        scratch = {"global_scratch": start if gsize else 0, "profile_scratch": start + poff if psize else 0}
        buf, ptrs = packer.pack(entry.layout, packed, {**entry.values, **scratch})
        d.launch(entry.kernel, grid, block, smem, stream, ptrs, cluster, where, *flags)
        del buf
    finally:
        d.mem_free_async(base, stream, where)


def list_words(plan: Plan, packed: list[Any]) -> tuple[bytes, list[int]]:
    """The descriptors of every tensor-list argument, one list after the other, each list's start 16-byte aligned
    (each ``1 + 2*rank`` little-endian 64-bit words per tensor: data pointer, extents, strides), and where each list
    starts (bytes), as ``kp_run_lists`` lays them out in the C library."""
    out, starts = bytearray(), []
    for s in plan.lists:
        out += bytes(-len(out) % 16)
        starts.append(len(out))
        for ptr, shape, strides in packed[s.arg]:
            out += struct.pack(f"<Q{len(shape)}q{len(strides)}q", ptr, *shape, *strides)
    return bytes(out), starts


@contextmanager
def staged_lists(d: Driver, plan: Plan, packed: list[Any], stream: int, where: str) -> Iterator[list[Any]]:
    """The arguments with each tensor list replaced by ``(device address, count)`` of its descriptors, copied for
    this launch into one stream-ordered allocation on the launch stream (cuMemAllocAsync, cuMemcpyHtoDAsync from
    host memory the driver has read when the call returns; cuMemFreeAsync after the launch), as ``kp_run_lists`` in
    the C library does; the current context is the launch device's."""
    data, starts = list_words(plan, packed)
    base = d.mem_alloc_async(len(data), stream, where, "tensor-list descriptors")
    try:
        d.memcpy_htod_async(base, data, stream, where)
        out = list(packed)
        for s, start in zip(plan.lists, starts, strict=True):
            out[s.arg] = (base + start, len(packed[s.arg]))
        yield out
    finally:
        d.mem_free_async(base, stream, where, "tensor-list descriptors")
