"""The mistakes new users make get the message that helps (issue 30, item 1): arguments are checked before the driver
is needed (a GPU-less machine says "CPU memory", not "no driver"); a misspelled type, arch, kernel name or TOML key
names the one meant; a missing source file is an error at its TOML line before any step runs; a failed step is
printed once. GPU-less (the runtime cases load no driver at all)."""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path

import pytest

import kernelpack
import kernelpack.cli as cli
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.errors import LaunchError, ProjectError
from kernelpack.project import load_project
from kernelpack.runtime import ArgumentValueError, DriverError, NoMatchingSpecialization
from runtime_support import CudaArray, python_path
from toolchain_support import needs_cuda_compiler, needs_nvrtc

LIB = '[library]\nname = "p"\narchs = ["sm_90a"]\n'
KERNEL = 'extern "C" __global__ void neg(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = -y[i]; }\n'


class CpuArray:
    """A DLPack-style array in host memory (``__dlpack_device__`` says CPU); never read."""

    __cuda_array_interface__ = {"data": (0x1000, False), "shape": (16,), "typestr": "<f4", "strides": None,
                                "version": 3}

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


@pytest.fixture(params=["c", "python"])
def no_driver(request: pytest.FixtureRequest, runtime_bundle: Bundle, tmp_path: Path) -> Iterator[object]:
    """The runtime bundle loaded where no CUDA driver can be opened, through the C path and the Python path."""
    from kernelpack.runtime import driver

    path = tmp_path / "rt.kpack"
    runtime_bundle.write(path)
    driver.use_library(str(tmp_path / "no-such-dir" / "libcuda.so.1"))
    try:
        if request.param == "python":
            with python_path():
                yield kernelpack.load(path)
        else:
            yield kernelpack.load(path)
    finally:
        driver.use_library()


def test_without_a_driver_host_memory_is_refused_as_host_memory(no_driver) -> None:
    x = CudaArray(0x1000, (16,))
    with pytest.raises(ArgumentValueError, match="parameter 0 'a' is a .* on cpu; kernels need CUDA device memory"):
        no_driver.add(CpuArray(), x, x, 16, grid=1, block=16)


def test_without_a_driver_a_wrong_dtype_is_refused_naming_the_dtype(no_driver) -> None:
    x, ints = CudaArray(0x1000, (16,)), CudaArray(0x2000, (16,), "<i4")
    with pytest.raises(NoMatchingSpecialization, match="parameter 0 'a': expected a f32 tensor, got a i32 tensor"):
        no_driver.add(ints, x, x, 16, grid=1, block=16)
    with pytest.raises(NoMatchingSpecialization, match="kernel scale: no specialization accepts these arguments"):
        no_driver.scale(ints, ints, 2.0, 16, grid=1, block=16)


def test_without_a_driver_a_missing_block_or_grid_is_refused(no_driver) -> None:
    x = CudaArray(0x1000, (16,))
    with pytest.raises(LaunchError, match="kernel add: block is required"):
        no_driver.add(x, x, x, 16, grid=1)
    with pytest.raises(LaunchError, match="kernel add: grid is required"):
        no_driver.add(x, x, x, 16, block=16)
    with pytest.raises(LaunchError, match="block .* has a dimension < 1"):
        no_driver.add(x, x, x, 16, grid=1, block=(0, 1))
    with pytest.raises(DriverError, match="kernel fixed_block: cannot load the CUDA driver"):
        no_driver.fixed_block(x, x, x, 16, grid=1)


def test_without_a_driver_good_arguments_reach_the_driver_error(no_driver) -> None:
    x = CudaArray(0x1000, (16,))
    with pytest.raises(DriverError, match="kernel add: cannot load the CUDA driver"):
        no_driver.add(x, x, x, 16, grid=1, block=16)


def test_a_misspelled_kernel_names_the_kernel_meant(runtime_bundle: Bundle) -> None:
    mod = kernelpack.load(runtime_bundle)
    with pytest.raises(AttributeError, match=r"has no kernel 'addd' \(did you mean 'add'\?\); kernels: add, "):
        mod.addd  # noqa: B018
    with pytest.raises(KeyError, match=r"has no kernel 'scael' \(did you mean 'scale'\?\)"):
        mod["scael"]
    with pytest.raises(AttributeError, match=r"has no kernel 'zzzz'; kernels:"):  # nothing near: no guess
        mod.zzzz  # noqa: B018


@pytest.mark.parametrize("toml,match", [
    (LIB + '[[cuda]]\nsource = "k.cu"\nkernels = ["neg"]\nsigatures = {}\n',
     r"kernelpack.toml:7: \[\[cuda\]\] #1: unknown key\(s\) \['sigatures'\] \(did you mean 'signatures'\?\)"),
    ('[libary]\nname = "p"\n', r"unknown table\(s\) \['libary'\] \(did you mean 'library'\?\)"),
    ('[library]\nname = "p"\n\narchs = ["sm90"]\n', r"kernelpack.toml:4: \[library\] key 'archs': .*did you mean "
                                                    r"'sm_90'\?"),
    ('[library]\nname = "p"\nverison = "1.0"\n', r"kernelpack.toml:3: \[library\]: unknown key\(s\) \['verison'\] "
                                                 r"\(did you mean 'version'\?\)"),
    (LIB + '[[cuda]]\nsource = "k.cu"\nkernels = ["neg"]\n\n[[cuda]]\nkernels = ["neg"]\n# a comment\n'
     'source = "gone.cu"\n', r"kernelpack.toml:11: \[\[cuda\]\] #2: key 'source': no such file: .*gone.cu"),
    (LIB + '[[triton]]\nkernel = "missing.py:k"\nsignature = { x = "*fp32" }\n',
     r"kernelpack.toml:5: \[\[triton\]\] #1: key 'kernel': no such file: .*missing.py"),
    (LIB + '[[cubin]]\nfiles = ["prebuilt/*.cubin"]\nkernels = { k = "float* y" }\n',
     r"kernelpack.toml:5: \[\[cubin\]\] #1: key 'files': 'prebuilt/\*.cubin' matches no file"),
])
def test_project_mistakes_name_the_line_and_the_spelling_meant(tmp_path: Path, toml: str, match: str) -> None:
    (tmp_path / "kernelpack.toml").write_text(toml)
    (tmp_path / "k.cu").write_text(KERNEL)
    with pytest.raises(ProjectError, match=match):
        load_project(tmp_path)


def test_a_missing_source_stops_the_build_before_any_step(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "kernelpack.toml").write_text(LIB + '[[cuda]]\nsource = "k.cu"\nkernels = ["neg"]\n\n[[cuda]]\n'
                                              'source = "gone.cu"\nkernels = ["neg"]\n')
    (tmp_path / "k.cu").write_text(KERNEL)
    assert cli.main(["build", str(tmp_path)]) != 0
    out, err = capsys.readouterr()
    assert "compiled" not in out + err and "failed" not in out + err  # no step ran
    assert err.startswith("kernelpack: error: kernelpack.toml:9: [[cuda]] #2: key 'source': no such file")


@needs_cuda_compiler
def test_a_failed_step_is_printed_once(tmp_path: Path, fresh_cache: object,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "kernelpack.toml").write_text(LIB + '[[cuda]]\nsource = "k.cu"\nkernels = ["neg"]\n')
    (tmp_path / "k.cu").write_text("this is not CUDA C++\n")
    assert cli.main(["build", "-j", "1", str(tmp_path)]) != 0
    out, err = capsys.readouterr()
    both = out + err
    assert both.count("failed to compile k.cu") == 1, both
    assert "1 of 1 build step(s) failed" in err and "cuda:k.cu" in both


@needs_nvrtc
def test_a_misspelled_cuda_kernel_names_the_kernel_meant(tmp_path: Path, fresh_cache: object) -> None:
    from kernelpack.core.errors import CompileError

    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    with pytest.raises(CompileError, match=r"k.cu: kernel 'nge': no __global__ function 'nge' in the source \(did "
                                           r"you mean 'neg'\?\)"):
        kernelpack.cuda.compile(src, ["nge"], arch=["sm_90a"], compiler="nvrtc")


# what the signature parser reads of a @triton.jit function: its parameter names and which are constexprs
_ONE_PARAM = types.SimpleNamespace(arg_names=["x"], params=[types.SimpleNamespace(name="x", is_constexpr=False)])


@pytest.mark.parametrize("given,canonical", [("*f16", "*fp16"), ("*kf32", "*kfp32"), ("f32", "fp32"),
                                             ("*float16", "*fp16"), ("*bfloat16", "*bf16"), ("i32", "i32"),
                                             ("tensordesc<f16[64, 32]>", "tensordesc<fp16[64, 32]>")])
def test_a_triton_signature_takes_kernelpacks_and_torchs_type_names(given: str, canonical: str) -> None:
    pytest.importorskip("triton")
    from kernelpack.frontends.triton.compile import _parse_signature

    (arg,) = _parse_signature("k", _ONE_PARAM, {"x": given}, {})
    assert arg.ty == canonical


@pytest.mark.parametrize("given,meant", [("*fp61", "*fp64"), ("*fb16", "*fp16"), ("*kfp61", "*kfp64"),
                                         ("i23", "i32")])
def test_a_misspelled_triton_type_names_the_type_meant(given: str, meant: str) -> None:
    pytest.importorskip("triton")
    from kernelpack.core.errors import CompileError
    from kernelpack.frontends.triton.compile import _parse_signature

    with pytest.raises(CompileError, match=rf"parameter 0 'x': unsupported Triton type '\{given}'.*did you mean "
                                           rf"'\{meant}'\?" if given.startswith("*") else
                       rf"unsupported Triton type '{given}'.*did you mean '{meant}'\?"):
        _parse_signature("k", _ONE_PARAM, {"x": given}, {})


def test_a_dtype_in_another_librarys_spelling_names_kernelpacks() -> None:
    from kernelpack.core.abi import DType
    from kernelpack.core.errors import AbiError

    with pytest.raises(AbiError, match="unknown dtype 'float16' .*; kernelpack spells it 'f16'"):
        DType.parse("float16")
    with pytest.raises(AbiError, match="unknown dtype 'bf61' .*; did you mean 'bf16'"):
        DType.parse("bf61")
