"""What ``repr``, ``__doc__`` and ``inspect.signature`` say about a kernel family."""

from __future__ import annotations

import inspect
from typing import Any

from ..bundle.artifact import KernelArtifact
from ..core._reprs import clip, listing
from ..core.arch import Arch
from ..core.errors import KernelpackError
from ..core.launchspec import GridExpr
from ..launch.device import requires_text
from ..launch.plan import OP_DEVICE, OP_SCRATCH
from .family import KernelFamily, Specialization


def _dim(d: tuple[int, int, int] | None) -> str:
    return "x".join(map(str, d)) if d else "-"


def _arg_text(family: KernelFamily, i: int) -> str:
    texts = []
    for s in family.specs:
        t = s.plan.args[i].describe().split(": ", 1)[1]
        if t not in texts:
            texts.append(t)
    return f"{family.arg_names[i]}: {' | '.join(texts)}"


def signature_text(family: KernelFamily) -> str:
    cached = getattr(family, "_signature_text", None)
    if cached is not None:
        return cached
    args = ", ".join(_arg_text(family, i) for i in range(len(family.arg_names)))
    block = _common_block(family)
    grid = "grid=None" if all(sp.artifact.launch.grid is not None for sp in family.specs) else "grid"
    opts = f"{grid}, block={block}" if block else f"{grid}, block=None" if block_optional(family) else f"{grid}, block"
    text = f"{family.name}({args}, *, {opts}, smem=None, stream=None, cluster=None, pdl=None, cooperative=None)"
    family._signature_text = text  # type: ignore[attr-defined]
    return text


def _fixed_blocks(family: KernelFamily) -> set[Any]:
    """The block each binary of each specialization fixes (its LaunchSpec's, else its cubin's REQNTID; None: it
    fixes none, the caller gives it)."""
    blocks = set()
    for s in family.specs:
        for b in s.artifact.binaries:
            blk = s.artifact.launch_for(b.arch).block
            if blk is None and b.kind == "cubin":
                blk = _cubin_kernel(s.artifact, b.arch).reqntid
            blocks.add(blk)
    return blocks


def _common_block(family: KernelFamily) -> str | None:
    """The one block every binary of the family fixes, as text; None when they fix none or several."""
    blocks = _fixed_blocks(family)
    if len(blocks) == 1 and None not in blocks:
        return _dim(blocks.pop())
    return None


def block_optional(family: KernelFamily) -> bool:
    """Whether a call may leave ``block`` out: every specialization fixes its own (a Triton family's configs each
    run 32 x num_warps threads, which may differ: the one dispatch chooses launches with its own)."""
    return None not in _fixed_blocks(family)


class _NoFacts:
    reqntid = None


def _cubin_kernel(art: KernelArtifact, arch: Any) -> Any:
    """The cubin's facts for ``art``'s entry, or none when the cubin cannot be read (a lazily loaded bundle: its
    first launch refuses it, naming the kernel)."""
    try:
        return art.cubin_kernel(arch)
    except KernelpackError:
        return _NoFacts()


def _requirements(art: KernelArtifact) -> list[str]:
    out = []
    ls = art.launch
    for b in art.binaries:
        own = _own_facts(art, b.arch)  # where this arch's binary launches otherwise than the artifact
        if b.kind != "cubin":
            out.append(f"{b.target} PTX (JIT-compiled by the driver on first load)" + "".join(f", {f}" for f in own))
            continue
        try:
            ck = art.cubin_kernel(b.arch)
        except KernelpackError as e:  # a bundle loaded lazily: the launch refuses it, naming the kernel
            out.append(f"{b.arch}: unusable cubin ({e.message})")
            continue
        facts = [f"{ck.registers} regs", *own]
        if ck.static_smem:
            facts.append(f"{ck.static_smem} B static smem")
        if ck.stack_bytes:
            facts.append(f"{ck.stack_bytes} B stack")
        if ck.reqntid:
            facts.append(f"block must be {_dim(ck.reqntid)} (REQNTID)")
        elif ck.max_threads:
            facts.append(f"block <= {ck.max_threads[0] * ck.max_threads[1] * ck.max_threads[2]} threads")
        if ck.explicit_cluster and ck.cluster_dims:
            facts.append(f"cluster {_dim(ck.cluster_dims)} (compile-time)")
        out.append(f"{b.arch}: {', '.join(facts)}")
    if ls.block:
        out.append(f"block fixed at {_dim(ls.block)}")
    if ls.dynamic_smem:
        out.append(f"needs {ls.dynamic_smem} B dynamic smem")
    if ls.cluster:
        out.append(f"launched with cluster {_dim(ls.cluster)}")
    if ls.pdl:
        out.append("launched with programmatic dependent launch (pdl=False: without)")
    if ls.cooperative:
        out.append("launched cooperatively (its grid must fit on the device at once)")
    if ls.grid is not None:
        out.append(f"grid computed from the arguments when none is given: {_grid_text(ls.grid)}")
    if art.requirements:
        out.append(f"only on devices with {requires_text(art.requirements)}")
    return out


def _own_facts(art: KernelArtifact, arch: Arch) -> list[str]:
    """What the binaries of ``arch`` launch with where it is not the artifact's (KernelArtifact.per_arch)."""
    own = art.arch_launches.get(arch)
    if own is None:
        return []
    out = []
    ls = own.launch
    if ls is not None:
        if ls.block != art.launch.block and ls.block:
            out.append(f"block fixed at {_dim(ls.block)}")
        if ls.dynamic_smem != art.launch.dynamic_smem:
            out.append(f"needs {ls.dynamic_smem or 0} B dynamic smem")
        if ls.cluster != art.launch.cluster:
            out.append(f"launched with cluster {_dim(ls.cluster)}")
        lowerings = sorted({d.lowering for d in ls.tensor_descs})
        if lowerings and lowerings != sorted({d.lowering for d in art.launch.tensor_descs}):
            out.append(f"tensor descriptors passed {' and '.join(_LOWERED[x] for x in lowerings)}")
    if own.abi is not None:
        out.append(f"its own kernel parameters ({len(own.abi.params)})")
    return out


_LOWERED = {"tma": "as CUtensorMap (TMA)", "decomposed": "as pointer, shape and strides"}


def _grid_text(rule: tuple[GridExpr, GridExpr, GridExpr]) -> str:
    def text(e: GridExpr) -> str:
        if isinstance(e, int):
            return str(e)
        if e[0] == "arg":
            return e[1] if e[2] is None else f"{e[1]}.{e[2]}"
        return f"{e[0]}({text(e[1])}, {text(e[2])})"

    return "(" + ", ".join(text(e) for e in rule) + ")"


def _spec_text(s: Specialization) -> str:
    a = s.artifact
    lines = [f"  {a.label}  ({a.provenance.frontend} {a.provenance.frontend_version}, entry {a.entry})".rstrip()]
    lines.append("      " + ", ".join(slot.describe() for slot in s.plan.args))
    ls = a.launch
    hidden = [slot.name + (f" ({slot.param.role}, {getattr(ls, slot.param.role)} bytes per CTA allocated per launch)"
                           if slot.op == OP_SCRATCH else f" ({slot.param.role}, read from the device)"
                           if slot.op == OP_DEVICE else f" ({slot.param.role}, passed NULL)")
              for slot in s.plan.slots if slot.arg < 0]
    if hidden:
        lines.append("      hidden: " + ", ".join(hidden))
    lines += [f"      {r}" for r in _requirements(a)]
    return "\n".join(lines)


def doc_text(family: KernelFamily, source: str) -> str:
    n = len(family.specs)
    head = signature_text(family)
    body = [f"Kernel family {family.name} from {source}: {n} specialization{'s' if n != 1 else ''}, tried in this "
            f"order (the first every argument fits is launched):"]
    body += [_spec_text(s) for s in family.specs]
    body.append("Arguments: torch tensors, __cuda_array_interface__ or DLPack arrays for pointers and tensors (an "
                "int is a raw device pointer); Python numbers for scalars. grid/block/cluster: an int or a tuple of up "
                "to 3. smem: dynamic shared memory bytes. stream: None (torch's current stream with torch tensors, "
                "else the default stream), an int handle, or a stream object. pdl: None (the kernel's launch flag), "
                "True or False: programmatic dependent launch (sm_90+). cooperative: True for a cooperative launch "
                "(all blocks co-resident), refused when the grid does not fit.")
    return head + "\n\n" + "\n".join(body)


def repr_text(family: KernelFamily) -> str:
    """One bounded line (the whole signature is in ``__doc__``)."""
    labels = listing((s.label for s in family.specs), 60)
    return f"<kernelpack kernel {clip(signature_text(family), 200)} [{labels}]>"


def signature(family: KernelFamily) -> inspect.Signature:
    P = inspect.Parameter
    params = [P(name, P.POSITIONAL_OR_KEYWORD, annotation=_arg_text(family, i).split(": ", 1)[1])
              for i, name in enumerate(family.arg_names)]
    if all(s.artifact.launch.grid is not None for s in family.specs):
        params.append(P("grid", P.KEYWORD_ONLY, default=None))
    else:
        params.append(P("grid", P.KEYWORD_ONLY))
    for name in ("block", "smem", "stream", "cluster", "pdl", "cooperative"):
        params.append(P(name, P.KEYWORD_ONLY, default=None))
    return inspect.Signature(params, return_annotation=None)
