"""Per-binary launch facts: what a launch from the binary a device runs must use, one rule for both back ends.

A launch uses the facts of the binary chosen for its device (:mod:`.binaries`): the binary's LaunchSpec (the
artifact's, or its arch's own in ``KernelArtifact.per_arch``: block, dynamic shared memory, cluster, scratch) and
what its cubin says (REQNTID, ``__launch_bounds__``, compile-time cluster, static shared memory) -- so one artifact
can carry binaries that cuTile compiled for 128 threads on sm_80 and 256 on sm_90a. Its kernel parameters are the
binary's *layout*: every layout of an artifact takes the same caller-visible arguments (:func:`check_caller_args`),
so dispatch and the caller's signature are one per artifact, while packing follows the chosen binary (a tensor
descriptor encoded as a CUtensorMap for sm_90a, passed as pointer, shapes and strides for sm_80).

The C library renders :func:`facts` of every binary as its tables (``kp_bin_info`` from the cubin, ``kp_bin_launch``
from the LaunchSpec, with the layout index) and one launch body per layout; the runtime keeps :class:`BinaryFacts`
and the layout's :class:`~.plan.Plan` in each device's dispatch entry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..core.abi import Abi
from ..core.binary import Binary
from ..core.errors import AbiMismatch
from ..core.launchspec import Dim3, LaunchSpec
from ..core.records import record
from .plan import OP_DESC, Plan, Slot

if TYPE_CHECKING:  # the launch model reads artifacts; it is below the bundle layer that defines them
    from ..bundle.artifact import KernelArtifact


@record(frozen=True)
class BinaryFacts:
    """What a launch of one artifact from one of its binaries must respect."""

    fixed_block: Dim3 | None  # LaunchSpec.block
    reqntid: Dim3 | None  # the cubin's required block
    max_threads: int  # __launch_bounds__ threads (0: unknown)
    cluster: Dim3 | None  # the cubin's compile-time cluster (the driver enforces it)
    spec_cluster: Dim3 | None  # LaunchSpec.cluster (requested with cuLaunchKernelEx)
    static_smem: int
    dyn_smem: int  # LaunchSpec.dynamic_smem (0: none)
    layout: int = 0  # which of the artifact's parameter layouts (Layouts.plans) the binary takes

    @classmethod
    def of(cls, art: KernelArtifact, b: Binary) -> BinaryFacts:
        return facts(art, b)

    @property
    def block(self) -> Dim3 | None:
        """The block a launch that names none uses."""
        return self.fixed_block or self.reqntid


def launch_bounds_threads(max_threads: Sequence[int] | None) -> int:
    """The thread limit of a cubin kernel's ``__launch_bounds__`` / ``.maxntid`` (0: none)."""
    return math.prod(max_threads) if max_threads else 0


def enforced_cluster(cluster_dims: Dim3 | None, explicit: bool) -> Dim3 | None:
    """The compile-time cluster the driver enforces for a cubin kernel: an explicit, non-zero ``__cluster_dims__``."""
    return cluster_dims if explicit and cluster_dims and cluster_dims[0] else None


def facts(art: KernelArtifact, b: Binary) -> BinaryFacts:
    """The launch facts of binary ``b`` of ``art``."""
    return binary_facts(art.entry, art.launch_for(b.arch), layout_index(art, b), b)


def binary_facts(entry: str, ls: LaunchSpec, layout: int, b: Binary) -> BinaryFacts:
    """The launch facts of kernel ``entry`` in binary ``b``, which launches with ``ls`` and parameter layout
    ``layout``."""
    if b.kind != "cubin":
        return BinaryFacts(ls.block, None, 0, None, ls.cluster, 0, ls.dynamic_smem or 0, layout)
    ck = b.cubin.kernel(entry)
    return BinaryFacts(ls.block, ck.reqntid, launch_bounds_threads(ck.max_threads),
                       enforced_cluster(ck.cluster_dims, ck.explicit_cluster), ls.cluster, ck.static_smem,
                       ls.dynamic_smem or 0, layout)


def layout_key(abi: Abi, launch: LaunchSpec) -> tuple[object, ...]:
    """What decides how the kernel params are filled (the rest of a LaunchSpec is read per binary at run time)."""
    return (abi, launch.tensor_descs, launch.global_scratch, launch.global_scratch_align, launch.profile_scratch,
            launch.profile_scratch_align)


def layouts(art: KernelArtifact) -> tuple[tuple[Abi, LaunchSpec], ...]:
    """The artifact's parameter layouts: its own first, then each other one of its binaries, in binary order."""
    return layouts_of([(art.abi, art.launch)] + [(art.abi_for(b.arch), art.launch_for(b.arch)) for b in art.binaries])


def layouts_of(pairs: list[tuple[Abi, LaunchSpec]]) -> tuple[tuple[Abi, LaunchSpec], ...]:
    """:func:`layouts` from the (kernel parameters, launch spec) of the artifact, then of each binary in order (what
    the runtime's index computes from a manifest entry without building the artifact)."""
    out: list[tuple[Abi, LaunchSpec]] = []
    keys: list[tuple[object, ...]] = []
    for abi, launch in pairs:
        key = layout_key(abi, launch)
        if key not in keys:
            keys.append(key)
            out.append((abi, launch))
    return tuple(out)


def layout_index(art: KernelArtifact, b: Binary) -> int:
    """Which of :func:`layouts` binary ``b`` takes."""
    key = layout_key(art.abi_for(b.arch), art.launch_for(b.arch))
    return [layout_key(abi, ls) for abi, ls in layouts(art)].index(key)


def plans(art: KernelArtifact) -> tuple[Plan, ...]:
    """The argument plan of each layout (the first one's caller-visible arguments are every layout's)."""
    return tuple(Plan.of(abi, ls, art.range_rules) for abi, ls in layouts(art))


def caller_view(s: Slot) -> tuple[object, ...]:
    """What the caller sees of one argument: a tensor descriptor's name, element type and rank (its lowering is
    the binary's business), any other argument's whole parameter."""
    if s.op == OP_DESC and s.desc is not None:
        return ("desc", s.desc.arg, s.desc.dtype, s.desc.rank)
    return ("param", s.param)


def check_caller_args(art: KernelArtifact) -> None:
    """AbiMismatch unless every layout of ``art`` takes the same caller-visible arguments (names, types, constraints;
    a tensor descriptor's dtype and rank)."""
    if len(layouts(art)) < 2:  # one layout: nothing to compare (and no plan to build here)
        return
    ps = plans(art)
    first = [caller_view(s) for s in ps[0].args]
    for i, plan in enumerate(ps[1:], 1):
        if [caller_view(s) for s in plan.args] != first:
            archs = sorted({str(b.arch) for b in art.binaries if layout_index(art, b) == i})
            want = ", ".join(s.describe() for s in ps[0].args) or "none"
            have = ", ".join(s.describe() for s in plan.args) or "none"
            raise AbiMismatch(f"kernel {art.label}: the binaries for {', '.join(archs) or 'some archs'} take other "
                              f"arguments ({have}) than the artifact ({want}); every arch of one artifact must take "
                              f"the same caller-visible arguments")
