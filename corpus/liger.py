"""liger-kernel 0.8.5: its Triton, cuTile and CuTe DSL kernels, captured through liger's own wrappers by
``kernelpack capture`` (:mod:`corpus.captured`) and built into one library ``liger``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from . import inventory
from .captured import Captured, capture_and_build, sections
from .cases import CORPUS, load_cases
from .pipeline import Options
from .results import Section

PACKAGE = "liger-kernel"
FILES = {"triton": "liger_triton.toml", "cutile": "liger_cutile.toml", "cute": "liger_cute.toml"}
CUTE_DIRS = ("ops/cutedsl", "ops/cute", "ops/backends/_cutedsl")  # the last: its multi-backend dispatcher's


def package_root() -> Path | None:
    spec = importlib.util.find_spec("liger_kernel")
    return Path(spec.origin).parent if spec and spec.origin else None  # type: ignore[arg-type]


def run(opts: Options, dsls: tuple[str, ...], out: Path) -> tuple[list[Section], Captured | None]:
    """The cases of ``dsls`` captured in one project (``out/liger/project``), built into ``out/liger/lib``."""
    root = package_root()
    if root is None:
        secs = [Section(PACKAGE, d, notes=["liger-kernel is not installed"]) for d in dsls]
        return secs, None
    cases: list[Any] = []
    archs: tuple[str, ...] = opts.archs
    for d in dsls:
        meta, found = load_cases(CORPUS / FILES[d])
        archs = archs or tuple(meta.get("archs", ("sm_80", "sm_90a")))
        cases += [c for c in found if (not opts.cases or c.id in opts.cases) and (not opts.reduced or c.reduced)]
    got = capture_and_build(cases, out / "liger" / "project", archs, opts.jobs, opts.progress,
                            out=out / "liger" / "lib")
    defined, notes = _defined(root, dsls)
    secs = sections(PACKAGE, got, defined, notes, cute_name=_cute_namer(root),
                    not_reached=not (opts.reduced or opts.cases))
    return [secs[d] for d in sorted(secs, key=lambda d: list(FILES).index(d) if d in FILES else 9)], got


def _defined(root: Path, dsls: tuple[str, ...]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """What liger defines, per DSL (scanned from its sources, never a hand-written list), and a note on each."""
    defined: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}
    if "triton" in dsls:
        found = inventory.triton_kernels(root)
        defined["triton"] = [d.name for d in found if not d.helper]
        helpers = [d.name.split(":")[1] for d in found if d.helper]
        notes["triton"] = [f"{len(found)} @triton.jit functions in liger_kernel/ops/*.py: {len(defined['triton'])} "
                           f"kernels and {len(helpers)} device/combine helpers compiled inside the kernels that call "
                           f"them ({', '.join(helpers)})"]
    if "cutile" in dsls:
        defined["cutile"] = [d.name for d in inventory.cutile_kernels(root)]
        notes["cutile"] = [f"{len(defined['cutile'])} @ct.kernel functions under liger_kernel/ops/cutile/"]
    if "cute" in dsls:
        defined["cute"] = [d.name for d in inventory.cute_launchers(root, CUTE_DIRS)]
        notes["cute"] = [f"{len(defined['cute'])} CuTe DSL launchers (distinct first arguments of cute.compile(...) "
                         f"per file) under liger_kernel/ops/cutedsl/, ops/backends/_cutedsl/ (the dispatcher's "
                         f"impl='nvidia-cutedsl') and ops/cute/; ops/cute/ holds none: its MoE and "
                         f"TP cross-entropy call a prebuilt TVM-FFI package (liger_cute_kernels), no CuTe DSL source"]
    return defined, notes


def _cute_namer(root: Path) -> Any:
    """A recorded ``cute.compile`` call -> the inventory's name of its launcher: the ``cute.compile`` line of its
    file nearest at or above the call's."""
    sites = {(str(d.path), d.line): d.name for d in inventory.cute_launchers(root, CUTE_DIRS)}

    def name(payload: dict[str, Any]) -> str:
        path, line = payload.get("site", ("", 0))
        best = None
        for (p, ln), n in sites.items():
            if p == path and ln <= line and (best is None or ln > best[0]):
                best = (ln, n)
        if best is not None:
            return best[1]
        fn = payload["fn"]
        mod = getattr(fn, "__module__", None) or type(fn).__module__
        return f"{mod}:{getattr(fn, '__name__', type(fn).__name__)}"

    return name
