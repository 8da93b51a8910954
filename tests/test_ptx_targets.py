"""``compute_XY`` in an arch list embeds PTX for that virtual arch, never SASS: CUDA C++ (NVRTC and nvcc), Triton, CuTe
DSL kernels and kernelpack.toml projects; a PTX-only binary's ABI is verified against its ``.entry``; a frontend that
cannot emit PTX (cuTile, CuTe host programs) and PTX that could only be arch-specific are refused naming kernel and
arch. GPU-less."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.abi import Abi, DType, Param, Scalar
from kernelpack.core.binary import Binary
from kernelpack.core.errors import AbiMismatch, CompileError
from kernelpack.core.ptx import ptx_entries, ptx_target
from toolchain_support import needs_cuda_compiler

VECTOR_OPS = Path(__file__).resolve().parents[1] / "src" / "kernelpack" / "examples" / "vector_ops.cu"


def kinds(bundle: Bundle) -> list[list[tuple[str, str, str]]]:
    """Per artifact: (what it was built for, kind, the PTX .target or "ELF")."""
    return [[(str(b.target), b.kind, str(ptx_target(b.data.decode())) if b.kind == "ptx" else b.data[:4].decode(
        "latin-1")) for b in a.binaries] for a in bundle.artifacts]


@needs_cuda_compiler
@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_cuda_cpp_compute_archs_embed_ptx_for_that_virtual_arch(compiler, fresh_cache):
    import kernelpack.frontends.cuda.compile as kcuda

    b = kcuda.compile(VECTOR_OPS.read_text(), ["axpy", "scale<float>"], arch=["compute_80", "sm_90a", "compute_100f"],
                      compiler=compiler)
    want = [("compute_80", "ptx", "sm_80"), ("sm_90a", "cubin", "\x7fELF"), ("compute_100f", "ptx", "sm_100f")]
    assert kinds(b) == [want, want]
    for a in b.artifacts:
        ptx = a.binaries[0].data.decode()
        assert a.entry in ptx_entries(ptx) and b"\x7fELF" not in a.binaries[0].data
    assert [str(a.abi) for a in b.artifacts] == ["<Abi (float alpha, const float* x, float* y, int32_t n)>",
                                                 "<Abi (const float* x, float* out, float factor, int64_t n)>"]
    only = kcuda.compile(VECTOR_OPS.read_text(), ["axpy"], arch="compute_80", compiler=compiler)
    assert kinds(only) == [[("compute_80", "ptx", "sm_80")]]  # types still from the mangled name / probe


@needs_cuda_compiler
def test_a_ptx_only_binary_is_verified_against_its_entry_and_target(fresh_cache):
    import kernelpack.frontends.cuda.compile as kcuda

    (good,) = kcuda.compile(VECTOR_OPS.read_text(), ["axpy"], arch="compute_80").artifacts
    ptx = good.binaries[0]
    three = Abi(good.abi.params[:3])
    with pytest.raises(AbiMismatch, match=r"kernel axpy \(compute_80 PTX\): the ABI has 3 parameters .* but the PTX "
                                          r"entry axpy has 4"):
        KernelArtifact("axpy", "axpy", three, (ptx,))
    wide = Abi((Param("alpha", Scalar(DType.f64)), *good.abi.params[1:]))
    with pytest.raises(AbiMismatch, match=r"kernel axpy \(compute_80 PTX\).*alpha"):
        KernelArtifact("axpy", "axpy", wide, (ptx,))
    with pytest.raises(AbiMismatch, match=r"kernel axpy \(compute_90 PTX\): the PTX is for \.target sm_80, not sm_90; "
                                          r"file it as compute_80"):
        KernelArtifact("axpy", "axpy", good.abi, (Binary("compute_90", ptx.data, "ptx"),))
    with pytest.raises(AbiMismatch, match=r"kernel nope \(compute_80 PTX\): no \.entry nope in the PTX \(entries: "
                                          r"axpy, "):
        KernelArtifact("nope", "nope", good.abi, (ptx,))
    with pytest.raises(Exception, match=r"a cubin is SASS for a real arch; compute_80 names PTX"):
        Binary("compute_80", ptx.data, "cubin")


@needs_cuda_compiler
def test_a_project_arch_list_with_compute_builds_ptx(tmp_path, fresh_cache):
    from kernelpack.project import build

    (tmp_path / "k.cu").write_text(VECTOR_OPS.read_text())
    (tmp_path / "kernelpack.toml").write_text('[library]\nname = "pj"\narchs = ["sm_90a", "compute_80"]\n'
                                              'outputs = ["bundle"]\n\n[[cuda]]\nsource = "k.cu"\nkernels = ["axpy"]\n')
    report = build(tmp_path, jobs=1)
    bundle = Bundle.from_bytes(Path(report.outputs["bundle"]).read_bytes())
    assert kinds(bundle) == [[("sm_90a", "cubin", "\x7fELF"), ("compute_80", "ptx", "sm_80")]]


# ------------------------------------------------------------------------------------------------------------ Triton

TR_ADD = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


def test_triton_compute_archs_embed_its_ptx(fresh_cache):
    pytest.importorskip("triton")
    import kernelpack.frontends.triton.compile as kt
    from triton_kernels import add_kernel

    b = kt.compile(add_kernel, TR_ADD, constexprs={"BLOCK": 1024}, arch=["sm_90a", "compute_80", "compute_90",
                                                                       "compute_90a", "compute_100f"], name="tr")
    # Triton writes sm_90a PTX for capability 90; compute_90 (and the family) get it relaxed where ptxas accepts it
    assert kinds(b) == [[("sm_90a", "cubin", "\x7fELF"), ("compute_80", "ptx", "sm_80"), ("compute_90", "ptx", "sm_90"),
                         ("compute_90a", "ptx", "sm_90a"), ("compute_100f", "ptx", "sm_100f")]]
    (a,) = b.artifacts
    assert [p.role for p in a.abi.params][-2:] == ["global_scratch", "profile_scratch"]  # counted in the .entry
    assert "ptxas" in a.provenance.compiler


def test_triton_ptx_that_needs_arch_specific_instructions_is_refused_naming_kernel_and_arch(fresh_cache):
    pytest.importorskip("triton")
    import frontend_builds as fb
    import kernelpack.frontends.triton.compile as kt
    from triton_kernels import tma_matmul_kernel

    with pytest.raises(CompileError, match=r"kernel tma_matmul_kernel \(compute_90\): Triton's PTX for sm_90 uses "
                                           r"sm_90a-only instructions.*ask for compute_90a") as e:
        kt.compile(tma_matmul_kernel, fb.TMA, constexprs={"BM": 128, "BN": 128, "BK": 64}, arch="compute_90")
    assert "wgmma" in (e.value.log or "")


# ------------------------------------------------------------------------------------------------ cuTile and CuTe


def test_cutile_refuses_compute_archs_naming_kernel_and_arch():
    pytest.importorskip("cuda.tile")
    import cuda.tile as ct

    import kernelpack.frontends.cutile.compile as kct
    from cutile_kernels import array, vadd

    sig = [[array(ct.float32, 1), array(ct.float32, 1), array(ct.float32, 1), 1024]]
    with pytest.raises(CompileError, match=r"kernel vadd \(compute_80\): cuTile cannot embed PTX: its toolchain "
                                           r"\(tileiras\) writes SASS cubins .*ask for the SASS of each GPU to run on "
                                           r"\(sm_80\)"):
        kct.compile(vadd, sig, arch=["sm_90a", "compute_80"])


def test_cute_kernels_embed_ptx_and_host_programs_refuse_it():
    from cute_support import example, need_cute

    need_cute()
    import cutlass

    import kernelpack.cute as kc

    ea = example("elementwise_add")
    b = kc.compile(ea.elementwise_add, *ea.example_args(cutlass.Float32), arch=["compute_80", "sm_90a"], name="ew")
    assert kinds(b) == [[("compute_80", "ptx", "sm_80"), ("sm_90a", "cubin", "\x7fELF")]]
    (a,) = b.artifacts
    assert a.entry in ptx_entries(a.binaries[0].data.decode())
    with pytest.raises(CompileError, match=r"host program ew \(compute_80\): CuTe's export_to_c object embeds SASS"):
        kc.export(ea.elementwise_add, *ea.example_args(cutlass.Float32), arch=["sm_90a", "compute_80"], name="ew")


def test_an_unknown_virtual_arch_is_refused_before_any_compile():
    import kernelpack.frontends.cuda.compile as kcuda

    with pytest.raises(Exception, match=re.escape("not a CUDA arch: 'compute_95' (no NVIDIA GPU has SM 95")):
        kcuda.compile(VECTOR_OPS.read_text(), ["axpy"], arch=["compute_95"])
    with pytest.raises(Exception, match=r"sm_80 has no arch-specific 'a' target"):
        kcuda.compile(VECTOR_OPS.read_text(), ["axpy"], arch=["compute_80a"])

