"""On a GPU: the ``--split arch`` wheels of examples/cuda (`scripts/gpu.py prepare delivery`, carried in
$KERNELPACK_GPU_ARTIFACTS/delivery/split/), front and every provider installed offline where kernelpack is not
importable: the front loads the provider of the device's family and its kernels match torch on fresh random inputs
(float64 reference, every element written); with that provider left out, the first use names it and the device. The
kernel-hub export (delivery/hub/) is loaded through the kernels package too, where that is installed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gpu import GPU_MARKS, require_carried

pytestmark = GPU_MARKS
CHECK = """
import json, sys
import torch
import ex_cuda
major, minor = torch.cuda.get_device_capability()
out = {"cc": [major, minor]}
try:
    n = 3001
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    want = 2.5 * x.double() + y.double()
    ex_cuda.saxpy(2.5, x, y, n, grid=(n + 255) // 256, block=256)
    torch.cuda.synchronize()
    out["err"] = (y.double() - want).abs().max().item()
    out["runtime"] = ex_cuda.__kernelpack_runtime__.__name__
except ImportError as e:
    out["error"] = str(e)
out["kernelpack"] = sorted(m for m in sys.modules if m.split(".")[0] == "kernelpack")
print(json.dumps(out))
"""


def _install(wheels: list[Path], target: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
                        str(target), *map(str, wheels)], capture_output=True, text=True, timeout=300)
    if r.returncode:  # no pip on this interpreter: these wheels are their zip's contents
        for whl in wheels:
            with zipfile.ZipFile(whl) as z:
                z.extractall(target)


def _run(target: Path, code: str, *args: str) -> dict:  # type: ignore[type-arg]
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(target)}
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def test_the_front_loads_the_devices_provider_and_names_a_missing_one(tmp_path: Path) -> None:
    carried = require_carried("delivery", "delivery", holding="manifest.json")
    split = [carried / "split" / n for n in json.loads((carried / "manifest.json").read_text())["split"]]
    front, providers = split[0], split[1:]
    _install(split, tmp_path / "all")
    got = _run(tmp_path / "all", CHECK)
    family = f"sm{got['cc'][0]}x"
    if not any(p.name.startswith(f"ex_cuda_{family}-") for p in providers):
        pytest.skip(f"no provider for this device's family {family} (built: {[p.name for p in providers]})")
    assert got["runtime"] == f"ex_cuda_{family}._kernelpack" and got["kernelpack"] == [], got
    assert got["err"] <= 1e-5, got
    others = [p for p in providers if not p.name.startswith(f"ex_cuda_{family}-")]
    _install([front, *others], tmp_path / "without")
    got = _run(tmp_path / "without", CHECK)
    assert f"needs the provider wheel ex_cuda_{family}" in got["error"], got
    assert f"sm_{got['cc'][0]}{got['cc'][1]}" in got["error"] and f"pip install 'ex_cuda[{family}]" in got["error"]


@pytest.mark.skipif(importlib.util.find_spec("kernels") is None, reason="the kernels package is not installed")
def test_the_kernel_hub_export_loads_through_kernels_and_matches_torch(tmp_path: Path) -> None:
    carried = require_carried("delivery", "delivery", holding="manifest.json")
    code = CHECK.replace("import ex_cuda\n", "from pathlib import Path\nfrom kernels import get_local_kernel\n"
                                             "ex_cuda = get_local_kernel(Path(sys.argv[1]))\n")
    got = _run(tmp_path, code, str(carried / "hub"))
    assert "error" not in got and got["err"] <= 1e-5, got
