"""The steps every package and DSL share: specs -> compiled bundles (with failures) -> library items -> manifest."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .build import compile_all
from .results import Section
from .specs import Spec, assign_families, dedupe


@dataclass
class Options:
    archs: tuple[str, ...] = ()  # empty: each corpus file's own [corpus] archs
    jobs: int = 2
    reduced: bool = False
    cases: tuple[str, ...] = ()  # only these case ids (empty: all)
    progress: Callable[[str], None] = print


@dataclass
class Item:
    """A compiled unit for the library: a bundle (kernel-level artifacts) or a CuTe host program."""

    section: str  # "package/dsl"
    kernel: str
    obj: Any
    spec: Spec | None = None
    families: tuple[str, ...] = ()


@dataclass
class Outcome:
    items: list[Item] = field(default_factory=list)
    manifest: list[dict[str, Any]] = field(default_factory=list)


def select(cases: Sequence[Any], opts: Options) -> list[Any]:
    out = [c for c in cases if (not opts.cases or c.id in opts.cases) and (not opts.reduced or c.reduced)]
    return out


def compile_specs(sec: Section, specs: Sequence[Spec], compile_fn: Callable[[Spec, Sequence[str]], Any],
                  classify: Callable[[str], str], archs: Sequence[str], opts: Options, prefix: str = "",
                  variant_name: Callable[[Spec], str] | None = None,
                  describe_launch: Callable[[Spec, Any], dict[str, Any]] | None = None,
                  reserved: frozenset[str] = frozenset(), reserved_prefix: str = "") -> Outcome:
    """Compile every spec for ``archs``; a kernel counts as compiled when all its specs compiled.

    ``describe_launch(spec, compiled)``, when given, adds the recorded launch (grid, argument shapes and values) to
    the spec's manifest entry (``compiled``: its bundle or host program): what the GPU run launches where the
    package's own path cannot run there."""
    specs = dedupe(specs)
    assign_families(specs, prefix, variant_name, reserved, reserved_prefix)
    t = time.time()
    opts.progress(f"{sec.package} / {sec.dsl}: compiling {len(specs)} specializations of "
                  f"{len({s.kernel for s in specs})} kernels for {', '.join(archs)} (-j {opts.jobs})")
    results = compile_all(specs, compile_fn, archs, opts.jobs, opts.progress)
    ok: dict[str, bool] = defaultdict(lambda: True)
    out = Outcome()
    for spec, bundle, err in results:
        entry = {"dsl": sec.dsl, "kernel": spec.kernel, "family": spec.family, "variant": spec.variant,
                 "key": spec.key, "sources": spec.sources, "compiled": bundle is not None}
        if bundle is None:
            ok[spec.kernel] = False
            sec.fail(spec.kernel, "compile", classify(err), err, f"{spec.family}[{spec.variant}] from "
                     f"{spec.sources[0]}")
        else:
            if type(bundle).__name__ == "HostProgram":  # a CuTe launcher exported whole (host program)
                out.items.append(Item(f"{sec.package}/{sec.dsl}", spec.kernel, bundle, spec, (bundle.name,)))
                entry["host_program"] = {"name": bundle.name, "variant": bundle.variant,
                                         "params": [p.name for p in bundle.params],
                                         "archs": [str(o.arch) for o in bundle.objects]}
            else:
                out.items.append(Item(f"{sec.package}/{sec.dsl}", spec.kernel, bundle, spec,
                                      tuple(sorted({a.name for a in bundle}))))
                entry["artifacts"] = [{"name": a.name, "variant": a.variant, "entry": a.entry,
                                       "abi": a.abi.describe(), "archs": [str(x) for x in a.archs]} for a in bundle]
            if describe_launch is not None:
                try:
                    entry["launch"] = describe_launch(spec, bundle)
                except Exception as e:  # noqa: BLE001 - the GPU run then reports this entry as not launched
                    entry["launch"] = {"error": f"{type(e).__name__}: {e}"}
        out.manifest.append(entry)
    sec.compiled |= {k for k in {s.kernel for s in specs} if ok[k]}
    sec.seconds += time.time() - t
    return out


def mark_linked(sections: dict[str, Section], kept: Sequence[Item], all_items: Sequence[Item]) -> None:
    """A kernel is linked when it compiled and every item of it made it into the library."""
    kept_ids = {id(i) for i in kept}
    dropped = {(i.section, i.kernel) for i in all_items if id(i) not in kept_ids}
    for key, sec in sections.items():
        sec.linked = {k for k in sec.compiled if (key, k) not in dropped}
        sec.specializations = sum(len(i.obj) if hasattr(i.obj, "__len__") else 1 for i in kept if i.section == key)
        sec.host_programs = sum(1 for i in kept if i.section == key and not hasattr(i.obj, "__len__"))
        sec.families = len({f for i in kept if i.section == key for f in i.families})
