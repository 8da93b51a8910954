"""On a GPU: the example wheel ex_cuda built on the GPU-less machine (`scripts/gpu.py prepare delivery`, carried in
$KERNELPACK_GPU_ARTIFACTS/delivery/), installed offline where kernelpack is not importable; its kernels as torch custom
ops through the kernelpack.torch it carries, eager, under ``torch.compile(fullgraph=True)`` (inductor) and replayed
from a CUDA graph on fresh inputs, each against a float64 torch reference (tests/wheel_torch_check.py --gpu)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpu import GPU_MARKS, require_carried

pytestmark = GPU_MARKS
HERE = Path(__file__).resolve().parent


def test_custom_ops_from_a_generated_wheel_match_torch_eager_compiled_and_in_a_cuda_graph(tmp_path: Path) -> None:
    carried = require_carried("delivery", "delivery", holding="manifest.json")
    whl = carried / json.loads((carried / "manifest.json").read_text())["wheel"]
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
                        str(target), str(whl)], capture_output=True, text=True, timeout=300)
    if r.returncode:  # no pip on this interpreter: a wheel of one platlib package is its zip's contents
        import zipfile

        with zipfile.ZipFile(whl) as z:
            z.extractall(target)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(target)}
    run = subprocess.run([sys.executable, str(HERE / "wheel_torch_check.py"), "--gpu"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=500)
    assert run.returncode == 0, run.stderr[-4000:]
    got = json.loads(run.stdout)
    assert got["graph_breaks"] == 0 and got["kernelpack_modules"] == [], got
    # relu(2x) then 3z + y, in float32 against float64: a few ulps of |values| <= ~40
    assert got["eager_err"] <= 1e-4 and got["compiled_err"] <= 1e-4, got
    assert len(got["graph_errs"]) == 3 and max(got["graph_errs"]) <= 1e-4 and not got["nan"], got
