"""The corpus GPU run's CuTe replay and timing logic, proven without a GPU.

Recorded launches (``corpus.cute_launch``): launcher arguments as records, the constexpr-free call mapping, kernel
ABI parameters matched to them (or refused with the reason), the grid evaluated from the artifact's formula, host
program records, the rebuild of a record as a tensor; the float64 references (``corpus.cute_reference``) on CPU
tensors; the C++ driver over host-program entries (by-value descriptor structs); arch selection; the report's
kernel/host time columns.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from corpus import cute_launch  # noqa: E402 - the corpus package lives at the repository root
from corpus.cute_reference import ce_fwd, reference_for, rms_norm_fwd, scale_in_place  # noqa: E402
from corpus.gpu_check import (  # noqa: E402
    Param,
    Row,
    driver_source,
    pack_slots,
    parse_descriptors,
    parse_host_prototypes,
    read_manifest,
    render,
    runs_on,
    supported,
)
from corpus.gpu_timing import MIN_SLEEP_US, backlog_us  # noqa: E402

from kernelpack.core.abi import Abi, Scalar, Struct, TensorSpec  # noqa: E402
from kernelpack.core.abi import Param as AbiParam  # noqa: E402
from kernelpack.core.launchspec import LaunchSpec  # noqa: E402
from kernelpack.runtime.cstructs import KpTensor  # noqa: E402

torch = pytest.importorskip("torch")


def _tensor_param(name: str, dtype: str, shape: tuple[int | None, ...], stride: tuple[int | None, ...]) -> AbiParam:
    spec = TensorSpec(dtype, shape, stride)
    return AbiParam(name, Struct.tensor_descriptor(f"tensor_{name}", spec))


def _artifact(params: list[AbiParam], grid: Any) -> Any:
    """What describe_kernel reads of a KernelArtifact: its name, ABI and launch spec (real kernelpack objects)."""
    return types.SimpleNamespace(name="k", abi=Abi(tuple(params)), launch=LaunchSpec(grid=grid))


def test_torch_and_scalar_arguments_become_records() -> None:
    x = torch.zeros(8, 16, dtype=torch.bfloat16)[:, :12]
    assert cute_launch.describe_value(x) == {"dtype": "bfloat16", "shape": [8, 12], "stride": [16, 1]}
    assert cute_launch.describe_value(1e-6) == {"value": 1e-6}
    assert cute_launch.describe_value(None) == {"value": None}


def test_cute_dlpack_tensor_records_its_concrete_extents() -> None:
    pytest.importorskip("cutlass.cute")
    from cutlass.cute.runtime import from_dlpack

    t = from_dlpack(torch.zeros(8, 16, dtype=torch.float32)).mark_layout_dynamic()
    assert cute_launch.describe_value(t) == {"dtype": "float32", "shape": [8, 16], "stride": [16, 1]}


def test_call_arguments_map_to_runtime_parameters_skipping_constexprs() -> None:
    class Constexpr:  # how CuTe launchers annotate compile-time parameters (cutlass.Constexpr)
        pass

    def launcher(mX: Any, eps: float, N: Constexpr, VEC: Constexpr, stream: Any = None) -> None:
        pass

    assert cute_launch.runtime_params(launcher) == ["mX", "eps", "stream"]
    example = torch.zeros(4, 8)
    real = torch.zeros(16, 8)
    call = cute_launch.describe_call((real, 0.5), {})
    host = cute_launch.host_values(launcher, (example, 1e-6, 8, 4, None), ["mX", "eps", "N", "VEC", "stream"], call)
    assert host["mX"]["shape"] == [16, 8]  # the run-time call wins over the compile-time example
    assert host["eps"] == {"value": 0.5}
    assert host["N"] == {"value": 8}  # constexprs stay as compiled


def test_kernel_parameters_take_the_launcher_argument_of_the_same_name_and_the_grid_its_formula() -> None:
    params = [_tensor_param("mX", "bf16", (None, None), (None, 1)), _tensor_param("mW", "bf16", (None,), (1,)),
              AbiParam("eps", Scalar("f32"))]
    host = {"mX": {"dtype": "bfloat16", "shape": [2112, 4096], "stride": [4096, 1]},
            "mW": {"dtype": "bfloat16", "shape": [4096], "stride": [1]}, "eps": {"value": 1e-6},
            "NUM_WARPS": {"value": 8}, "stream": {"stream": True}}
    got = cute_launch.describe_kernel(_artifact(params, (["ceil_div", ["arg", "mX", "shape0"], 2], 1, 1)), host)
    assert got["names"] == ["mX", "mW", "eps"]
    assert got["args"][0] == host["mX"] and got["args"][2] == {"value": 1e-6}
    assert got["grid"] == [1056, 1, 1]


def test_a_kernel_view_the_launcher_derives_is_refused_with_the_reason() -> None:
    tiled = _tensor_param("gA", "bf16", (1024, None), (1, 1024))
    host = {"mA": {"dtype": "bfloat16", "shape": [4096], "stride": [1]}}
    assert "gA is built by the launcher's DSL code" in cute_launch.describe_kernel(_artifact([tiled], (1, 1, 1)),
                                                                                    host)["error"]
    renamed = {"gA": {"dtype": "bfloat16", "shape": [4096], "stride": [1]}}
    assert "rank 2" in cute_launch.describe_kernel(_artifact([tiled], (1, 1, 1)), renamed)["error"]
    fixed = {"gA": {"dtype": "bfloat16", "shape": [512, 4], "stride": [1, 512]}}
    assert "shape[0] is 1024" in cute_launch.describe_kernel(_artifact([tiled], (1, 1, 1)), fixed)["error"]
    x = [_tensor_param("mX", "f32", (None,), (1,))]
    no_formula = cute_launch.describe_kernel(_artifact(x, None), {"mX": {"dtype": "float32", "shape": [4],
                                                                           "stride": [1]}})
    assert "computes the grid in DSL code" in no_formula["error"]


def _host_program(*params: tuple[str, bool]) -> Any:
    """What describe_launch reads of a kernelpack HostProgram: its type name and (name, stream) params."""
    cls = type("HostProgram", (), {"params": tuple(types.SimpleNamespace(name=n, stream=st) for n, st in params)})
    return cls()


def test_a_grid_the_launcher_computes_from_its_own_arguments_comes_from_its_documented_rule() -> None:
    x = [_tensor_param("mQ", "f32", (None,), (1,))]
    host = {"mQ": {"dtype": "float32", "shape": [64], "stride": [1]}, "n_tok": {"value": 1024},
            "stream": {"stream": True}}
    got = cute_launch.describe_kernel(_artifact(x, None), host, (["arg", "n_tok", None], 1, 1))
    assert got["grid"] == [1024, 1, 1]
    assert "liger_kernel.ops.cutedsl.ops.rope:_make_launch_token" in cute_launch.LAUNCHER_GRIDS


def test_host_program_records_every_parameter_but_the_stream() -> None:
    host = {"a": {"dtype": "float32", "shape": [4, 4], "stride": [4, 1]}, "n": {"value": 3},
            "stream": {"stream": True}}
    out = cute_launch.describe_launch(host, _host_program(("a", False), ("n", False), ("stream", True)))
    assert out["program"]["args"] == [{"name": "a", **host["a"]}, {"name": "n", "value": 3}]
    missing = cute_launch.describe_launch({"stream": {"stream": True}}, _host_program(("b", False)))
    assert "no record for b" in missing["program"]["error"]


def test_a_record_rebuilds_as_a_tensor_of_its_dtype_shape_and_strides() -> None:
    gen = torch.Generator().manual_seed(0)
    t = cute_launch.rebuild({"dtype": "bfloat16", "shape": [3, 4], "stride": [8, 1]}, gen, device="cpu")
    assert (t.dtype, tuple(t.shape), t.stride()) == (torch.bfloat16, (3, 4), (8, 1))
    assert torch.isfinite(t.float()).all() and t.float().abs().sum() > 0
    b = cute_launch.rebuild({"dtype": "float32", "shape": [3, 4], "stride": [0, 1]}, gen, device="cpu")
    assert b.stride() == (0, 1) and torch.equal(b[0], b[2])  # a broadcast row
    i = cute_launch.rebuild({"dtype": "int64", "shape": [5], "stride": [1]}, gen, device="cpu")
    assert int(i.abs().sum()) == 0  # integers are zero: valid indices
    assert cute_launch.rebuild({"value": 7}, gen, device="cpu") == 7


# ------------------------------------------------------------------------------------------------- references


def test_rms_norm_reference_matches_torch_rms_norm() -> None:
    x, w = torch.randn(6, 32, dtype=torch.float64), torch.randn(32, dtype=torch.float64)
    out = rms_norm_fwd({"mX": x, "mW": w, "eps": 1e-6, "offset": 1.0}, {"ELEMENTWISE_AFFINE": {"value": True}})
    want = torch.nn.functional.rms_norm(x, (32,), eps=1e-6) * (1.0 + w)
    assert torch.allclose(out["mY"], want)
    assert torch.allclose(out["mRSTD"], 1 / torch.sqrt((x * x).mean(-1) + 1e-6))
    plain = rms_norm_fwd({"mX": x, "mW": w, "eps": 1e-6, "offset": 0.0}, {"ELEMENTWISE_AFFINE": {"value": False}})
    assert torch.allclose(plain["mY"], torch.nn.functional.rms_norm(x, (32,), eps=1e-6))
    assert reference_for("cute_rms_norm_fwd_vector_host_NUM_THREADS256") is rms_norm_fwd
    assert reference_for("cute_rms_norm_bwd_dx_host") is None


def test_cross_entropy_reference_matches_torch_loss_and_gradient() -> None:
    x = torch.randn(5, 40, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([3, 0, -100, 39, 7])
    inv_n = 1 / 4
    out = ce_fwd({"mX": x.detach(), "mY": y, "inv_n_loss": inv_n, "ignore_index": -100},
                 {"HAS_GRAD": {"value": True}})
    loss = torch.nn.functional.cross_entropy(x, y, ignore_index=-100, reduction="sum") * inv_n
    loss.backward()
    per_row = torch.nn.functional.cross_entropy(x.detach(), y, ignore_index=-100, reduction="none") * inv_n
    assert torch.allclose(out["mLoss"], per_row)
    assert torch.allclose(out["mX"], x.grad)
    assert ce_fwd({"mX": x.detach(), "mY": y, "inv_n_loss": inv_n, "ignore_index": -100},
                  {"HAS_SMOOTHING": {"value": True}}) is None  # a path the reference does not model


def test_scale_in_place_reference_scales_every_row_by_the_first_scale() -> None:
    x = torch.randn(3, 8, dtype=torch.float64)
    assert torch.equal(scale_in_place({"mX": x, "mScale": torch.tensor([2.0, 9.0])}, {})["mX"], 2 * x)


# ------------------------------------------------------------------------------- host programs from C++, archs

HOST_HEADER = """
/** Tensor descriptor: bf16 data, shape [?, ?] (i32), stride [?, 1] (i64, in elements). */
typedef struct liger_tensor_bf16_dxd_Dx1 {
    kp_bf16* data; /**< device pointer to element [0, ..., 0] */
    int32_t shape0; /**< extent of mode 0 */
    int32_t shape1; /**< extent of mode 1 */
    int64_t stride0; /**< stride of mode 0, in elements */
} liger_tensor_bf16_dxd_Dx1;

typedef struct liger_coord_tensor_shape_d {
    int32_t shape0;
} liger_coord_tensor_shape_d;

kp_status liger_cute_gemm(liger_tensor_bf16_dxd_Dx1 a, int32_t n, void* stream);
LIGER_API kp_status liger_cute_k(const kp_launch* kp_cfg, const kp_tensor* x);
"""


def test_host_program_entries_take_descriptor_structs_the_driver_fills_from_kp_tensors() -> None:
    assert list(parse_descriptors(HOST_HEADER)) == ["liger_tensor_bf16_dxd_Dx1"]  # a coord shape is no tensor
    hosts = parse_host_prototypes(HOST_HEADER, "liger")
    assert list(hosts) == ["cute_gemm"]  # kernel entries (kp_launch first) are not host programs
    a, n, stream = hosts["cute_gemm"]
    assert a.descriptor[0] == ("kp_bf16*", "data") and not n.descriptor and stream.ctype == "void*"
    assert supported(hosts["cute_gemm"]) == ""
    src = driver_source("liger", {}, hosts)
    assert "v.shape1 = static_cast<int32_t>(t->shape[1]);" in src
    assert "v.stride0 = static_cast<int64_t>(t->stride[0]);" in src
    assert "liger_cute_gemm(make_liger_tensor_bf16_dxd_Dx1(" in src and "(void)cfg;" in src
    keep: list[Any] = []
    x = torch.zeros(4, 6, dtype=torch.bfloat16)
    slots = pack_slots(hosts["cute_gemm"], {"a": x, "n": 3, "stream": 0}, keep)
    assert isinstance(keep[0], KpTensor) and list(keep[0].shape)[:2] == [4, 6] and slots[1:] == [3, 0]


def test_driver_over_host_and_kernel_entries_compiles_under_werror(tmp_path: Path) -> None:
    inc = tmp_path / "liger.h"
    inc.write_text("#include <stdint.h>\n#define LIGER_API\ntypedef int kp_status;\ntypedef int kp_dtype;\n"
                   "typedef struct kp_bf16 { uint16_t bits; } kp_bf16;\n"
                   "typedef struct kp_tensor { void* data; kp_dtype dtype; int32_t rank; int64_t shape[8]; "
                   "int64_t stride[8]; } kp_tensor;\ntypedef struct kp_launch { uint32_t grid[3]; } kp_launch;\n"
                   "const char* liger_last_error(void);\n" + HOST_HEADER)
    hosts = parse_host_prototypes(HOST_HEADER, "liger")
    from corpus.gpu_check import parse_prototypes

    src = tmp_path / "driver.cpp"
    src.write_text(driver_source("liger", parse_prototypes(HOST_HEADER, "liger"), hosts))
    p = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", f"-I{tmp_path}",
                        str(src)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_binaries_run_on_their_arch_or_newer_and_arch_specific_ones_only_on_theirs() -> None:
    assert runs_on(("sm_80", "sm_90a"), (9, 0))
    assert runs_on(("sm_80",), (9, 0))
    assert not runs_on(("sm_100a",), (9, 0))
    assert not runs_on(("sm_90a",), (10, 0))
    assert runs_on(("compute_80",), (10, 0))


def test_manifest_entries_carry_archs_and_whether_a_host_program(tmp_path: Path) -> None:
    spec = {"dsl": "cute", "kernel": "m:k", "family": "cute_k", "sources": ["c[p]"], "key": json.dumps({"f": {}}),
            "compiled": True, "artifacts": [{"name": "cute_k", "archs": ["sm_80", "sm_90a"]}],
            "launch": {"kernels": {"cute_k": {"error": "x"}}}}
    host = {**spec, "family": "cute_h", "artifacts": None, "host_program": {"name": "cute_h", "archs": ["sm_90a"]}}
    (tmp_path / "manifest.json").write_text(json.dumps({"libraries": {}, "specs": [spec, host]}))
    _, entries = read_manifest(tmp_path / "manifest.json")
    assert [(e.family, e.archs, e.host_program) for e in entries] == [("cute_k", ("sm_80", "sm_90a"), False),
                                                                       ("cute_h", ("sm_90a",), True)]


# ------------------------------------------------------------------------------------------------------ timing


def test_report_shows_kernel_time_ratio_and_host_time_apart() -> None:
    r = Row("cute", "k", "", "pass", "pass (== Python, bit for bit)", 2.0, 2.04, 6.5, 3.25)
    text = render([r, Row("cute", "n", "", "ran (no reference)", "pass", None, float("nan"), None, 4.0)])
    assert "| package kernel us | kernelpack kernel us | kernel ratio | package host us | kernelpack host us |" in text
    assert "| 2.00 | 2.04 | 1.020 | 6.50 | 3.25 |" in text
    assert "| - | - | - | - | 4.00 |" in text  # a failed kernel-time measurement shows as '-', no ratio
    assert "1/1 within 3%" in text


def test_backlog_outlasts_the_host_time_of_the_batch_twice() -> None:
    assert backlog_us(10.0) == MIN_SLEEP_US
    assert backlog_us(900.0) == 1800.0


def test_cpp_host_program_call_needs_no_unsupported_parameter() -> None:
    assert "parameter c" in supported([Param("liger_coord_tensor_shape_d", "c")])


@pytest.mark.gpu
def test_gpu_run_launches_the_recorded_cute_kernels(tmp_path: Path) -> None:
    """On the GPU machine after ``scripts/corpus.py --package liger --gpu-prepare``: every CuTe row launched from
    Python and C++ passes (or says why it was not launched)."""
    from gpu import gpu_count

    if gpu_count() == 0:
        pytest.skip("no CUDA GPU/driver")
    if not (ROOT / ".gpu" / "corpus" / "manifest.json").exists():
        pytest.skip(".gpu/corpus/ not prepared (python scripts/corpus.py --package liger --gpu-prepare)")
    out = tmp_path / "report.md"
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "corpus_gpu.py"), "--dsl", "cute", "--reps", "3",
                        "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    text = out.read_text()
    assert "FAIL" not in text, text
    assert "pass (== float64 reference)" in text and "pass (== Python, bit for bit)" in text
