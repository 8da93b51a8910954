"""``kernelpack inspect`` shows what users ask (issue 30, item 3): per specialization the Triton config, the fields
of a struct passed by value, the grid rule; per family the dispatch order; per bundle or library the GPUs it runs on
(SASS, PTX through the driver's JIT, nothing); a built .so is called a library. GPU-less."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelpack.bundle.kpack import Bundle
from kernelpack.cli import commands


def inspect(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = commands.main(["inspect", *args])
    return code, capsys.readouterr().out


@pytest.fixture(scope="module")
def triton_bundle(tmp_path_factory: pytest.TempPathFactory, module_cache: object) -> Path:
    """A Triton family of two specializations with a grid rule, as SASS for sm_90a and PTX for compute_80."""
    pytest.importorskip("triton")
    import kernelpack.triton as kt
    from triton_kernels import add_kernel

    b = kt.compile(add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                   constexprs={"BLOCK": 1024}, arch=["sm_90a", "compute_80"], name="add", num_warps=8,
                   grid=lambda m: [["ceil_div", ["arg", "n", None], m["BLOCK"]], 1, 1],
                   specializations=[{"variant": "any"}, {"variant": "aligned", "divisibility": "all"}])
    return b.write(tmp_path_factory.mktemp("tri") / "tri.kpack")


@pytest.fixture(scope="module")
def rt_file(runtime_bundle: Bundle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return runtime_bundle.write(tmp_path_factory.mktemp("rt") / "rt.kpack")


def test_inspect_shows_the_triton_config_and_the_grid_rule(triton_bundle: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out = inspect(capsys, str(triton_bundle), "--json")
    assert code == 0
    arts = {a["variant"]: a for a in json.loads(out)["artifacts"]}
    assert arts["any"]["config"] == {"num_warps": 8, "num_stages": 3, "num_ctas": 1, "constexprs": {"BLOCK": 1024}}
    assert arts["aligned"]["grid"] == ["ceil_div(n, 1024)", "1", "1"]
    code, text = inspect(capsys, str(triton_bundle))
    assert "config: num_ctas=1, num_stages=3, num_warps=8, BLOCK=1024" in text
    assert "grid: ceil_div(n, 1024), 1, 1 (when the call gives none)" in text


def test_inspect_shows_the_fields_of_a_struct_parameter(rt_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = inspect(capsys, str(rt_file), "--json")
    rows = next(a for a in json.loads(out)["artifacts"] if a["name"] == "row_sums")
    t = rows["params"][0]
    assert t["c_type"] == "Rows" and [(f["name"], f["c_type"], f["offset"]) for f in t["fields"]] == [
        ("data", "float*", 0), ("shape0", "int32_t", 8), ("stride0", "int64_t", 16)]
    _, text = inspect(capsys, str(rt_file))
    assert ".shape0" in text and ".stride0" in text


def test_inspect_shows_each_familys_dispatch_order(rt_file: Path, triton_bundle: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _, out = inspect(capsys, str(rt_file), "--json")
    fams = {f["name"]: f for f in json.loads(out)["families"]}
    assert [r["label"] for r in fams["vadd"]["order"]] == ["vadd[aligned]", "vadd[any]"]
    assert fams["vadd"]["order"][0]["when"] == ["a 16-byte aligned", "b 16-byte aligned", "out 16-byte aligned",
                                                "n a multiple of 4"]
    assert [r["when"] for r in fams["scale"]["order"]] == [["x: f32*", "out: f32*"], ["x: f16*", "out: f16*"]]
    _, text = inspect(capsys, str(triton_bundle))
    assert "dispatch order" in text and "1. add[aligned]: x_ptr 16-byte aligned" in text
    assert "2. add[any]: any arguments the signature takes" in text


def test_inspect_lists_the_gpus_a_bundle_runs_on(rt_file: Path, triton_bundle: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _, out = inspect(capsys, str(rt_file), "--json")
    devices = {d["device"]: d for d in json.loads(out)["devices"]}
    families = len(json.loads(out)["families"])
    assert devices["sm_75"] == {"device": "sm_75", "sass": 0, "ptx": 0, "none": sorted(devices["sm_75"]["none"])}
    assert len(devices["sm_75"]["none"]) == families
    assert devices["sm_86"]["none"] == ["clustered"] and devices["sm_86"]["sass"] == families - 1  # sm_90a only
    assert devices["sm_90"]["sass"] == families and devices["sm_100"]["none"]
    _, text = inspect(capsys, str(triton_bundle))
    lines = " ".join(text.split())
    assert "sm_80-sm_89: every kernel through PTX (JIT-compiled by the driver on first load)" in lines
    assert "sm_90: every kernel as SASS" in lines and "sm_50-sm_75: nothing runs" in lines


def test_a_built_library_is_called_a_library(triton_bundle: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpack.clib import Library

    result = Library("tri", Bundle.read(triton_bundle)).build(tmp_path / "lib")
    _, text = inspect(capsys, str(result.shared))
    assert text.startswith("library, 2 kernel specialization(s)")
    _, out = inspect(capsys, str(result.shared), "--json")
    assert json.loads(out)["kind"] == "library"
    _, text = inspect(capsys, str(triton_bundle))
    assert text.startswith("bundle, 2 kernel specialization(s)")
