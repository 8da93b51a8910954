"""One corpus run: every package's sections, one library per package, the checks, the manifest."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

from .build import check_library, link
from .pipeline import Item, Options, Outcome, mark_linked
from .results import ENVIRONMENT, KERNELPACK, Section

LIBRARY = {"liger": "liger", "flashinfer": "flashinfer"}


def run(packages: list[str], dsls: tuple[str, ...], opts: Options, out: Path) -> tuple[dict[str, Any], list[Section]]:
    out.mkdir(parents=True, exist_ok=True)
    all_sections: list[Section] = []
    manifest: dict[str, Any] = {"libraries": {}, "specs": []}
    for pkg in packages:
        if pkg == "liger":
            all_sections += _liger(dsls, opts, out, manifest)
            continue
        results = _sections(pkg, dsls, opts)
        if not results:
            continue
        secs = {f"{s.package}/{s.dsl}": s for s, _ in results}
        items = [i for _, o in results for i in o.items]
        manifest["specs"] += [m for _, o in results for m in o.manifest]
        all_sections += [s for s, _ in results]
        if not items:
            continue
        lib_dir = out / pkg / "lib"
        try:
            by_obj = {id(i.obj): i for i in items}
            result, kept = link(secs, LIBRARY[pkg], [(i.section, i.kernel, i.obj) for i in items], lib_dir,
                                opts.progress)
        except Exception as e:  # noqa: BLE001 - the whole library failed: every section says so
            for s in secs.values():
                s.fail("", "link", KERNELPACK, f"{type(e).__name__}: {e}")
            continue
        kept_items = [by_obj[id(x[2])] for x in kept]
        mark_linked(secs, kept_items, items)
        fams = {f for i in kept_items for f in i.families}
        for problem in check_library(result, fams):
            for s in secs.values():
                s.fail("", "header", KERNELPACK, problem)
        manifest["libraries"][pkg] = {"name": result.name, "shared": str(result.shared.relative_to(out)),
                                      "static": str(result.static.relative_to(out)),
                                      "kpack": _write_bundle(kept_items, out / pkg / f"{result.name}.kpack")}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    meta = {"python": platform.python_version(), "versions": _versions(), "archs": list(opts.archs) or "per file",
            "reduced": opts.reduced}
    return meta, all_sections


def _liger(dsls: tuple[str, ...], opts: Options, out: Path, manifest: dict[str, Any]) -> list[Section]:
    """liger-kernel through the product: kernelpack capture + kernelpack build -k (corpus.liger), then the checks
    of the built library and the manifest the GPU run reads."""
    from types import SimpleNamespace

    from kernelpack.bundle.host_program import HostProgram
    from kernelpack.bundle.kpack import Bundle

    from . import liger
    from .captured import manifest as entries

    secs, got = liger.run(opts, dsls or ("triton", "cutile", "cute"), out)
    if got is None or got.report is None:
        return secs
    outputs = {k: Path(v) for k, v in got.report.outputs.items()}
    shared, static, kpack = outputs.get("shared"), outputs.get("static"), outputs.get("bundle")
    bundle = Bundle.read(kpack) if kpack is not None and kpack.exists() else None
    programs = {}
    for f in got.families:
        if str(f.get("prebuilt", "")).endswith(".kphost") and not f.get("error"):
            prog = HostProgram.from_bytes((got.project / f["prebuilt"]).read_bytes())
            programs[f["name"]] = prog
    manifest["specs"] += entries(got, bundle, programs)
    if shared is None or static is None:
        return secs
    prefix = shared.parent.parent
    result = SimpleNamespace(name=shared.stem.removeprefix("lib"), shared=shared, static=static, prefix=prefix,
                             include_dir=prefix / "include")
    fams = {f["name"] for f in got.families if f["name"] not in {k.split(":", 1)[1].split("[")[0]
                                                                 for k in got.report.failed}
            and not f.get("error")}
    for problem in check_library(result, fams):
        for s in secs:
            s.fail("", "header", KERNELPACK, problem)
    manifest["libraries"]["liger"] = {"name": result.name, "shared": str(shared.relative_to(out)),
                                      "static": str(static.relative_to(out)),
                                      "kpack": str(kpack.relative_to(out)) if kpack else ""}
    return secs


def _write_bundle(items: list[Item], path: Path) -> str:
    from kernelpack.bundle.kpack import Bundle

    bundles = [i.obj for i in items if isinstance(i.obj, Bundle)]
    if bundles:
        Bundle.of(*bundles).write(path)
    return path.name


def _sections(pkg: str, dsls: tuple[str, ...], opts: Options) -> list[tuple[Section, Outcome]]:
    if pkg == "flashinfer":
        try:
            from . import flashinfer  # type: ignore[attr-defined]  # corpus/flashinfer.py: the corpus-fi branch
        except ImportError as e:
            s = Section("flashinfer-python", "cuda")
            s.fail("", "capture", ENVIRONMENT, f"corpus.flashinfer: {e}")
            return [(s, Outcome())]
        return flashinfer.sections(opts, dsls or ("cuda", "cute"))
    raise ValueError(pkg)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("kernelpack", "triton", "cuda-tile", "nvidia-cuda-tileiras", "nvidia-cutlass-dsl", "torch",
                 "liger-kernel", "flashinfer-python", "nvidia-cuda-nvrtc"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "-"
    try:
        import triton

        out["triton"] = triton.__version__  # the one on sys.path (a Triton 3.6 first on PYTHONPATH wins)
    except ImportError:
        pass
    return out
