"""Step ``delivery`` (issue 29): what a generated wheel's users meet, prepared here into ``.gpu/delivery/`` and run on
the GPU machine -- the examples/cuda wheel installed offline and timed there (bench/wheel_delivery.py)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path


def prepare(gpu: Path, jobs: int = 2) -> None:
    """delivery/: ex_cuda's wheel (``kernelpack wheel`` of examples/cuda) and manifest.json naming it."""
    from example_builds import ALL
    from kernelpack.wheel import build_wheel

    out = gpu / "delivery"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    ex = next(e for e in ALL if e.dsl == "cuda")
    if not ex.buildable():
        raise RuntimeError("delivery: examples/cuda needs a CUDA C++ compiler")
    with tempfile.TemporaryDirectory(prefix="kp-gpu-delivery-") as tmp:
        src = Path(tmp) / "cuda"  # a copy: the checkout gains no build/ or dist/
        shutil.copytree(ex.dir, src, ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
        whl = build_wheel(src, out, jobs=jobs).path
    print(f"wrote {whl}")
    (out / "manifest.json").write_text(json.dumps({"wheel": whl.name}, indent=1))
