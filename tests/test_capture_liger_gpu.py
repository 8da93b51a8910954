"""kernelpack capture of liger-kernel on the H200: the GPU-mode capture of the corpus's script of calls for liger's
Triton kernels (``corpus/liger_triton.toml``, forward and backward) gives the families the GPU-less capture gave
(prepared here by ``scripts/gpu.py prepare capture_liger`` into .gpu/capture_liger/gpuless), with the configs liger's
autotuners chose, measured. liger's sources come with the same step (.gpu/capture_liger/site). ``KP_LIGER_CASES=a,b``
runs those case ids only (the GPU-less families of the runs that finish are compared, so a subset compares too)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPULESS = ROOT / ".gpu" / "capture_liger" / "gpuless" / "capture.json"
SITE = ROOT / ".gpu" / "capture_liger" / "site"

pytestmark = pytest.mark.gpu


def test_gpu_capture_of_liger_gives_the_gpu_less_families_with_measured_choices(tmp_path: Path) -> None:
    from gpu import gpu_count

    if gpu_count() == 0:
        pytest.skip("no CUDA GPU/driver")
    if not GPULESS.exists():
        pytest.skip(".gpu/capture_liger not prepared (python scripts/gpu.py prepare capture_liger)")
    if SITE.is_dir() and str(SITE) not in sys.path:
        sys.path.insert(0, str(SITE))
    pytest.importorskip("liger_kernel", reason="liger-kernel (or .gpu/capture_liger/site) is not there")
    sys.path.insert(0, str(ROOT))
    from corpus.cases import CORPUS, load_cases, run_case, tag

    import kernelpack.capture as kc

    _, cases = load_cases(CORPUS / "liger_triton.toml")
    only = [c for c in os.environ.get("KP_LIGER_CASES", "").split(",") if c]  # a quick run: these case ids only
    cases = [c for c in cases if not only or c.id in only]
    ok: set[str] = set()
    with kc.capture() as cap:  # this GPU: liger's code runs, its autotuners measure
        for case in cases:
            if (case.device or "h200") != "h200":
                continue
            cap.interpret.update(case.interpret)
            for point in case.points():
                label = f"{case.id}[{tag(point)}]"
                if cap.run(label, lambda c=case, p=point: run_case(c, p, device="cuda")):
                    ok.add(label)
    cap.write_project(tmp_path / "proj", command="gpu")
    mine = json.loads((tmp_path / "proj" / "capture.json").read_text())
    theirs = json.loads(GPULESS.read_text())

    def families(state: dict) -> dict[str, set[str]]:
        """Triton family (its key: kernel, constexprs, options, scalar types -- a family's name also depends on the
        other families of its kernel in the capture) -> the runs that reached it (those that finished on this GPU
        only)."""
        return {json.dumps(f["key"], sort_keys=True): {s for sp in f["specs"] for s in sp["sources"]} & ok
                for f in state["families"] if f["dsl"] == "triton"}

    # the families reached by a run that finished in both captures (a run that fails part-way on the GPU may have
    # launched some of its kernels: those are not compared)
    got, want = ({k: v for k, v in fams.items() if v} for fams in (families(mine), families(theirs)))
    print(f"{len(ok)} runs finished on the GPU, {len(cap.skipped)} did not:")
    for s in cap.skipped:
        print("  skipped", s.line())
    print(f"{len(got)} Triton families, {len(want)} GPU-less")
    measured = tmp_path / "proj" / "tuning-measured.json"
    if measured.exists():
        m = json.loads(measured.read_text())
        for fam, rec in sorted(m.items()):
            print("measured", fam, [(s.get("chosen"), s.get("timings_ms")) for s in rec.get("shapes", [])][:2])
    assert sorted(set(want) - set(got)) == [] and sorted(set(got) - set(want)) == []
    chosen = {f["name"]: sorted({c for s in f["specs"] for c in s["chosen"]}) for f in mine["families"]
              if f["dsl"] == "triton" and f["configs"]}
    print("chosen", chosen)
    assert all(chosen.values())
