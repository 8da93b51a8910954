"""CuTe kernel-level capture reads each launch through the DSL's own launch-argument handling, and a DSL compile
error puts the DSL's own diagnostic line in kernelpack's message with the whole exception chain in the log."""

from __future__ import annotations

import re

import pytest

from cute_support import need_cute
from kernelpack import CompileError

need_cute()
import cutlass.cute as cute  # noqa: E402

import cute_launch_forms as forms  # noqa: E402
import kernelpack.cute as kc  # noqa: E402
from kernelpack.frontends.cute.capture import capture_launches  # noqa: E402

GRID = (("ceil_div", ("arg", "n", None), forms.THREADS), 1, 1)
ABI = "tensor_f32_d_1 x, tensor_f32_d_1 y, int32_t n"


@pytest.mark.parametrize("form", ["keyword_stream", "async_deps", "call_form", "positional_fields"])
def test_every_launch_form_compiles_at_kernel_level(form: str) -> None:
    """``stream=`` (every liger-kernel CuTe launcher passes it), ``async_deps=``, ``kernel(...)(...)`` and positional
    LaunchConfig fields: the DSL's own config is what kernelpack reads."""
    (art,) = kc.compile(getattr(forms, form), *forms.example_args(), arch="sm_90a", name=form)
    assert art.abi.describe() == ABI
    assert art.launch.grid == GRID
    assert art.launch.block == (forms.THREADS, 1, 1)
    assert art.launch.cluster is None


def test_cluster_and_smem_come_from_the_dsl_config() -> None:
    (art,) = kc.compile(forms.smem_and_cluster, *forms.example_args(), arch="sm_90a", name="cl")
    assert art.launch.cluster == (2, 1, 1)
    assert art.launch.dynamic_smem == 1024
    assert art.launch.grid == (("mul", GRID[0], 2), 1, 1)


@pytest.mark.parametrize("form", ["keyword_stream", "async_deps"])
def test_the_recorded_config_is_the_dsls_own(form: str) -> None:
    """The config kernelpack keeps is the object the DSL built for the launch: the stream became its async_deps."""
    with capture_launches() as launches:
        cute.compile(getattr(forms, form), *forms.example_args(), options="--gpu-arch sm_90a")
    (rec,) = launches
    from cutlass.base_dsl.dsl import BaseDSL

    assert isinstance(rec.config, BaseDSL.LaunchConfig)
    deps = rec.config.async_deps
    assert len(deps if isinstance(deps, list) else [deps]) == 1  # the stream, however it was passed
    assert rec.config.block == [forms.THREADS, 1, 1]
    assert not rec.error
    assert "LaunchConfig" not in vars(BaseDSL._get_dsl())  # the recording shadow is gone after the launch


def test_cooperative_and_pdl_launches_become_artifact_launch_flags() -> None:
    (coop,) = kc.compile(forms.cooperative, *forms.example_args(), arch="sm_90a", name="coop")
    assert coop.launch.cooperative and not coop.launch.pdl
    (pdl,) = kc.compile(forms.pdl, *forms.example_args(), arch="sm_90a", name="pdl")
    assert pdl.launch.pdl and not pdl.launch.cooperative


@pytest.mark.parametrize(("form", "line"), [
    ("bad_block", r"Launch block must have at most 3 dimensions, but got 4\. \(cute_launch_forms\.py:\d+:\d+\)"),
    ("undefined_name", r"NameError in `undefined_name`: name 'undefined_value' is not defined "
                       r"\(cute_launch_forms\.py:\d+\)"),
    ("ptxas_error", r"PTX assembly failed \(cute_launch_forms\.py:\d+:\d+\): ptxas application ptx input, line \d+; "
                    r"error\s+: Unknown modifier '\.instruction'"),
])
def test_dsl_errors_show_the_dsls_first_diagnostic_line(form: str, line: str) -> None:
    with pytest.raises(CompileError) as info:
        kc.compile(getattr(forms, form), *forms.example_args(), arch="sm_90a", name=form)
    e = info.value
    assert e.message.startswith(f"{form}: CuTe compile for sm_90a failed: ")
    assert re.search(line, e.message), e.message
    assert "\x1b[" not in e.message and e.log and "\x1b[" not in e.log
    assert "[0] cutlass." in e.log and "traceback:" in e.log
    if form == "ptxas_error":  # the chained MLIRError with the raw pass failure is in the log too
        assert "[1] " in e.log and "PTXAS_ERROR_COMPILATION" in e.log
    # the location is the user's launch or kernel line, never kernelpack's own wrapper
    assert "capture.py" not in e.message


# ------------------------------------------------------------------ kernel parameters liger-kernel's launchers pass


def test_coordinate_tensor_and_static_layout_parameters() -> None:
    """An identity tensor with a dynamic shape is a struct of that shape; a static layout is no parameter at all
    (both verified against the cubin of each arch, as every derived ABI is)."""
    (art,) = kc.compile(forms.identity_and_layout, *forms.example_args(), arch=["sm_80", "sm_90a"], name="ident")
    assert art.abi.describe() == "tensor_f32_d_1 x, tensor_f32_d_1 y, coord_tensor_shape_d coords"
    assert [f.name for f in art.abi.params[2].type.fields] == ["shape0"]


@pytest.mark.parametrize(("spelling", "fields"), [
    ('!cute.coord_tensor<"(0,0)", "((1024),(?,?)):((1@0),(1024@0,1@1))">', ["shape0", "shape1"]),
    ('!cute.coord_tensor<"(0,0)", "((1024),(?{i64},?{i64})):((1@0),(1024@0,1@1))">', ["shape0", "shape1"]),
    ('!cute.coord_tensor<"(?,0)", "(8,4):(1@0,1@1)">', ["coord0"]),
    ('!cute.coord_tensor<"0", "(8):(?@0)">', ["stride0"]),
])
def test_coordinate_tensor_spellings(spelling: str, fields: list[str]) -> None:
    from kernelpack.frontends.cute.types import coord_tensor_struct

    st = coord_tensor_struct(spelling)
    assert [f.name for f in st.fields] == fields
    assert {f.type.dtype.value for f in st.fields} == ({"i64"} if "i64" in spelling else {"i32"})


def test_coordinate_tensor_with_several_dynamic_parts_is_refused() -> None:
    from kernelpack.frontends.cute.types import coord_tensor_struct

    with pytest.raises(CompileError, match=r"dynamic leaves in its coord and shape have no known C layout"):
        coord_tensor_struct('!cute.coord_tensor<"(?,0)", "(?,4):(1@0,1@1)">')


@pytest.mark.parametrize(("spelling", "static"), [
    ('!cute.tiled_copy<!cute_nvgpu.atom.universal_copy<bf16, 128 b>, layout_copy_tv = <"(128,8):(8,1)">, '
     'tiler_mn = <"[1:0;1024:1]">>', True),
    ('!cute.layout<"128:8">', True),
    ('!cute.coord_tensor<"(0,0)", "((1024),(4,8)):((1@0),(1024@0,1@1))">', True),
    ('!cute.layout<"(?,4):(4,1)">', False),
    ('!cute.coord_tensor<"(0,0)", "((1024),(?,?)):((1@0),(1024@0,1@1))">', False),
    ('!cute_nvgpu.atom.non_exec_tiled_tma_load<sm_90, bf16, copy_bits = 131072>', False),
    ('!cute.memref<f32, gmem, "(8):(1)">', False),
])
def test_static_layout_like_values_vanish(spelling: str, static: bool) -> None:
    from kernelpack.frontends.cute.types import is_static

    assert is_static(spelling) is static


def test_python_ints_the_dsl_bakes_into_a_kernel_are_no_parameters_of_it() -> None:
    """A plain Python number a launcher hands its kernel is a compile-time value of the kernel (the cubin has no
    parameter for it): the launch has no kernel-level C form -- said, not guessed as an int32 parameter the cubin
    lacks -- and the launcher exported whole builds, its kernel described by the cubin."""
    from kernelpack.frontends.cute.entry import auto

    with pytest.raises(CompileError, match=r"no kernel-level C form .*tiler\.0: a plain Python int .* baked"):
        kc.compile(forms.python_ints_into_kernel, *forms.example_args(), arch="sm_90a", name="tiled")
    out = auto(forms.python_ints_into_kernel, forms.example_args(), ["sm_90a"], "tiled")
    assert out.kind == "host"


def test_a_host_programs_kernel_the_cubin_contradicts_is_described_by_the_cubin() -> None:
    """Inside a host program the launcher launches its kernels itself: where the parameters kernelpack derived for a
    kernel disagree with its cubin (liger's CrossEntropyClusterVector: 5 derived, 7 in the cubin), the kernel is
    described by the cubin's parameter sizes instead of failing the export."""
    from kernelpack.core.arch import parse_archs
    from kernelpack.frontends.cute import compiler as cc

    (arch,) = parse_archs("sm_90a")
    traced = cc._compile_arch(forms.keyword_stream, forms.example_args(), {}, arch, "")
    rec = next(r for r in traced.launches if not r.error)
    rec.params = rec.params[:-1]  # a derived parameter list the cubin contradicts
    (art,) = cc._host_kernels(traced, "ks", "", cc._provenance(forms.keyword_stream, ""))
    assert [type(p.type).__name__ for p in art.abi.params] == ["Opaque"] * 3
