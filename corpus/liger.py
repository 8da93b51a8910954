"""liger-kernel 0.8.5: Triton, cuTile and CuTe DSL kernels, linked into one library ``liger``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from . import inventory
from .cases import CORPUS, load_cases
from .pipeline import Options, Outcome, compile_specs, select
from .results import CAPTURE, ENVIRONMENT, KERNELPACK, NOT_REACHED, Section
from .specs import short_name

PACKAGE = "liger-kernel"


def package_root() -> Path | None:
    spec = importlib.util.find_spec("liger_kernel")
    return Path(spec.origin).parent if spec and spec.origin else None  # type: ignore[arg-type]


def triton_section(opts: Options) -> tuple[Section, Outcome]:
    from . import triton_corpus as tc

    root = package_root()
    sec = Section(PACKAGE, "triton")
    if root is None:
        sec.notes.append("liger-kernel is not installed")
        return sec, Outcome()
    defined = inventory.triton_kernels(root)
    sec.defined = [d.name for d in defined if not d.helper]
    helpers = [d.name.split(":")[1] for d in defined if d.helper]
    sec.notes.append(f"{len(defined)} @triton.jit functions in liger_kernel/ops/*.py: {len(sec.defined)} kernels and "
                     f"{len(helpers)} device/combine helpers compiled inside the kernels that call them "
                     f"({', '.join(helpers)})")
    meta, cases = load_cases(CORPUS / "liger_triton.toml")
    archs = opts.archs or tuple(meta.get("archs", ("sm_80", "sm_90a")))
    caps = tc.capture(select(cases, opts), sec)
    sec.reached = {r.qualname for _, r in caps}
    specs = []
    for where, rec in caps:
        if rec.unsupported:
            sec.fail(rec.qualname, "capture", KERNELPACK, f"unsupported launch: {rec.unsupported}", where)
        else:
            specs.append(tc.to_spec(where, rec))
    out = compile_specs(sec, specs, tc.compile_spec, tc.classify, archs, opts, variant_name=tc.variant_name)
    _not_reached(sec, opts)
    return sec, out


def cutile_section(opts: Options) -> tuple[Section, Outcome]:
    from . import cutile_corpus as cc

    root = package_root()
    sec = Section(PACKAGE, "cutile")
    if root is None:
        sec.notes.append("liger-kernel is not installed")
        return sec, Outcome()
    sec.defined = [d.name for d in inventory.cutile_kernels(root)]
    sec.notes.append(f"{len(sec.defined)} @ct.kernel functions under liger_kernel/ops/cutile/")
    meta, cases = load_cases(CORPUS / "liger_cutile.toml")
    archs = opts.archs or tuple(meta.get("archs", ("sm_80", "sm_90a")))
    caps = cc.capture(select(cases, opts), sec)
    sec.reached = {cc.qualname(r) for _, r in caps}
    specs = []
    for where, rec in caps:
        if rec.error or rec.signature is None:
            sec.fail(cc.qualname(rec), "capture", KERNELPACK, f"no cuTile signature: {rec.error}", where)
        else:
            specs.append(cc.to_spec(where, rec))
    triton_names = frozenset(short_name(d.name.split(":")[1]) for d in inventory.triton_kernels(root))
    out = compile_specs(sec, specs, cc.compile_spec, cc.classify, archs, opts, variant_name=cc.variant_name,
                        describe_launch=cc.describe_launch, reserved=triton_names, reserved_prefix="ct_")
    _not_reached(sec, opts)
    return sec, out


CUTE_DIRS = ("ops/cutedsl", "ops/cute")


def cute_section(opts: Options) -> tuple[Section, Outcome]:
    from . import cute_corpus as kc

    root = package_root()
    sec = Section(PACKAGE, "cute")
    if root is None:
        sec.notes.append("liger-kernel is not installed")
        return sec, Outcome()
    defined, sites = kc.sites(root, CUTE_DIRS)
    sec.defined = [d.name for d in defined]
    sec.notes.append(f"{len(sec.defined)} CuTe DSL launchers (distinct first arguments of cute.compile(...) per file) "
                     f"under liger_kernel/ops/cutedsl/ and ops/cute/; ops/cute/ holds none: its MoE and TP "
                     f"cross-entropy call a prebuilt TVM-FFI package (liger_cute_kernels), no CuTe DSL source")
    meta, cases = load_cases(CORPUS / "liger_cute.toml")
    archs = opts.archs or tuple(meta.get("archs", ("sm_80", "sm_90a")))
    caps = kc.capture(select(cases, opts), sec, sites)
    sec.reached = {c.qualname for _, c in caps}
    specs = [kc.to_spec(where, c) for where, c in caps]
    out = compile_specs(sec, specs, kc.compile_spec, kc.classify, archs, opts, prefix="cute_",
                        describe_launch=kc.describe_launch)
    _not_reached(sec, opts)
    return sec, out


def _not_reached(sec: Section, opts: Options) -> None:
    if opts.reduced or opts.cases:
        return
    failed_cases = {f.where.split("[")[0] for f in sec.failures if f.reason_class == CAPTURE}
    for k in sec.defined:
        if k not in sec.reached:
            why = "no corpus case launches it"
            if failed_cases:
                why += f" (cases that failed before launching: {', '.join(sorted(failed_cases))})"
            sec.fail(k, "capture", NOT_REACHED, why)


def environment_failure(sec: Section, what: str) -> None:
    sec.fail("", "capture", ENVIRONMENT, what)


def sections(opts: Options, dsls: tuple[str, ...]) -> list[tuple[Section, Outcome]]:
    out = []
    if "triton" in dsls:
        out.append(triton_section(opts))
    if "cutile" in dsls:
        out.append(cutile_section(opts))
    if "cute" in dsls:
        out.append(cute_section(opts))
    return out


def describe(out: list[tuple[Section, Any]]) -> str:
    return ", ".join(f"{s.dsl}: {len(s.compiled)}/{len(s.defined)}" for s, _ in out)
