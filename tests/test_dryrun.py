"""kernelpack's dry-run driver (issue 30, item 5): with no GPU, the Python runtime (its C path and its Python path)
and a generated C library check every launch fully and record it -- kernel, specialization, binary, grid, block,
shared memory, parameters -- as JSON lines (docs/testing.md); the driver holds each launch to NVIDIA's rules, the
binary compatibility rule included. The tests' fake driver is this driver built with another settings prefix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kernelpack
from kernelpack.bundle.kpack import Bundle
from kernelpack.runtime import DriverError, NoBinaryForDevice
from kernelpack.testing import Launch, driver_path, dryrun, read_records
from runtime_support import python_path

torch = pytest.importorskip("torch")


@pytest.fixture(params=["c", "python"])
def launch_path(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    if request.param == "python":
        with python_path():
            yield request.param
    else:
        yield request.param


def test_python_launches_are_checked_and_recorded(runtime_bundle: Bundle, launch_path: str) -> None:
    x, y = torch.zeros(16), torch.ones(16)
    with dryrun(["sm_90"]) as run:
        mod = kernelpack.load(runtime_bundle)
        mod.add(x, y, y, 16, grid=1, block=16)
        mod.vadd(x, y, y, 16, grid=(2, 1), block=(8, 1, 1))  # 16-byte aligned, n % 4 == 0: the aligned one
        mod.scale(x.half(), y.half(), 2.0, 16, grid=1, block=16)
        with pytest.raises(kernelpack.LaunchError, match="block"):
            mod.add(x, y, y, 16, grid=1, block=4096)  # refused by kernelpack: not recorded
    got = run.launches()
    assert [(r.kernel, r.specialization, r.entry, r.binary) for r in got] == [
        ("add", "add", "add", "sm_90a"), ("vadd", "vadd[aligned]", "add16", "sm_90a"),
        ("scale", "scale[half]", got[2].entry, "sm_90a")]
    assert all(r.ok and r.device == 0 and r.device_arch == "sm_90" for r in got)
    assert (got[1].grid, got[1].block, got[1].smem, got[1].call) == ((2, 1, 1), (8, 1, 1), 0, "cuLaunchKernel")
    assert got[0].arguments(mod) == {"a": x.data_ptr(), "b": y.data_ptr(), "out": y.data_ptr(), "n": 16}
    assert got[2].arguments(mod)["factor"] == 2.0


def test_the_binary_recorded_is_the_one_the_device_gets(runtime_bundle: Bundle) -> None:
    x = torch.zeros(16)
    with dryrun(["sm_86"]) as run:
        kernelpack.load(runtime_bundle).add(x, x, x, 16, grid=1, block=16)
    assert [r.binary for r in run.launches()] == ["sm_80"]  # plain sm_80 SASS on an 8.6 device
    with dryrun(["sm_100"]) as run, pytest.raises(NoBinaryForDevice, match="no binary runs on device 0 \\(sm_100\\)"):
        kernelpack.load(runtime_bundle).add(x, x, x, 16, grid=1, block=16)
    assert run.launches() == []


def test_the_driver_refuses_a_binary_the_device_cannot_run(runtime_bundle: Bundle) -> None:
    """NVIDIA's rule in the driver itself: an sm_90a cubin loaded into an sm_80 device's context fails."""
    from kernelpack.runtime.driver import Driver

    with dryrun(["sm_80"]):
        d = Driver(str(driver_path()))
        art = next(a for a in runtime_bundle if a.label == "add")
        lib = d.load_library(art.binary("sm_90a").data, "add")
        k = d.get_kernel(lib, art.entry, "add")
        d.set_current(d.device(0).context)
        with pytest.raises(DriverError, match="CUDA_ERROR_NO_BINARY_FOR_GPU"):
            d.load_in_current_context(k, "add on device 0")


def test_a_prepared_launch_is_recorded_each_time(runtime_bundle: Bundle) -> None:
    x = torch.zeros(16)
    with dryrun(["sm_90"]) as run:
        launch = kernelpack.load(runtime_bundle).add.prepare(x, x, x, 16, grid=3, block=32)
        launch()
        launch(stream=0x1000)
    assert [(r.specialization, r.grid, r.stream) for r in run.launches()] == [("add", (3, 1, 1), 0),
                                                                              ("add", (3, 1, 1), 0x1000)]


def test_a_whole_process_takes_the_dry_run_driver_from_the_environment(runtime_bundle: Bundle,
                                                                        tmp_path: Path) -> None:
    path = runtime_bundle.write(tmp_path / "rt.kpack")
    record = tmp_path / "launches.jsonl"
    code = (f"import kernelpack, torch; m = kernelpack.load({str(path)!r}); "
            f"m.add(torch.zeros(8), torch.zeros(8), torch.zeros(8), 8, grid=1, block=8)")
    env = {**os.environ, "KERNELPACK_DRIVER": "dryrun", "KERNELPACK_DRYRUN_RECORD": str(record),
           "KERNELPACK_DRYRUN_DEVICES": "sm_90"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    (launch,) = read_records(record)
    assert (launch.specialization, launch.binary, launch.block) == ("add", "sm_90a", (8, 1, 1))


def test_a_c_program_records_its_launches_on_the_dry_run_driver(clib_env, tmp_path: Path) -> None:
    """The C library opens the driver KERNELPACK_DRIVER names (no libcuda.so.1 anywhere on the path)."""
    from fake_cuda import run

    record = tmp_path / "launches.jsonl"
    r = run(clib_env.harness, tmp_path, None, "dispatch", KERNELPACK_DRIVER=str(driver_path()),
            KERNELPACK_DRYRUN_RECORD=str(record), KERNELPACK_DRYRUN_DEVICES="sm_90")
    assert r.returncode == 0, r.stdout + r.stderr
    got = read_records(record)
    assert [(x.specialization, x.entry) for x in got if x.ok] == [
        ("add[f32_vec4]", "add_f32_vec4"), ("add[f32]", "add_f32"), ("add[f32]", "add_f32"), ("add[f64]", "add_f64")]
    assert all(x.kernel == "add" and x.binary == "sm_90a" for x in got)
    dryrun_named = run(clib_env.harness, tmp_path, None, "dispatch", KERNELPACK_DRIVER="dryrun")
    assert "KERNELPACK_DRIVER=dryrun names kernelpack's dry-run driver" in dryrun_named.stdout


def test_python_m_kernelpack_testing_runs_a_program_on_it(tmp_path: Path) -> None:
    env = {**os.environ}
    path = subprocess.run([sys.executable, "-m", "kernelpack.testing", "path"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert path.returncode == 0 and Path(path.stdout.strip()) == driver_path()
    shown = subprocess.run([sys.executable, "-m", "kernelpack.testing", "run", "--devices", "sm_80,sm_90", "--",
                            sys.executable, "-c", "import os; print(os.environ['KERNELPACK_DRIVER'], "
                                                  "os.environ['KERNELPACK_DRYRUN_DEVICES'])"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0 and shown.stdout.split() == [str(driver_path()), "sm_80,sm_90"]
    bad = subprocess.run([sys.executable, "-m", "kernelpack.testing", "run", "--devices", "sm_95", "--", "true"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 1 and "sm_95" in bad.stderr


def test_the_record_format_is_the_documented_one(runtime_bundle: Bundle) -> None:
    x = torch.zeros(16)
    with dryrun(["sm_90"]) as run:
        kernelpack.load(runtime_bundle).add(x, x, x, 16, grid=1, block=16)
        line = json.loads(run.record.read_text().splitlines()[0])
    doc = (Path(__file__).parent.parent / "docs" / "testing.md").read_text()
    table = doc[doc.index("| field | meaning |"):]
    documented = {f for row in table.splitlines()[2:] if row.startswith("| `")
                  for f in (c.strip("` ") for c in row.split("|")[1].split(","))}
    assert set(line) == documented
    assert Launch.from_json(line) == run.launches()[0]
