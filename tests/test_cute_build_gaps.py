"""What a CuTe DSL package meets when kernelpack builds it ahead of time on a GPU-less machine (issue 27), each with
a minimal kernel of tests/cute_gap_kernels.py:

1. launchers compiled with ``--enable-tvm-ffi`` export as host programs (with the plain C ABI: the library imports
   neither TVM-FFI nor CuTe's runtime, and the environment stream becomes the entry's stream parameter);
2. a plain Python scalar argument gets the type ``cute.compile`` gives it;
3. a per-arch scope in which the user's objects are constructed and compiled for the target arch;
4. host (CPU, meta) example tensors become global-memory fake tensors with the same type.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from cute_support import need_cute
from toolchain_support import CC, needs_tools

need_cute()
torch = pytest.importorskip("torch")

import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
from cutlass.cute.runtime import from_dlpack, make_fake_compact_tensor  # noqa: E402

import cute_gap_kernels as g  # noqa: E402
import kernelpack  # noqa: E402
import kernelpack.cute as kc  # noqa: E402
from kernelpack.bundle.kpack import Bundle  # noqa: E402
from kernelpack.core.abi import DType, Scalar  # noqa: E402
from kernelpack.core.errors import CompileError  # noqa: E402
from kernelpack.frontends.base import Step  # noqa: E402
from kernelpack.frontends.cute import Cute  # noqa: E402
from kernelpack.frontends.cute.entry import FRONTEND  # noqa: E402
from kernelpack.frontends.cute.llvm import host_arg_types  # noqa: E402

TESTS = Path(__file__).resolve().parent


def undefined_symbols(path: Path) -> list[str]:
    return subprocess.run(["nm", "-D", "--undefined-only", str(path)], check=True, capture_output=True,
                          text=True).stdout.split()


# ------------------------------------------------------------------------------------------ 1. --enable-tvm-ffi


@needs_tools(CC, "ld", "objcopy", "nm")
def test_tvm_ffi_launcher_exports_a_driver_only_host_program(tmp_path: Path) -> None:
    program = kc.export(g.fill, *g.fill_args(), arch="sm_90a", name="fill", options="--enable-tvm-ffi")
    assert [(p.name, p.type.c_type, p.stream) for p in program.params] == [
        ("out", "tensor_f32_d_1", False), ("value", "float", False), ("stream", "void*", True)]
    assert "--enable-tvm-ffi" not in program.provenance.options  # what the object was compiled with
    built = kernelpack.Library("kpffi", program).build(tmp_path)
    undefined = undefined_symbols(built.shared)
    assert not [s for s in undefined if "TVMFFI" in s or "cuda_dialect" in s or s.lstrip("_").startswith("cu")]
    assert re.search(r"kpffi_fill\([^)]*void\* stream\)", built.header.read_text())


def test_environment_stream_is_the_launch_stream() -> None:
    """Compiled with the plain ABI, the environment stream is the host function's last argument, and that argument
    is what the launch is given."""
    from kernelpack.frontends.cute.compiler import _compile_arch
    from kernelpack.frontends.cute.scope import plain_host_abi, without_tvm_ffi

    options, had = without_tvm_ffi("--enable-tvm-ffi")
    assert had and options == ""
    with plain_host_abi():
        t = _compile_arch(g.fill, g.fill_args(), {}, kernelpack.core.arch.Arch.parse("sm_90a"), options)
    assert host_arg_types(t.compiled.ir_module, t.compiled.function_name)[-1] == "ptr"
    ir = str(t.compiled.ir_module)
    body = ir[ir.index(f"llvm.func @{t.compiled.function_name}("):]
    body = body[:body.index("\n  }\n")]
    assert re.search(r"llvm\.store %arg2, %\d+ : !llvm\.ptr, !llvm\.ptr", body)  # into the launch configuration


def test_tvm_ffi_from_the_environment_variable_is_turned_off_for_the_export() -> None:
    from cutlass.base_dsl.dsl import BaseDSL

    dsl = BaseDSL._get_dsl()
    old = dsl.envar.enable_tvm_ffi
    dsl.envar.enable_tvm_ffi = True  # what CUTE_DSL_ENABLE_TVM_FFI=1 sets
    try:
        program = kc.export(g.fill, *g.fill_args(), arch="sm_90a", name="fill")
    finally:
        dsl.envar.enable_tvm_ffi = old
    assert program.objects[0].info.version  # the object passed the format check (no TVM-FFI imports)


# ------------------------------------------------------------------------------------------ 2. plain Python scalars


def test_plain_python_scalars_get_the_type_cute_compile_gives_them() -> None:
    out = make_fake_compact_tensor(cutlass.Float32, (32,))
    args = (out, 7, 2.5, True)
    params = kc.host_leaves(g.scaled_fill, args)
    assert [(p.name, p.type) for p in params[1:]] == [
        ("n", Scalar(DType.i32)), ("x", Scalar(DType.f32)), ("flag", Scalar(DType.bool))]
    compiled = cute.compile(g.scaled_fill, *args, options="--gpu-arch sm_90a")  # the DSL's own answer
    assert host_arg_types(compiled.ir_module, compiled.function_name)[1:] == ["i32", "f32", "i1"]
    program = kc.export(g.scaled_fill, *args, arch="sm_90a", name="scaled_fill")  # checked against the lowering
    assert [p.type.c_type for p in program.params] == ["tensor_f32_32_1", "int32_t", "float", "bool"]
    (kernel,) = kc.compile(g.scaled_fill, *args, arch="sm_90a").artifacts
    assert [p.type.c_type for p in kernel.abi.params] == ["tensor_f32_32_1", "int32_t", "float", "bool"]


def test_annotated_numeric_wins_over_the_python_default() -> None:
    from kernelpack.frontends.cute.derive import python_scalar_dtype

    assert python_scalar_dtype(3) == DType.i32 and python_scalar_dtype(1.5) == DType.f32
    params = kc.host_leaves(g.fill, (make_fake_compact_tensor(cutlass.Float32, (8,)), 3, g.fill_args()[2]))
    assert params[1].type == Scalar(DType.f32)  # `value: Float32` given an int: cast, as the DSL does


# ------------------------------------------------------------------------------------------ 3. per-arch scope


def test_objects_built_outside_a_scope_see_the_build_machine_arch() -> None:
    """The failure kernelpack prevents: one object constructed once and compiled for two archs."""
    with pytest.raises(CompileError, match="constructed for .*, compiled for sm_80"):
        kc.compile(g.ArchReader(), *g.arch_reader_args(), arch=["sm_80", "sm_90a"])


def test_target_arch_holds_for_construction_and_compile() -> None:
    before = (g.dsl_arch(), os.environ.get("CUTE_DSL_ARCH"))
    with kc.target_arch("sm_90a"):
        assert str(g.dsl_arch()) == "sm_90a" and os.environ["CUTE_DSL_ARCH"] == "sm_90a"
        reader = g.ArchReader()
        (art,) = kc.compile(reader, *g.arch_reader_args(), arch="sm_90a").artifacts
        with pytest.raises(CompileError, match=r"inside kernelpack.cute.target_arch\('sm_90a'\)"):
            kc.compile(reader, *g.arch_reader_args(), arch="sm_80")
    assert (g.dsl_arch(), os.environ.get("CUTE_DSL_ARCH")) == before
    assert [str(b.arch) for b in art.binaries] == ["sm_90a"]


def test_per_arch_builds_each_arch_in_its_scope() -> None:
    bundles = kc.per_arch(["sm_80", "sm_90a"],
                          lambda a: kc.compile(g.ArchReader(), *g.arch_reader_args(), arch=a, name="reader"))
    (art,) = Bundle.of(*bundles).artifacts
    assert sorted(str(b.arch) for b in art.binaries) == ["sm_80", "sm_90a"]


@needs_tools("ld", "objcopy")
def test_project_entry_constructs_per_arch() -> None:
    entry = Cute("cute_gap_kernels.py:ArchReader", "cute_gap_kernels.py:arch_reader_args", name="reader", mode="host")
    out = FRONTEND.build(entry, Step(TESTS, "", 0, ("sm_80", "sm_90a")))
    from kernelpack.bundle.host_program import HostProgram

    program = HostProgram.from_bytes(out.data)
    assert [str(o.arch) for o in program.objects] == ["sm_80", "sm_90a"]


# ------------------------------------------------------------------------------------------ 4. host example tensors


def test_host_tensors_become_global_fake_tensors() -> None:
    src = from_dlpack(torch.zeros(1024), assumed_align=16).mark_compact_shape_dynamic(0, divisibility=8)
    dst = torch.empty(4096, device="meta")  # a framework tensor: marked as cute.compile marks it
    program = kc.export(g.stage, src, dst, arch="sm_90a", name="stage")
    assert [(p.type.c_type, p.checks) for p in program.params] == [
        ("tensor_f32_d_1", (("data", 16), ("shape0", 8))), ("tensor_f32_d_1", ())]
    (kernel,) = kc.compile(g.stage, src, dst, arch="sm_80").artifacts
    assert kernel.abi.params[0].type.c_type == "tensor_f32_d_1"


def test_converted_tensors_keep_type_widths_and_marks() -> None:
    from kernelpack.frontends.cute.examples import _type_text, to_global

    cases = [
        from_dlpack(torch.zeros(8, 64, 32, dtype=torch.float16)).mark_layout_dynamic(leading_dim=2),
        from_dlpack(torch.zeros(8, 64, 32, dtype=torch.float16), use_32bit_stride=True).mark_layout_dynamic(),
        from_dlpack(torch.zeros(64, 32, dtype=torch.bfloat16).t(), assumed_align=16),
    ]
    converted, _ = to_global(cases, {}, "case")
    for before, after in zip(cases, converted):
        assert _type_text(after) == _type_text(before).replace(", generic", ", gmem")
    fake = make_fake_compact_tensor(cutlass.Float32, (8,))
    nested, _ = to_global([(fake, cases[0])], {}, "nested")
    assert nested[0][0] is fake and "gmem" in _type_text(nested[0][1])


# ------------------------------------------------------------------------------------------ a package's own compiles


def test_capture_records_the_compile_a_package_interface_makes() -> None:
    (call,) = kc.capture_compiles(lambda: g.package_interface(5))
    assert call.fn is g.fill and call.options == "--enable-tvm-ffi" and len(call.args) == 3
    real = cute.compile
    with kc.recording_compiles() as calls:
        stand_in = g.package_interface(5)
    assert len(calls) == 1 and cute.compile is real  # the DSL's own again after the block
    with pytest.raises(CompileError, match="recorded by kernelpack.cute.capture_compiles, not compiled"):
        stand_in(None, None, None)
    program = kc.export(call.fn, *call.args, kwargs=call.kwargs, options=call.options, arch="sm_90a", name="fill")
    assert [p.name for p in program.params] == ["out", "value", "stream"]


def test_capture_records_the_bracketed_compile_spelling_too() -> None:
    """``cute.compile[opts](fn, ...)`` (the DSL's other spelling) is recorded as ``cute.compile(fn, ...,
    options=opts)``; before, the recorder was a plain function and the subscript failed."""
    (call,) = kc.capture_compiles(lambda: g.package_interface_bracketed(5))
    assert call.fn is g.fill and call.options == "--enable-tvm-ffi" and len(call.args) == 3


@needs_tools("ld", "objcopy")
def test_project_entry_builds_a_captured_call() -> None:
    entry = Cute(capture="cute_gap_kernels.py:captured_fill", name="fill", mode="host")
    from kernelpack.bundle.host_program import HostProgram

    program = HostProgram.from_bytes(FRONTEND.build(entry, Step(TESTS, "", 0, ("sm_90a",))).data)
    assert [p.name for p in program.params] == ["out", "value", "stream"]
    with pytest.raises(kernelpack.core.errors.ProjectError, match="'capture' replaces 'function'"):
        Cute("cute_gap_kernels.py:fill", capture="cute_gap_kernels.py:captured_fill")


# ------------------------------------------------------------------------------------------ the target device


def test_device_properties_answer_hardware_info_for_the_target() -> None:
    with pytest.raises(CompileError, match=r"give the target device's sm_count"):
        kc.compile(g.per_sm, *g.per_sm_args(), arch="sm_90a")
    with kc.target_arch("sm_90a", device={"sm_count": 7}):
        (art,) = kc.compile(g.per_sm, *g.per_sm_args(), arch="sm_90a").artifacts
    assert art.launch.grid == (7, 1, 1)
    entry = Cute("cute_gap_kernels.py:per_sm", "cute_gap_kernels.py:per_sm_args", name="per_sm",
                 device={"sm_100a": {"sm_count": 148}})
    (art,) = Bundle.from_bytes(FRONTEND.build(entry, Step(TESTS, "", 0, ("sm_100a",))).data).artifacts
    assert art.launch.grid == (148, 1, 1)
    with pytest.raises(CompileError, match="unknown device property 'sms'"):
        with kc.target_arch("sm_90a", device={"sms": 7}):
            pass


def test_host_program_rows_warn_only_about_archs_the_program_lacks() -> None:
    """A host program describes its kernels per arch where their layouts differ (TMA descriptors); the build report
    must not read each per-arch description as a kernel missing the other archs."""
    import dataclasses

    from kernelpack.project.runner import _host_rows

    src = make_fake_compact_tensor(cutlass.Float32, (cute.sym_int(),), assumed_align=16)
    program = kc.export(g.stage, src, src, arch=["sm_80", "sm_90a"], name="stage")
    (k,) = program.kernels
    per_arch = tuple(dataclasses.replace(k, binaries=(b,)) for b in k.binaries)  # as unmerged descriptions are
    split = dataclasses.replace(program, kernels=per_arch)
    assert not [w for r in _host_rows([split], ("sm_80", "sm_90a")) for w in r.warnings if "not built" in w]
    rows = _host_rows([split], ("sm_80", "sm_90a", "sm_100a"))
    assert [w for r in rows for w in r.warnings if "not built" in w] == ["not built for sm_100a"] * 2
