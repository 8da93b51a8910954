"""liger-kernel's CuTe DSL kernels: capture every ``cute.compile`` liger's wrappers make, compile each kernel-level.

Each captured call (a launcher, its example arguments and options) is compiled with ``kernelpack.cute.compile``:
every kernel the launcher launches becomes a verified kernel-level artifact (cubin + derived ABI + grid formula).
A launcher is named as the package's source names it (the first argument of its ``cute.compile`` call, per file:
:func:`corpus.inventory.cute_launchers`), found by the call's site.

Family rule: a CuTe launcher bakes whatever it is compiled with (element types, static shapes, Python scalars
that are constexprs), and kernelpack's dispatch can tell none of that apart, so every distinct specialization is
its own family (``cute_<launcher>_<what differs>``). A case may name its archs (``archs = ["sm_90a"]`` for
Hopper-only launchers: WGMMA/TMA).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .capture import CuteCompile, cpu_world, cute_compiles
from .cases import Case, run_case, tag
from .results import CAPTURE, DSL, KERNELPACK, Section
from .specs import Spec


class Captured:
    """One ``cute.compile`` call and the archs its case compiles it for."""

    def __init__(self, rec: CuteCompile, archs: tuple[str, ...], qualname: str) -> None:
        self.rec, self.archs, self.qualname = rec, archs, qualname


def capture(cases: Sequence[Case], section: Section, sites: dict[tuple[str, int], str]) -> list[tuple[str, Captured]]:
    out: list[tuple[str, Captured]] = []
    for case in cases:
        for point in case.points():
            where = f"{case.id}[{tag(point)}]"
            recs: list[CuteCompile] = []
            try:
                with cpu_world(), cute_compiles() as recs:
                    run_case(case, point)
            except Exception as e:  # noqa: BLE001 - a wrapper failing after its compiles is still a corpus result
                if not recs:
                    section.fail("", "capture", CAPTURE, f"{type(e).__name__}: {e}", where)
                else:
                    section.notes.append(f"{where}: the wrapper stopped after its cute.compile calls "
                                         f"({type(e).__name__}: {str(e)[:160]})")
            out += [(where, Captured(r, tuple(case.archs), qualname(r, sites))) for r in recs]
    return out


def qualname(rec: CuteCompile, sites: dict[tuple[str, int], str]) -> str:
    """The inventory name of the call site (same file, nearest ``cute.compile`` line at or above the frame's)."""
    path, line = rec.site
    best = None
    for (p, ln), name in sites.items():
        if p == path and ln <= line and (best is None or ln > best[0]):
            best = (ln, name)
    if best is not None:
        return best[1]
    fn = rec.fn
    mod = getattr(fn, "__module__", None) or type(fn).__module__
    return f"{mod}:{rec.name}"


def _describe(v: Any) -> Any:
    """What a launcher bakes from one example argument (a tensor's type and layout, a Python value)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (tuple, list)):
        return [_describe(x) for x in v]
    if type(v).__name__ == "CUstream":
        return "stream"
    text = re.sub(r"0x[0-9a-fA-F]+", "", repr(v))  # addresses differ per run: never part of a key
    dtype = getattr(v, "element_type", None)
    if dtype is not None:
        text = f"{dtype} {text}"
    return text if len(text) < 200 else type(v).__name__


def _param_names(fn: Any, n: int) -> list[str]:
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__ if callable(fn) else fn
    try:
        names = [p for p in inspect.signature(target).parameters if p != "self"]
    except (TypeError, ValueError):
        names = []
    return (names + [f"a{i}" for i in range(len(names), n)])[:n]


def to_spec(where: str, cap: Captured) -> Spec:
    rec = cap.rec
    names = _param_names(rec.fn, len(rec.args))
    fam = {"args": {n: _describe(a) for n, a in zip(names, rec.args)},
           "kwargs": {k: _describe(v) for k, v in sorted(rec.kwargs.items())}, "options": rec.options,
           "object": _describe(rec.fn) if not inspect.isfunction(rec.fn) else "", "archs": list(cap.archs)}
    return Spec(cap.qualname, rec.fn, fam, {}, cap, [where])


def describe_launch(spec: Spec, compiled: Any) -> dict[str, Any]:
    """The recorded launch of a compiled CuTe spec (``corpus.cute_launch``): the launcher's run-time arguments
    and what each kernel (or the host program) is passed, for the GPU run to replay without CuTe DSL."""
    from . import cute_launch

    rec = spec.payload.rec
    host = cute_launch.host_values(rec.fn, rec.args, _param_names(rec.fn, len(rec.args)), rec.call)
    return cute_launch.describe_launch(host, compiled, spec.kernel)


NO_KERNEL_LEVEL = "no kernel-level C form"


def compile_spec(spec: Spec, archs: Sequence[str]) -> Any:
    """Kernel-level (a Bundle); a launcher whose kernels take host-built values kernel-level C cannot express (TMA
    atoms, built by its host code), or whose kernel ABI kernelpack cannot derive from the launcher's arguments (an
    ``AbiMismatch`` with the cubin), is exported whole as a CuTe host program instead -- kernelpack's path for such
    launchers (``kernelpack.cute.export``; its parameters are checked against the host function CuTe lowered)."""
    import kernelpack.cute as kc
    from kernelpack.core.errors import KernelpackError

    cap: Captured = spec.payload
    rec = cap.rec
    arch = list(cap.archs or archs)
    try:
        return kc.compile(rec.fn, *rec.args, arch=arch, name=spec.family, options=rec.options,
                          kwargs=dict(rec.kwargs) or None)
    except KernelpackError as e:
        if NO_KERNEL_LEVEL not in str(e) and type(e).__name__ != "AbiMismatch":
            raise
        return kc.export(rec.fn, *rec.args, arch=arch, name=spec.family, options=rec.options,
                         kwargs=dict(rec.kwargs) or None)


def classify(err: str) -> str:
    return DSL if "CuTe compile for" in err else KERNELPACK


def sites(root: Path, subdirs: tuple[str, ...]) -> tuple[list[Any], dict[tuple[str, int], str]]:
    from .inventory import cute_launchers

    defined = cute_launchers(root, subdirs)
    return defined, {(str(d.path), d.line): d.name for d in defined}
