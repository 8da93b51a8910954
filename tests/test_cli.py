"""The command line: demo writes and inspects a bundle; inspect reads cubins and bundles; errors are clean."""

from __future__ import annotations

import json

import pytest

from cli_support import kp
from kernelpack.cli.describe import find_cuda_tool
from toolchain_support import needs_cuda_compiler


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    proc = kp("demo", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out, proc.stdout


@needs_cuda_compiler
def test_demo_compiles_the_examples_for_two_archs_and_prints_the_inspection(demo_dir):
    out, stdout = demo_dir
    assert (out / "demo.kpack").is_file()
    assert "compiled 6 kernel specializations for sm_80, sm_90a" in stdout
    for label in ("axpy", "scale[float]", "scale[half]", "row_sum", "affine"):
        assert label in stdout


@needs_cuda_compiler
def test_inspect_json_lists_params_with_c_types_and_per_arch_resources(demo_dir):
    out, _ = demo_dir
    proc = kp("inspect", str(out / "demo.kpack"), "--json")
    assert proc.returncode == 0, proc.stderr
    desc = json.loads(proc.stdout)
    axpy = next(a for a in desc["artifacts"] if a["name"] == "axpy")
    assert [(p["name"], p["c_type"]) for p in axpy["params"]] == [
        ("alpha", "float"), ("x", "const float*"), ("y", "float*"), ("n", "int32_t")]
    assert [b["arch"] for b in axpy["binaries"]] == ["sm_80", "sm_90a"]
    row_sum = next(a for a in desc["artifacts"] if a["name"] == "row_sum")
    assert row_sum["binaries"][0]["max_threads"] == [256, 1, 1]
    assert row_sum["binaries"][0]["static_smem"] == 1024


@needs_cuda_compiler
def test_inspect_reads_a_bare_cubin_and_spells_demangled_param_types(tmp_path, demo_dir):
    from kernelpack.bundle.kpack import Bundle

    out, _ = demo_dir
    scale = next(a for a in Bundle.read(out / "demo.kpack") if a.variant == "float")
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(scale.binary("sm_90a").data)
    proc = kp("inspect", str(cubin), "--json")
    assert proc.returncode == 0, proc.stderr
    desc = json.loads(proc.stdout)
    assert desc["arch"] == "sm_90a"
    k = next(k for k in desc["kernels"] if k["name"] == scale.entry)
    assert [p["c_type"] for p in k["params"]] == ["const float*", "float*", "float", "long long"]
    table = kp("inspect", str(cubin))
    assert table.returncode == 0 and "sm_90a" in table.stdout


@needs_cuda_compiler
@pytest.mark.skipif(find_cuda_tool("cuobjdump") is None, reason="cuobjdump not installed")
def test_inspect_sass_prints_the_disassembly(demo_dir):
    out, _ = demo_dir
    proc = kp("inspect", str(out / "demo.kpack"), "--sass")
    assert proc.returncode == 0, proc.stderr
    assert "Function : axpy" in proc.stdout and "EXIT" in proc.stdout


def test_inspect_of_a_missing_or_foreign_file_fails_cleanly(tmp_path):
    proc = kp("inspect", str(tmp_path / "nope.kpack"))
    assert proc.returncode == 1 and proc.stderr.startswith("kernelpack: error: cannot read")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"hello world" * 10)
    proc = kp("inspect", str(junk))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
