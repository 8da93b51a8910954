"""scripts/gpu.py and its table of steps (scripts/gpu_steps/), GPU-lessly: every file a step names exists, ``prepare``
takes what a step needs along, and ``run --dry-run`` prints each step's commands with the environment filled in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU_PY = ROOT / "scripts" / "gpu.py"


@pytest.fixture(scope="module")
def table():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from gpu_steps import table
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return table


def test_every_file_a_step_runs_exists_and_every_need_is_a_step(table) -> None:  # type: ignore[no-untyped-def]
    names = [s.name for s in table.STEPS]
    assert len(names) == len(set(names))
    for step in table.STEPS:
        assert set(step.needs) <= set(names), step.name
        assert step.prepare is None or step.carries, f"{step.name} prepares but names nothing it writes"
        for cmd in step.run:
            for arg in (*cmd.argv, *cmd.files):
                if arg.endswith(".py") or arg.startswith("tests"):
                    assert (ROOT / arg).exists(), f"step {step.name} runs {arg}, which is not there"


def test_prepare_takes_the_steps_a_step_needs_and_leaves_optional_ones_out_by_default(table) -> None:  # type: ignore[no-untyped-def]
    assert [s.name for s in table.to_prepare(["cute"])] == ["frontends", "cute"]
    assert [s.name for s in table.to_prepare(["corpus_triton"])] == ["corpus"]
    default = {s.name for s in table.to_prepare([])}
    assert "corpus" not in default and {"demo", "cute", "loadscale"} <= default
    assert {s.name for s in table.to_prepare(["tests"])} <= default
    with pytest.raises(KeyError, match="no step nope"):
        table.resolve(["nope"])


def test_run_dry_run_prints_each_steps_commands_with_python_out_and_artifacts_filled(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, str(GPU_PY), "run", "--dry-run", "--gpu", str(tmp_path / "g"), "--out",
                        str(tmp_path / "o"), "tests", "cpu_tests", "bench_launch_before"],
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "CPU_TESTS": "tests/test_abi.py"},
                       timeout=60)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert f"export KERNELPACK_GPU_ARTIFACTS={tmp_path / 'g'}" in out and f"export PYTHONPATH={ROOT / 'src'}" in out
    assert f"-m pytest -p no:cacheprovider -m gpu -q -rfEs --junitxml={tmp_path / 'o'}/tests.xml tests\n" in out
    assert "-m pytest -p no:cacheprovider -q -rfE tests/test_abi.py\n" in out  # CPU_TESTS replaced the list
    assert f"(cd {tmp_path / 'g'}/launchcost/before && {sys.executable} setup.py" in out
    assert f"PYTHONPATH={tmp_path / 'g'}/launchcost/before/src {sys.executable} bench/launch_overhead.py" in out
    assert "lacks demo.kpack (prepare demo)" in out  # nothing prepared in that folder


def test_an_unknown_step_or_cap_is_refused_naming_the_steps() -> None:
    for argv in (["run", "nope"], ["prepare", "nope"], ["run", "--cap", "nope=3"]):
        p = subprocess.run([sys.executable, str(GPU_PY), *argv], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and "no step nope; steps: demo," in p.stderr, p.stderr


def test_list_names_every_step_and_what_it_runs() -> None:
    p = subprocess.run([sys.executable, str(GPU_PY), "list"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "fp8: fp8 widening kernels (NVRTC)\n    prepares  .gpu/fp8/fp8.kpack\n" in p.stdout
    assert "runs      python3 -m pytest -m gpu -q -rfEs tests/test_fp8_gpu.py" in p.stdout
    assert "run with no step: tests" in p.stdout
