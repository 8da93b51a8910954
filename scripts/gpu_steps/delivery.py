"""Step ``delivery`` (issue 29): what a generated wheel's users meet, prepared here into ``.gpu/delivery/`` and run on
the GPU machine -- the examples/cuda wheel (torch custom ops, CUDA graphs: tests/test_wheel_torch_gpu.py; installed
offline and timed: bench/wheel_delivery.py), its ``--split arch`` wheels (tests/test_wheel_split_gpu.py) and its
kernel-hub export (loaded there when the kernels package is installed)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path


def prepare(gpu: Path, jobs: int = 2) -> None:
    """delivery/: ex_cuda's wheel (``kernelpack wheel`` of examples/cuda), split/ (``--split arch``), hub/
    (``kernelpack export --hf-kernels``) and manifest.json naming them."""
    from example_builds import ALL
    from kernelpack.wheel import build_split_wheels, build_wheel
    from kernelpack.wheel.hf import export_hf_kernels

    out = gpu / "delivery"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    ex = next(e for e in ALL if e.dsl == "cuda")
    if not ex.buildable():
        raise RuntimeError("delivery: examples/cuda needs a CUDA C++ compiler")
    with tempfile.TemporaryDirectory(prefix="kp-gpu-delivery-") as tmp:
        src = ex.copy(Path(tmp) / "cuda")
        whl = build_wheel(src, out, jobs=jobs).path
        split = [r.path.name for r in build_split_wheels(src, out / "split", jobs=jobs)]
        hub = export_hf_kernels(src, out / "hub", jobs=jobs)
    print(f"wrote {whl}, split/{', split/'.join(split)}, hub/build/{hub.variant}")
    (out / "manifest.json").write_text(json.dumps({"wheel": whl.name, "split": split, "hub": hub.variant},
                                                  indent=1))
