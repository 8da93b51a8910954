#!/usr/bin/env python3
"""liger-kernel from its own wrappers to a library: one ``kernelpack capture`` (no GPU) + one ``kernelpack build``.

    python bench/capture_liger.py [--device h200] [--cases corpus/liger_triton.toml ...] [--cold] [-j 2]

Captures the corpus's script of calls (``python -m corpus.cases FILE.toml``: every liger operator, forward and
backward, on the documented shapes; default: its Triton, cuTile and CuTe DSL case files) with ``kernelpack capture
--device DEVICE``, and the cases of a path liger takes on another GPU only (``device = "b200"`` in a case) with a
second ``kernelpack capture --device b200`` into the same project (merged: their families build for sm_100a); builds
the captured project with ``kernelpack build -k`` and prints: launches captured, kernels reached (distinct kernels
launched, against those liger defines: ``corpus/inventory.py``), families, specializations, capture time; build
steps compiled, kernels compiled (a kernel counts when every specialization of it compiled), failures by class (a
DSL limit: the DSL's own compiler refuses the kernel; kernelpack: anything else), build time. ``--cold`` builds with
an empty compile cache.
Needs liger-kernel 0.8.5 (``pip install --no-deps liger-kernel==0.8.5``) and Triton; no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DSL_LIMIT = ("Triton failed", "cuTile failed", "CuTe compile for")


def capture(out: Path, device: str, cases: list[str], env: dict[str, str]) -> tuple[float, dict]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "kernelpack.cli", "capture", "-o", str(out), "--device", device, "--json",
                        "--", "python", "-m", "corpus.cases", *cases, "--device", device], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"capture failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return seconds, json.loads(p.stdout[p.stdout.index("{"):])


def build(project: Path, jobs: int, env: dict[str, str]) -> tuple[float, dict]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "kernelpack.cli", "build", "-k", "-q", "--json", "-j", str(jobs),
                        "--force", str(project)], cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if p.returncode not in (0, 1) or not p.stdout.strip():  # 1: -k left failed steps out (listed in the report)
        sys.exit(f"build failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return seconds, json.loads(p.stdout)


def _function(dsl: str, ref: str) -> str:
    """A cuTile kernel as ``module:function``: a module attribute may hold it with other hints
    (``_dyt_bwd_kernel_nww8 = _dyt_bwd_kernel.replace_hints(...)``); liger's inventory names the function."""
    if dsl != "cutile":
        return ref
    import importlib

    mod, _, attr = ref.rpartition(":")
    try:
        obj = getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError):
        return ref  # made in a function: the reference is module:function already
    af = getattr(obj, "_annotated_function", None)
    fn = af.pyfunc if af is not None else getattr(obj, "_pyfunc", None)
    return f"{mod}:{fn.__name__}" if fn is not None else ref


def _devices(cases: list[str], first: str) -> list[str]:
    """The devices the case files name (``device`` of a case; none: ``first``), ``first`` first."""
    sys.path.insert(0, str(ROOT))
    from corpus.cases import load_cases

    found = {c.device or first for f in cases for c in load_cases(ROOT / f)[1]}
    return [first, *sorted(found - {first})]


def _defined() -> dict[str, set[str]]:
    """Per DSL, what liger defines (corpus/inventory.py): launchable ``@triton.jit`` functions, ``@ct.kernel``
    functions, CuTe launchers."""
    try:
        sys.path.insert(0, str(ROOT))
        from corpus import inventory
        from corpus.liger import CUTE_DIRS, package_root
    except ImportError:
        return {}
    root = package_root()
    if root is None:
        return {}
    return {"triton": {d.name for d in inventory.triton_kernels(root) if not d.helper},
            "cutile": {d.name for d in inventory.cutile_kernels(root)},
            "cute": {d.name for d in inventory.cute_launchers(root, CUTE_DIRS)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="h200")
    ap.add_argument("--cases", action="append", default=None, help="case files (default: corpus/liger_triton.toml)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--cold", action="store_true", help="build with an empty compile cache")
    ap.add_argument("--out", default=None, help="keep the project here (default: a temporary directory)")
    args = ap.parse_args()
    cases = args.cases or ["corpus/liger_triton.toml", "corpus/liger_cutile.toml", "corpus/liger_cute.toml"]
    work = Path(args.out or tempfile.mkdtemp(prefix="kp-capture-liger-"))
    project = work / "liger"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    if args.cold:
        env["KERNELPACK_CACHE_DIR"] = str(work / "cache")
    cap_s, cap = 0.0, {"launches": 0, "seconds": 0.0, "skipped": []}
    runs = []
    for device in _devices(cases, args.device):
        s, got = capture(project, device, cases, env)
        runs.append(f"{device}: {got['launches']} launches in {s:.1f} s")
        cap_s += s
        cap = {"launches": cap["launches"] + got["launches"], "seconds": round(cap["seconds"] + got["seconds"], 1),
               "skipped": [*cap["skipped"], *got["skipped"]]}
    state = json.loads((project / "capture.json").read_text())
    fams = state["families"]
    build_s, rep = build(project, args.jobs, env)

    kernel_of = {f["name"]: (f["dsl"], _function(f["dsl"], f["kernel"])) for f in fams}
    steps: dict[tuple[str, str], list[bool]] = defaultdict(list)
    classes: Counter[str] = Counter()
    failed_kernels: dict[tuple[str, str], str] = {}
    for job, status in rep["jobs"].items():
        fam = job.split(":", 1)[1].split("[")[0]
        key = kernel_of.get(fam, ("?", fam))
        steps[key].append(status != "failed")
    for job, why in rep.get("failed", {}).items():
        fam = job.split(":", 1)[1].split("[")[0]
        cls = "DSL limit" if any(m in why for m in DSL_LIMIT) else "kernelpack"
        classes[cls] += 1
        failed_kernels[kernel_of.get(fam, ("?", fam))] = f"{cls}: {why[:160]}"
    cute_errors = {kernel_of[f["name"]]: f["error"] for f in fams if f["dsl"] == "cute" and f.get("error")}
    for key, why in cute_errors.items():
        steps[key].append(False)
        failed_kernels[key] = f"{'DSL limit' if any(m in why for m in DSL_LIMIT) else 'kernelpack'}: {why[:160]}"
    reached = set(kernel_of.values())
    compiled = {k for k in reached if steps.get(k) and all(steps[k])}
    by_dsl: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for k in sorted(reached):
        by_dsl[k[0]].append(k)

    print(f"liger-kernel, GPU-less capture for {args.device} ({', '.join(cases)}); {os.cpu_count()} CPU cores, "
          f"-j {args.jobs}, {'cold' if args.cold else 'warm'} compile cache")
    print()
    print("| DSL | launches | kernels reached | families | specializations | kernels compiled | failures |")
    print("|---|---:|---:|---:|---:|---:|---|")
    n_launch = Counter()
    for f in fams:
        n_launch[f["dsl"]] += sum(s["launches"] for s in f["specs"])
    for dsl, keys in sorted(by_dsl.items()):
        fs = [f for f in fams if f["dsl"] == dsl]
        ok = sum(1 for k in keys if k in compiled)
        fails = Counter(v.split(":")[0] for k, v in failed_kernels.items() if k[0] == dsl)
        print(f"| {dsl} | {n_launch[dsl]} | {len(keys)} | {len(fs)} | {sum(len(f['specs']) for f in fs)} | "
              f"{ok}/{len(keys)} ({100 * ok / max(1, len(keys)):.1f}%) | "
              f"{', '.join(f'{n} {c}' for c, n in fails.items()) or 'none'} |")
    total = len(reached)
    where = {"triton": "Triton kernels liger defines (liger_kernel/ops/*.py, helpers left out)",
             "cutile": "cuTile kernels liger defines (liger_kernel/ops/cutile/)"}
    for dsl, defined in _defined().items():
        if dsl not in where or dsl not in by_dsl:
            continue
        hit = {k[1] for k in reached if k[0] == dsl} & defined
        print()
        print(f"{where[dsl]}: {len(defined)}; reached {len(hit)}; not reached: "
              f"{', '.join(sorted(x.split(':')[1] for x in defined - hit)) or 'none'}")
    print()
    print(f"capture: {cap['launches']} launches in {cap_s:.1f} s (the script's own run {cap['seconds']} s; "
          f"{'; '.join(runs)}); {len(cap['skipped'])} skipped")
    jobs_ok = sum(1 for s in rep["jobs"].values() if s != "failed")
    print(f"build: {jobs_ok}/{len(rep['jobs'])} steps compiled in {build_s:.1f} s; kernels compiled "
          f"{len(compiled)}/{total} ({100 * len(compiled) / max(1, total):.1f}%)")
    for line in cap["skipped"]:
        print(f"  skipped: {line[:200]}")
    for k, why in sorted(failed_kernels.items()):
        print(f"  not compiled: {k[0]} {k[1]}: {why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
