"""kernelpack capture --native on a real GPU: CUDA C++ whose host code launches its kernels through the CUDA runtime
(tests/native_runtime.cu, built with nvcc -cudart static) and, where carried, FlashInfer's CUDA modules (its JIT-built
silu_and_mul and rope libraries, called through tvm-ffi as flashinfer does) are recorded by the driver recorder; the
captured project builds, and every captured launch replayed through the kernelpack library reproduces the native
call's result bit for bit, after the native result was checked against a float64 torch reference
(tests/native_gpu_script.py does the work in a fresh process). Artifacts: ``scripts/gpu.py prepare capture_native``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpu import GPU_MARKS, require_carried

ROOT = Path(__file__).resolve().parents[1]
pytestmark = GPU_MARKS


def test_native_launches_are_captured_built_and_replayed_bit_exact(tmp_path: Path) -> None:
    art = require_carried("capture_native", "capture_native", holding="libnative_runtime.so")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "native_gpu_script.py"), str(art),
                           str(tmp_path / "captured")], capture_output=True, text=True, env=env, timeout=280)
    assert proc.returncode == 0, (proc.stdout[-6000:] + proc.stderr[-6000:])
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "capture_native.json").write_text(json.dumps(report, indent=1))
    fams = set(report["families"])
    assert {"scale_float", "scale_double", "pair_add"} <= fams, report
    cases = {c["case"]: c for c in report["cases"]}
    assert all(c["launches"] for c in cases.values()), report
    # the host code chose the block by size; the replay used what it chose
    assert cases["scale f32 n=100000"]["launches"][0]["block"] == [256, 1, 1]
    assert cases["scale f32 n=1000"]["launches"][0]["block"] == [128, 1, 1]
    assert cases["pair_add n=7777"]["launches"][0]["smem"] == 256
    if (art / "flashinfer" / "silu_and_mul.so").exists():
        fi = [c for c in report["cases"] if c["library"] != "libnative_runtime"]
        assert len(fi) == 4 and all(c["launches"] for c in fi), report
        assert not report["skipped"], report["skipped"]
