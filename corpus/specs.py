"""Captured launches -> compiled specializations -> kernel families, for any DSL.

A *spec* is one specialization to compile (what one or more captured launches need). Specs of one kernel group
into *families* (one C entry / Python callable each) where kernelpack's dispatch can tell them apart at run time:
only pointer element types and alignment/divisibility may differ within a family (``launch/family.py``); any other
difference (a BLOCK_SIZE bucket, num_warps, a scalar's width, a different argument list) makes another family,
named after what differs (``rms_norm_forward_kernel_BLOCK_SIZE4096``).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Spec:
    kernel: str  # module:function
    obj: Any  # the DSL's kernel object
    family_key: dict[str, Any]  # what must be equal within a family
    variant_key: dict[str, Any]  # what may differ (pointer dtypes, divisibility, dtype-valued constants)
    payload: Any  # what the DSL driver compiles from
    sources: list[str] = field(default_factory=list)  # case[point] that needed it
    family: str = ""
    variant: str = ""

    @property
    def key(self) -> str:
        return stable({"k": self.kernel, "f": self.family_key, "v": self.variant_key})


def stable(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=repr)


def dedupe(specs: Sequence[Spec]) -> list[Spec]:
    out: dict[str, Spec] = {}
    for s in specs:
        if s.key in out:
            out[s.key].sources += [x for x in s.sources if x not in out[s.key].sources]
        else:
            out[s.key] = s
    return list(out.values())


def short_name(name: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"\W", "_", name)).strip("_") or "kernel"


def _fmt(v: Any) -> str:
    s = v if isinstance(v, str) else repr(v)
    s = s.replace("triton.language.", "").replace("True", "T").replace("False", "F").replace("None", "N")
    return re.sub(r"[^A-Za-z0-9]", "", s)[:12]


def assign_families(specs: Sequence[Spec], prefix: str = "",
                    variant_name: Callable[[Spec], str] | None = None, reserved: frozenset[str] = frozenset(),
                    reserved_prefix: str = "") -> None:
    """Set ``family`` and ``variant`` on every spec (deterministic: depends only on the specs' keys). A base name in
    ``reserved`` (another section of the same library uses it: liger's cuTile ``_dyt_fwd_kernel`` and Triton
    ``_dyt_fwd_kernel``) gets ``reserved_prefix``."""
    by_kernel: dict[str, list[Spec]] = defaultdict(list)
    for s in sorted(specs, key=lambda s: s.key):
        by_kernel[s.kernel].append(s)
    bases: dict[str, str] = {}
    taken: dict[str, str] = {}
    for kernel in sorted(by_kernel):
        mod, _, fn = kernel.partition(":")
        base = prefix + short_name(fn)
        if base in reserved:
            base = reserved_prefix + base
        if base in taken and taken[base] != kernel:
            base = prefix + short_name(mod.split(".")[-1] + "_" + fn)
        taken[base] = kernel
        bases[kernel] = base
    for kernel, group in by_kernel.items():
        fams: dict[str, list[Spec]] = defaultdict(list)
        for s in group:
            fams[stable(s.family_key)].append(s)
        keys = sorted(fams)
        names = _family_names(bases[kernel], [json.loads(k) for k in keys])
        for k, name in zip(keys, names):
            _name_variants(fams[k], name, variant_name)


_ABBREV = {"num_warps": "w", "num_stages": "s", "num_ctas": "c", "maxnreg": "r"}


def _family_names(base: str, keys: list[dict[str, Any]]) -> list[str]:
    if len(keys) == 1:
        return [base]
    fields = sorted({f for k in keys for f in k})
    differing = [f for f in fields if len({stable(k.get(f)) for k in keys}) > 1]
    names = []
    for k in keys:
        parts = []
        for f in differing:
            v = k.get(f)
            if isinstance(v, dict):
                sub = [x for x in sorted(v) if len({stable(kk.get(f, {}).get(x)) for kk in keys}) > 1]
                parts += [f"{_ABBREV.get(x, short_name(x))}{_fmt(v.get(x))}" for x in sub]
            elif not isinstance(v, list):  # a list (cuTile's per-parameter constraints) names nothing short
                parts.append(f"{_ABBREV.get(f, short_name(f))}{_fmt(v)}")
        parts = [x for x in parts if "Tensor" not in x][:4]  # tensor layouts name nothing useful; keep it short
        names.append(short_name(f"{base}_{'_'.join(parts)}"[:72]))
    seen: dict[str, int] = defaultdict(int)
    out = []
    for n in names:
        seen[n] += 1
        out.append(n if names.count(n) == 1 else f"{n}_{seen[n]}")
    return out


def _name_variants(group: list[Spec], family: str, variant_name: Callable[[Spec], str] | None) -> None:
    for s in group:
        s.family = family
    if len(group) == 1:
        group[0].variant = ""
        return
    names = [short_name(variant_name(s)) if variant_name else "" for s in group]
    for i, s in enumerate(group):
        n = names[i] or f"v{i}"
        s.variant = n if names.count(names[i]) == 1 and names[i] else f"{n}_{i}"
