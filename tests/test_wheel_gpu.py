"""On a GPU: the example wheels built by ``kernelpack wheel`` on the GPU-less machine (`scripts/gpu.py prepare wheels`,
carried in $KERNELPACK_GPU_ARTIFACTS/wheel/) installed offline from the files (``pip install --no-index --no-deps
--target``) and imported from there; every kernel runs on fresh random inputs and matches torch, and importing and
binding the packages imports neither torch nor Triton (tests/wheel_gpu_check.py)."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from gpu import GPU_MARKS, require_carried

pytestmark = GPU_MARKS
HERE = Path(__file__).resolve().parent


def test_installed_example_wheels_run_every_kernel_against_torch(tmp_path: Path) -> None:
    carried = require_carried("wheel", "wheels", holding="manifest.json")
    manifest = json.loads((carried / "manifest.json").read_text())
    wheels = [carried / name for name in manifest["wheels"].values()]
    assert wheels, manifest
    target = tmp_path / "site"
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0:
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--target", str(target),
                            *map(str, wheels)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    else:  # no pip on this interpreter: what pip does for these wheels (platlib at the root), RECORD checked
        for whl in wheels:
            _unpack(whl, target)
    src = HERE.parent / "src"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(src)])}
    run = subprocess.run([sys.executable, str(HERE / "wheel_gpu_check.py"), *manifest["wheels"]],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert run.returncode in (0, 1), run.stderr[-4000:]
    got = json.loads(run.stdout)
    assert got["before_import"] == [], got
    for name in manifest["wheels"]:
        pkg = got["packages"][name]
        assert str(target) in pkg["file"], pkg
        assert pkg["heavy_after_bind"] == [], pkg
        assert "error" not in pkg, (got["seed"], got["n"], pkg)
        assert pkg["checked"], pkg


def _unpack(whl: Path, target: Path) -> None:
    with zipfile.ZipFile(whl) as z:
        record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        for path, digest, size in csv.reader(io.StringIO(z.read(record).decode())):
            if digest:
                data = z.read(path)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert digest == f"sha256={want}" and int(size) == len(data), (whl.name, path)
        z.extractall(target)
