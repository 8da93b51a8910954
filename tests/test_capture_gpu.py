"""kernelpack capture on the H200: the GPU-mode capture of tests/capture_gpu_script.py gives the families the GPU-less
capture gave (prepared here by ``scripts/gpu.py prepare capture`` into .gpu/capture/gpuless), with the configs the
autotuner chose and their measured times; the captured project builds there and its kernels, launched through
kernelpack with the traced grid formulas, compute what torch computes; the device table's h200 row is the device's."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
GPULESS = ROOT / ".gpu" / "capture" / "gpuless"

pytestmark = pytest.mark.gpu


def _gpu() -> None:
    from gpu import gpu_count

    if gpu_count() == 0:
        pytest.skip("no CUDA GPU/driver")


def test_the_h200_row_of_the_device_table_is_the_devices() -> None:
    _gpu()
    import torch

    from kernelpack.capture import DEVICES

    props = torch.cuda.get_device_properties(0)
    if "H200" not in props.name:
        pytest.skip(f"not an H200: {props.name}")
    row = DEVICES["h200"]
    got = {"sm_count": props.multi_processor_count, "capability": (props.major, props.minor),
           "smem_optin": getattr(props, "shared_memory_per_block_optin", row.smem_optin),
           "l2": getattr(props, "L2_cache_size", row.l2_bytes)}
    assert got == {"sm_count": row.sm_count, "capability": row.capability, "smem_optin": row.smem_optin,
                   "l2": row.l2_bytes}, (got, props)


def test_gpu_capture_gives_the_gpu_less_families_with_measured_choices(tmp_path: Path) -> None:
    _gpu()
    if not (GPULESS / "capture.json").exists():
        pytest.skip(".gpu/capture not prepared (python scripts/gpu.py prepare capture)")
    import torch

    import kernelpack
    import kernelpack.capture as kc
    from kernelpack.project import build

    shutil.copy(HERE / "capture_kernels.py", tmp_path / "capture_kernels.py")
    shutil.copy(HERE / "capture_gpu_script.py", tmp_path / "script.py")
    sys.path.insert(0, str(tmp_path))
    cap = kc.capture()  # this GPU: the code runs, the autotuner measures
    assert kc.run_script(cap, ["python", str(tmp_path / "script.py")]), [s.line() for s in cap.skipped]
    cap.write_project(tmp_path / "proj", command="gpu")
    mine = json.loads((tmp_path / "proj" / "capture.json").read_text())
    theirs = json.loads((GPULESS / "capture.json").read_text())

    def shape(state: dict) -> dict[str, list[str]]:
        return {f["name"]: sorted(s["variant"] for s in f["specs"]) for f in state["families"]}

    assert shape(mine) == shape(theirs)
    scale = next(f for f in mine["families"] if f["name"] == "scale_kernel")
    chosen = {c for s in scale["specs"] for c in s["chosen"]}
    assert chosen and set(scale["configs"]) == chosen
    measured = json.loads((tmp_path / "proj" / "tuning-measured.json").read_text())
    assert measured["scale_kernel"]["shapes"] and all(len(s["timings_ms"]) == 3
                                                      for s in measured["scale_kernel"]["shapes"])
    print("chosen", sorted(chosen), json.dumps(measured["scale_kernel"]["shapes"], indent=1))

    report = build(tmp_path / "proj", jobs=2)
    lib = kernelpack.load(report.outputs["bundle"])
    for n in (1 << 12, 1 << 20):  # fresh inputs, grid from the captured formula
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        out = torch.full_like(x, float("nan"))
        lib.add_kernel(x, y, out, n)
        torch.cuda.synchronize()
        assert torch.equal(out, (x.double() + y.double()).float()), n
