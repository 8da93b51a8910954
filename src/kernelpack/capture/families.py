"""Captured launches -> families and specializations, merged into what earlier captures of the project found.

A *family* is one entry of ``kernelpack.toml`` (one C entry, one Python callable): launches of one kernel whose
specializations kernelpack's dispatch can tell apart at run time -- they differ only in pointer element types and
divisibility (Triton), array dtypes and divisibility (cuTile). Any other difference (a constexpr, ``num_warps``, a
scalar's width, an argument made a constant) makes another family, named after what differs
(``rms_norm_forward_kernel_BLOCK_SIZE4096_w8``). A CuTe launcher bakes everything it is compiled with: each distinct
``cute.compile`` is a family.

Names are stable: a family or specialization found by an earlier capture keeps its name; a new one gets a name no
other has.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..core.launchspec import evaluate_grid
from . import grids
from .records import Launch, short_name, stable

MAX_SAMPLES = 16  # grids kept per specialization (to check a family's grid formula against)


@dataclass
class Spec:
    variant: str
    key: dict[str, Any]
    call: str
    imports: list[str]
    launches: int = 0
    sources: list[str] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)  # {"grid": [...], "args": {int args}, "consts": {}}
    chosen: list[str] = field(default_factory=list)  # autotune: the configs runs chose
    measured: list[dict[str, Any]] = field(default_factory=list)  # autotune on a GPU: key -> timings

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class Family:
    dsl: str
    name: str
    kernel: str
    key: dict[str, Any]
    options: dict[str, Any]
    configs: list[str] = field(default_factory=list)
    formulas: list[Any] = field(default_factory=list)  # the traced grid formula of each launch (None: none)
    specs: list[Spec] = field(default_factory=list)
    archs: list[str] = field(default_factory=list)  # the archs of the devices its launches were captured for
    prebuilt: str = ""  # CuTe: the file kernelpack compiled the launcher into (relative to the project)
    error: str = ""  # CuTe: why it could not be compiled

    def to_json(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["specs"] = [s.to_json() for s in self.specs]
        out["formulas"] = [_json_formula(f) for f in self.formulas]
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Family:
        specs = [Spec(**s) for s in d.get("specs", [])]
        return cls(d["dsl"], d["name"], d["kernel"], d["key"], d.get("options", {}), list(d.get("configs", [])),
                   [_formula_from_json(f) for f in d.get("formulas", [])], specs, list(d.get("archs", [])),
                   d.get("prebuilt", ""), d.get("error", ""))

    @property
    def launches(self) -> int:
        return sum(s.launches for s in self.specs)

    def grid(self) -> tuple[list[str] | None, str]:
        """The family's grid formulas as ``kernelpack.toml`` writes them, or None and why not."""
        if not self.formulas or any(f is None for f in self.formulas):
            return None, "the wrapper computed the grid (no formula of the arguments): callers pass it"
        texts = {tuple(grids.text(e) for e in f) for f in self.formulas}
        if len(texts) != 1:
            return None, f"launches traced {len(texts)} different grid formulas: callers pass the grid"
        f = self.formulas[0]
        for s in self.specs:
            for sample in s.samples:
                try:
                    got = [evaluate_grid(grids.substitute(e, sample["consts"]), {
                        (k, None): v for k, v in sample["args"].items()}) for e in f]
                except (grids.Untraceable, KeyError):
                    return None, "the grid formula reads a value a launch did not record: callers pass the grid"
                if got != list(sample["grid"]):
                    return None, f"the traced formula gives {got} where a launch used {sample['grid']}"
        return list(next(iter(texts))), ""


def _json_formula(f: Any) -> Any:
    if f is None:
        return None
    return [list(_lists(e)) if isinstance(e, tuple) else e for e in f]


def _lists(e: Any) -> Any:
    return [(_lists(x) if isinstance(x, tuple) else x) for x in e]


def _formula_from_json(f: Any) -> Any:
    if f is None:
        return None
    return tuple(_tuples(e) for e in f)


def _tuples(e: Any) -> Any:
    return tuple(_tuples(x) for x in e) if isinstance(e, list) else e


_ABBREV = {"num_warps": "w", "num_stages": "s", "num_ctas": "c", "maxnreg": "r"}


def _fmt(v: Any) -> str:
    if isinstance(v, str) and re.fullmatch(r"[A-Za-z_][\w.]*\.([A-Za-z_]\w*)", v):
        v = v.rsplit(".", 1)[1]  # a dotted name (a type: cutlass.base_dsl.typing.BFloat16): its last part
    s = v if isinstance(v, str) else repr(v)
    s = s.replace("triton.language.", "").replace("True", "T").replace("False", "F").replace("None", "N")
    return re.sub(r"[^A-Za-z0-9]", "", s)[:12]


def _differences(key: dict[str, Any], others: list[dict[str, Any]]) -> list[str]:
    """Short name parts that tell ``key`` apart from the others (``BLOCK_SIZE4096``, ``w8``): each differing field
    gives a part and the others it tells apart; the fewest parts (greedy) that tell it apart from all, in field
    order, at most four."""
    cands: list[tuple[str, set[int]]] = []

    def add(part: str, tells: set[int]) -> None:
        if not tells or "Tensor" in part:
            return
        for j, (p, t) in enumerate(cands):
            if p == part:
                cands[j] = (p, t | tells)
                return
        cands.append((part, tells))

    def sub(o: dict[str, Any], f: str, k: str) -> Any:
        return o[f].get(k) if isinstance(o.get(f), dict) else None

    for f in sorted(key):
        v = key[f]
        if isinstance(v, dict):
            for k in sorted(v):
                add(f"{_ABBREV.get(k, short_name(k))}{_fmt(v[k])}",
                    {i for i, o in enumerate(others) if stable(sub(o, f, k)) != stable(v[k])})
        elif isinstance(v, list):
            for i, o in enumerate(others):
                if stable(o.get(f)) != stable(v):
                    add(_list_difference(v, [o.get(f)])[0], {i})
        else:
            add(f"{_ABBREV.get(f, short_name(f))}{_fmt(v)}",
                {i for i, o in enumerate(others) if stable(o.get(f)) != stable(v)})
    left, chosen = set(range(len(others))), []
    while left:
        best = max(range(len(cands)), key=lambda j: (len(cands[j][1] & left), -j), default=None)
        if best is None or not cands[best][1] & left:
            break
        chosen.append(best)
        left -= cands[best][1]
    return [cands[j][0] for j in sorted(chosen)][:4]


def _list_difference(v: list[Any], others: list[Any]) -> list[str]:
    """For each other family, the first element of ``v`` that tells them apart (a described tensor by its element
    type, else by its first static extent that differs): up to three distinct parts."""
    out: list[str] = []
    for o in others:
        for i, x in enumerate(v):
            y = o[i] if isinstance(o, list) and len(o) > i else None
            if stable(x) == stable(y):
                continue
            if isinstance(x, str):
                words = x.split(" ")
                same_type = isinstance(y, str) and y.split(" ")[0] == words[0]
                x = _shape_part(x, str(y)) if same_type else words[0]
            elif isinstance(x, dict):
                x = next((z for z in x.values() if isinstance(z, (int, str))), i)
            part = _fmt(x) if not isinstance(x, (list, dict)) else f"a{i}"
            if part not in out:
                out.append(part)
            break
        if len(out) == 3:
            break
    return out or [f"n{len(v)}"]


def _shape_part(x: str, y: str) -> str:
    """What a described tensor's layout has that another's of the same element type lacks: its first number (a
    static extent) that differs, else ``dyn``."""
    import re as _re

    for a, b in zip(_re.findall(r"\d+", x.split(" ", 1)[-1]), _re.findall(r"\d+", y.split(" ", 1)[-1])):
        if a != b:
            return a
    return "dyn"


def variant_name(launch: Launch) -> str:
    return short_name(launch.label) if launch.label else "v"


def merge(families: list[Family], launches: list[Launch], *, prefix: dict[str, str] | None = None) -> list[Family]:
    """``families`` (an earlier capture's, names kept) with ``launches`` added; returns the new families."""
    index = {(f.dsl, stable(f.key)): f for f in families}
    taken = {f.name: f.kernel for f in families}
    new: dict[tuple[str, str], list[Launch]] = {}
    for la in launches:
        k = (la.dsl, stable(la.family))
        if k in index:
            _add(index[k], la)
        else:
            new.setdefault(k, []).append(la)
    added: list[Family] = []
    by_kernel: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for k in sorted(new):
        la = new[k][0]
        by_kernel.setdefault((la.dsl, la.kernel), []).append(k)
    for (dsl, kernel), keys in sorted(by_kernel.items()):
        siblings = [f.key for f in families if f.dsl == dsl and f.kernel == kernel]
        first = new[keys[0]][0]
        base = (prefix or {}).get(dsl, "") + short_name(first.name)
        for k in keys:
            la = new[k][0]
            others = siblings + [new[o][0].family for o in keys if o != k]
            name = base if not others else short_name(f"{base}_{'_'.join(_differences(la.family, others))}"[:72])
            name = _unique(name, taken, la)
            taken[name] = la.kernel
            fam = Family(dsl, name, kernel, la.family, la.options)
            for x in new[k]:
                _add(fam, x)
            added.append(fam)
    return families + added


def _unique(name: str, taken: dict[str, str], la: Launch) -> str:
    """``name``, else (another family of the same kernel has it) ``name_2``..., else (another kernel's) the kernel's
    module and DSL put in front."""
    if name not in taken:
        return name
    if taken[name] != la.kernel:
        mod = la.kernel.rsplit(":", 1)[0].replace("/", ".").removesuffix(".py").split(".")[-1]
        name = short_name(f"{la.dsl}_{mod}_{name}") if mod else short_name(f"{la.dsl}_{name}")
    i, out = 2, name
    while out in taken:
        out, i = f"{name}_{i}", i + 1
    return out


def _add(fam: Family, la: Launch) -> None:
    fam.archs = sorted(set(fam.archs) | set(la.archs), key=lambda a: (len(a), a))
    for c in la.configs:
        if c not in fam.configs:
            fam.configs.append(c)
    fam.configs.sort(key=lambda c: (len(c), c))
    if la.dsl == "triton":
        fam.formulas.append(la.grid_formula)
    spec = next((s for s in fam.specs if stable(s.key) == stable(la.variant)), None)
    if spec is None:
        names = {s.variant for s in fam.specs}
        name = variant_name(la)
        i, out = 2, name
        while out in names:
            out, i = f"{name}_{i}", i + 1
        spec = Spec(out, la.variant, la.call, list(la.imports))
        fam.specs.append(spec)
    spec.launches += 1
    if la.source and la.source not in spec.sources:
        spec.sources.append(la.source)
    if la.chosen and la.chosen not in spec.chosen:
        spec.chosen.append(la.chosen)
    if la.measured is not None and la.measured not in spec.measured:
        spec.measured.append(la.measured)
    if la.grid is not None and len(spec.samples) < MAX_SAMPLES:
        sample = {"grid": list(la.grid), "args": dict(la.grid_args), "consts": dict(la.grid_consts)}
        if sample not in spec.samples:
            spec.samples.append(sample)
