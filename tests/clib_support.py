"""Shared pieces of the C library generator tests: test cubins (compiled once per session), hand-written ABIs, and
helpers to build C/C++ programs against generated libraries and run them on the fake driver (fake_cuda.py)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fake_cuda import FakeCuda, Run, run, session_fake
from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.core.abi import Abi, DType, Param, Pointer, Scalar, Struct, TensorList, TensorSpec
from kernelpack.core.binary import Binary
from kernelpack.core.launchspec import ArchLaunch, LaunchSpec
from kernelpack.core.tma import TENSOR_MAP, TensorDescSpec
from toolchain_support import CC, CXX, PTXAS, require_nvcc

HERE = Path(__file__).parent
KERNELS_CU = HERE / "clib_kernels.cu"
ARCHS = ("80", "90a", "100a")


@dataclass(frozen=True)
class TestKernels:
    cubins: dict[str, bytes]  # "80" -> cubin with every test kernel
    ptx80: bytes  # compute_80 PTX of the same file
    ptx: dict[str, bytes]  # "90a" -> compute_90a PTX of the same file (every arch of cubins)


def compile_kernels(out: Path) -> TestKernels:
    nvcc = require_nvcc()
    cubins, ptxs = {}, {}
    for a in (*ARCHS, "100f"):
        ptx = out / f"k{a}.ptx"
        subprocess.run([nvcc, "-ptx", f"-arch=compute_{a}", str(KERNELS_CU), "-o", str(ptx)], check=True)
        text = ptx.read_text()
        # fixed_block gets a required block size (nvcc has no attribute for it; the PTX directive is .reqntid)
        text = text.replace(".param .u64 fixed_block_param_0\n)\n", ".param .u64 fixed_block_param_0\n)\n"
                            ".reqntid 128, 1, 1\n")
        ptx.write_text(text)
        cubin = out / f"k{a}.cubin"
        subprocess.run([str(PTXAS), f"-arch=sm_{a}", str(ptx), "-o", str(cubin)], check=True)
        cubins[a] = cubin.read_bytes()
        ptxs[a] = ptx.read_bytes()
    return TestKernels(cubins, ptxs["80"], ptxs)


def bins(k: TestKernels, *archs: str, ptx: bool = False) -> list[Binary]:
    """SASS for "80", "90a"...; PTX for "compute_80", "compute_100f"... (and compute_80 PTX last with ``ptx``)."""
    out = [Binary(a, k.ptx[a.removeprefix("compute_")], "ptx") if a.startswith("compute_") else
           Binary(f"sm_{a}", k.cubins[a]) for a in archs]
    if ptx:
        out.append(Binary("sm_80", k.ptx80, "ptx"))
    return out


def ptx_isa(ptx: bytes, version: str) -> bytes:
    """The PTX with its ``.version`` line set to ``version`` (a PTX ISA a CUDA 13.0 driver may not know)."""
    return re.sub(rb"^\.version \d+\.\d+", b".version " + version.encode(), ptx, count=1, flags=re.M)


def add_abi(d: DType, div: int = 1) -> Abi:
    return Abi((Param("x", Pointer(d, const=True), div), Param("y", Pointer(d, const=True), div),
                Param("out", Pointer(d), div), Param("n", Scalar(DType.i32), 4 if div > 1 else 1)))


# grid formulas exercising every operation (tests compare with kernelpack.core.launchspec.evaluate_grid)
N = ("arg", "n", None)
GADD_GRID = (("ceil_div", N, 256), ("max", ("min", ("div", ("sub", 100, N), -7), 6), 1), ("add", ("mul", N, 0), 1))
GSUM_GRID = (("arg", "t", "shape0"), ("sub", ("arg", "t", "shape1"), 4), 1)
SCRATCH = LaunchSpec(global_scratch=256, global_scratch_align=128, profile_scratch=100, profile_scratch_align=512)
TMA_SPEC = TensorDescSpec("m", "fp16", (64, 32), "tma", ("m", "m_shape0", "m_shape1", "m_stride0", "m_stride1"),
                          elem_size=2, elem_type=6, swizzle=2)
DEC_SPEC = TensorDescSpec("p", "fp32", (16, 16), "decomposed",
                          ("p", "p_s0", "p_s1", "p_t0", "p_t1", "p_f0", "p_f1", "p_u0", "p_u1", "p_v0", "p_v1"))


def _i(name: str, d: str) -> Param:
    return Param(name, Scalar(DType(d)))


TMA_ABI = Abi((Param("m", TENSOR_MAP), _i("m_shape0", "i32"), _i("m_shape1", "i32"), _i("m_stride0", "i64"),
               _i("m_stride1", "i64"), _i("k", "i32"), Param("out", Pointer(DType.f32))))
DEC_ABI = Abi((Param("p", Pointer(DType.f32, True)), *(_i(f"p_{x}", "i64") for x in ("s0", "s1", "t0", "t1")),
               _i("p_f0", "bool"), _i("p_f1", "bool"), _i("p_u0", "i32"), _i("p_u1", "i32"), _i("p_v0", "i64"),
               _i("p_v1", "i64"), Param("out", Pointer(DType.f32))))

PACK_DTYPES = ["i8", "i16", "i32", "i64", "f32", "f64", "bool", "f16", "u8", "u64"]


def list_abi(d: DType) -> Abi:
    """glist's: two tensor lists (cuTile's list-of-arrays parameters) of rank-1 tensors of ``d`` -- extents a multiple
    of 4, unit stride, 16-byte aligned data, int32 indices -- and a float."""
    lst = TensorList(TensorSpec(d, (None,), (1,), DType.i32, DType.i32, 16), (4,), (1,), (0,))
    count = Scalar(DType.i32)
    return Abi((Param("xs", lst), Param("xs_count", count, role="list_count"), Param("ys", lst),
                Param("ys_count", count, role="list_count"), Param("alpha", Scalar(DType.f32))))
TSUM_SPEC = TensorSpec(DType.f32, (None, None), (None, 1))


def demo_artifacts(k: TestKernels) -> list[KernelArtifact]:
    f32 = DType.f32
    one_ptr = Abi((Param("out", Pointer(f32)),))
    return [
        KernelArtifact("add", "add_f32", add_abi(f32), bins(k, "80", "90a", ptx=True), variant="f32"),
        KernelArtifact("add", "add_f32_vec4", add_abi(f32, 16), bins(k, "80", "90a"), variant="f32_vec4"),
        KernelArtifact("add", "add_f64", add_abi(DType.f64), bins(k, "80", "90a"), variant="f64"),
        KernelArtifact("pack", "pack", Abi(tuple(Param(n, Scalar(d)) for n, d in zip("abcdefghij", PACK_DTYPES,
                                                                                      strict=True))
                                           + (Param("out", Pointer(f32)),)), bins(k, *ARCHS)),
        KernelArtifact("tsum", "tsum", Abi((Param("t", Struct.tensor_descriptor("Tensor2f", TSUM_SPEC)),
                                            Param("out", Pointer(f32)))), bins(k, "80", "90a")),
        KernelArtifact("big_smem", "big_smem", Abi((Param("x", Pointer(f32, True)), Param("out", Pointer(f32)),
                                                    Param("n", Scalar("i32")))), bins(k, "80", "90a")),
        KernelArtifact("cluster2", "cluster2", one_ptr, bins(k, "90a")),
        KernelArtifact("fixed_block", "fixed_block", one_ptr, bins(k, "80", "90a")),
        KernelArtifact("spec_cluster", "cluster2", one_ptr, bins(k, "80"), launch=LaunchSpec(cluster=(4, 1, 1))),
        KernelArtifact("hidden", "hidden", Abi((Param("out", Pointer(f32)), Param("n", Scalar("i32")),
                                                Param("gs", Pointer(), role="global_scratch"),
                                                Param("ps", Pointer(), role="profile_scratch"))), bins(k, "80", "90a")),
        KernelArtifact("noargs", "noargs", Abi(()), bins(k, "80", "90a"), launch=LaunchSpec(block=(32, 1, 1))),
        KernelArtifact("gadd", "add_f32", add_abi(f32), bins(k, "80", "90a"), launch=LaunchSpec(grid=GADD_GRID)),
        KernelArtifact("gsum", "tsum", Abi((Param("t", Struct.tensor_descriptor("Tensor2f", TSUM_SPEC)),
                                            Param("out", Pointer(f32)))), bins(k, "80", "90a"),
                       launch=LaunchSpec(grid=GSUM_GRID)),
        KernelArtifact("scratch", "hidden", Abi((Param("out", Pointer(f32)), Param("n", Scalar("i32")),
                                                 Param("gs", Pointer(), role="global_scratch"),
                                                 Param("ps", Pointer(), role="profile_scratch"))), bins(k, "80", "90a"),
                       launch=SCRATCH),
        KernelArtifact("tma2d", "tma2d", TMA_ABI, bins(k, "80", "90a"), launch=LaunchSpec(tensor_descs=(TMA_SPEC,))),
        KernelArtifact("desc_dec", "desc_dec", DEC_ABI, bins(k, "80", "90a"),
                       launch=LaunchSpec(tensor_descs=(DEC_SPEC,))),
        # the TMA kernel taking its CUtensorMap by pointer (no descriptor spec): a typed entry and a family
        KernelArtifact("tmap", "tma2d", TMA_ABI, bins(k, "80", "90a"), variant="f32"),
        KernelArtifact("tmap", "tma2d", Abi((*TMA_ABI.params[:-1], Param("out", Pointer(DType.f64)))),
                       bins(k, "80", "90a"), variant="f64"),
        # per-arch launch facts and device-derived values (kernelpack.launch.facts, kernelpack.launch.device)
        KernelArtifact("arch_block", "noargs", Abi(()), bins(k, "80", "90a"), launch=LaunchSpec(block=(64, 1, 1)),
                       per_arch={"sm_90a": ArchLaunch(LaunchSpec(block=(128, 1, 1)))}),
        KernelArtifact("needs_108", "add_f32", add_abi(f32), bins(k, "80", "90a"), requires={"sm_count": 108}),
        # which binary a device gets (kernelpack.launch.binaries): family SASS on a newer minor, PTX on a newer GPU,
        # PTX of an ISA newer than the driver knows
        KernelArtifact("on_family", "noargs", Abi(()), bins(k, "90a", "100f"), launch=LaunchSpec(block=(32, 1, 1))),
        KernelArtifact("on_ptx", "noargs", Abi(()), [*bins(k, "90a"), Binary("compute_80", k.ptx80, "ptx")],
                       launch=LaunchSpec(block=(32, 1, 1))),
        KernelArtifact("new_ptx", "noargs", Abi(()), [Binary("compute_80", ptx_isa(k.ptx80, "9.5"), "ptx")],
                       launch=LaunchSpec(block=(32, 1, 1))),
        # the binary rule's table (tests/test_binary_rule.py): every kind of target in one kernel, PTX only
        KernelArtifact("ladder", "noargs", Abi(()), bins(k, "80", "90a", "100f", "100a", "compute_80", "compute_100f"),
                       launch=LaunchSpec(block=(32, 1, 1))),
        KernelArtifact("ptx_only", "noargs", Abi(()), bins(k, "compute_80", "compute_90a", "compute_100f"),
                       launch=LaunchSpec(block=(32, 1, 1))),
        KernelArtifact("mac", "add_f32", Abi((*add_abi(f32).params[:3], Param("n", Scalar(DType.i32),
                                                                               role="max_active_clusters:2"))),
                       bins(k, "90a"), launch=LaunchSpec(cluster=(2, 1, 1))),
        # tensor lists (kernelpack.core.abi.TensorList): the launcher copies their descriptors to the device
        KernelArtifact("glist", "glist", list_abi(f32), bins(k, "80", "90a"), variant="f32"),
        KernelArtifact("glist", "glist", list_abi(DType.f64), bins(k, "80", "90a"), variant="f64"),
    ]


def compile_program(src: Path, exe: Path, include: Path, libs: list[str], *, cxx: bool = False,
                    flags: tuple[str, ...] = ()) -> Path:
    cmd = ([CXX, "-std=c++17"] if cxx else [CC, "-std=c99"]) + ["-Wall", "-Wextra", "-Werror", "-g", *flags,
                                                               f"-I{include}", str(src), "-o", str(exe), *libs]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise AssertionError(f"compile failed: {' '.join(cmd)}\n{proc.stderr}")
    return exe


@dataclass(frozen=True)
class Env:
    root: Path
    kernels: TestKernels
    fake: FakeCuda
    demo: object  # BuildResult of the demo library
    harness: Path
    artifacts: list[KernelArtifact]

    def run(self, *args: str, exe: Path | None = None, **env: str) -> Run:
        return run(exe or self.harness, self.root, self.fake, *args, **env)


_ENV: list[Env] = []


def session_env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    """Test cubins, the fake driver, the demo library and the harness: built once per session."""
    if not _ENV:
        _ENV.append(_make_env(tmp_path_factory))
    return _ENV[0]


def _make_env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    from kernelpack.clib import Library

    root = tmp_path_factory.mktemp("clib")
    kernels = compile_kernels(root)
    fake = session_fake(tmp_path_factory)
    arts = demo_artifacts(kernels)
    demo = Library("demo", *arts, cflags=["-Werror"]).build(root / "demo", keep_sources=True)
    harness = compile_program(HERE / "clib_harness.c", root / "harness", demo.include_dir,
                              [f"-L{demo.lib_dir}", "-ldemo", f"-Wl,-rpath,{demo.lib_dir}", "-lpthread"])
    return Env(root, kernels, fake, demo, harness, arts)


def results(r: Run) -> dict[str, tuple[str, str]]:
    """tag -> (status, message) from the harness's output."""
    out = {}
    for line in r.stdout.splitlines():
        tag, _, rest = line.partition(" status=")
        if rest:
            status, _, msg = rest.partition(" msg=")
            out[tag] = (status, msg)
    return out


_RELIABILITY: list[Path] = []


def reliability_harness(env: Env) -> Path:
    """tests/reliability_harness.c against the demo library, compiled once per session (the bad-input matrix and
    tests/test_same_answer.py run its rows)."""
    if not _RELIABILITY:
        demo: Any = env.demo
        _RELIABILITY.append(compile_program(
            HERE / "reliability_harness.c", env.root / "reliability_harness", demo.include_dir,
            [f"-L{demo.lib_dir}", "-ldemo", f"-Wl,-rpath,{demo.lib_dir}", "-lpthread"],
            flags=("-D_POSIX_C_SOURCE=200809L",)))
    return _RELIABILITY[0]
