"""kernelpack build from a project file: parsing, incremental rebuilds (digest, fingerprints, library stamp), parallel
workers, Python project modules, errors, the summary's warnings, and the CLI forms. GPU-less."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from cli_support import kp
from kernelpack.core.errors import KernelpackError
from kernelpack.project import BuildFailed, Cuda, ProjectError, build, load_project
from kernelpack.project.report import occupancy, row
from toolchain_support import needs_cuda_compiler

KERNELS = """
#include "common.cuh"
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i] + BIAS;
}
template <class T> __global__ void fill(T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = T(1);
}
"""
OTHER = """extern "C" __global__ void neg(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = -y[i]; }"""
TOML = """
[library]
name = "proj"
archs = ["sm_80", "sm_90a"]

[[cuda]]
source = "k.cu"
kernels = ["axpy", "fill<float>", "fill<int>"]

[[cuda]]
source = "other.cu"
kernels = ["neg"]
archs = ["sm_90a"]
"""


def write_project(where: Path) -> Path:
    """The two-source CUDA project these tests build (also built by tests/test_build_ray.py)."""
    (where / "k.cu").write_text(KERNELS)
    (where / "common.cuh").write_text("#define BIAS 0.0f\n")
    (where / "other.cu").write_text(OTHER)
    (where / "kernelpack.toml").write_text(TOML)
    return where


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return write_project(tmp_path)


@needs_cuda_compiler
def test_build_then_noop_then_only_the_changed_source(proj: Path, fresh_cache) -> None:
    first = build(proj, jobs=1)
    assert first.jobs == {"cuda:k.cu": "compiled", "cuda:other.cu": "compiled"} and first.linked
    out = proj / "build"
    for f in ("lib/libproj.so", "lib/libproj.a", "include/proj.h", "include/proj.hpp", "proj.kpack",
              "lib/cmake/proj/projConfig.cmake", "lib/pkgconfig/proj.pc"):
        assert (out / f).is_file(), f
    labels = sorted(r.kernel for r in first.rows)
    assert labels == ["axpy", "fill[float]", "fill[int]", "neg"]
    neg = next(r for r in first.rows if r.kernel == "neg")
    assert neg.archs == ["sm_90a"] and "not built for sm_80" in neg.warnings

    so_mtime = (out / "lib/libproj.so").stat().st_mtime_ns
    again = build(proj, jobs=1)
    assert again.up_to_date and not again.linked and len(again.rows) == 4
    assert (out / "lib/libproj.so").stat().st_mtime_ns == so_mtime

    (proj / "common.cuh").write_text("#define BIAS 1.0f\n")  # a header: only k.cu rebuilds, and for real
    third = build(proj, jobs=1)
    assert third.jobs == {"cuda:k.cu": "compiled", "cuda:other.cu": "reused"} and third.linked

    (proj / "other.cu").write_text(OTHER + "\n// a comment\n")  # recompiles (source text is the key)...
    fourth = build(proj, jobs=1)
    assert fourth.jobs["cuda:k.cu"] == "reused" and fourth.jobs["cuda:other.cu"] == "compiled"

    (proj / "other.cu").write_text(OTHER)  # ...and going back is a compile-cache hit
    assert build(proj, jobs=1).jobs["cuda:other.cu"] == "cached"


def _tree(d: Path) -> dict[str, bytes]:
    """Every output file under ``d`` (the build state aside) by relative path."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and ".kernelpack-build" not in p.parts}


@needs_cuda_compiler
def test_an_incremental_build_writes_the_bytes_a_clean_build_writes(proj: Path, fresh_cache, tmp_path_factory) -> None:
    build(proj, jobs=1)
    (proj / "other.cu").write_text(OTHER.replace("-y[i]", "-2.0f * y[i]"))  # one kernel changes
    inc = build(proj, jobs=1)
    assert inc.jobs == {"cuda:k.cu": "reused", "cuda:other.cu": "compiled"} and inc.linked
    clean = build(proj, jobs=1, out=tmp_path_factory.mktemp("clean"), force=True)
    assert clean.linked
    got, want = _tree(proj / "build"), _tree(Path(clean.out))
    assert sorted(got) == sorted(want)
    assert [f for f in want if got[f] != want[f]] == [], "outputs differ from a clean build's"


SMEM = """extern "C" __global__ void neg(float* y, int n) {
    __shared__ float s[64];
    int i = threadIdx.x;
    s[i % 64] = y[i];
    __syncthreads();
    if (i < n) y[i] = -s[(i + 1) % 64];
}"""


@needs_cuda_compiler
def test_the_generated_text_memo_writes_the_bytes_of_a_clean_build(proj: Path, fresh_cache, tmp_path_factory,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """One-kernel changes relink through the memo of the library's generated texts (clib/memo.py): a changed
    kernel body reuses the texts (no generator run), a changed static shared memory size rewrites only the data
    tables, a new kernel regenerates everything; after each, every output is the bytes a clean build with an empty
    compile cache writes, and the summary's rows (unchanged kernels' taken from the state) are a clean build's."""
    from conftest import cache_in_force
    from kernelpack.clib import generate as gen

    runs = []

    class Counted(gen._Gen):  # the real generator, counted
        def __init__(self, *args, **kwargs) -> None:
            runs.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(gen, "_Gen", Counted)
    build(proj, jobs=1)
    assert runs == ["proj"]
    changes = [("other.cu", OTHER.replace("-y[i]", "-3.0f * y[i]"), 0),  # the code of one kernel: texts reused
               ("other.cu", SMEM, 0),  # its static shared memory: data tables only (NAME_data.s)
               ("kernelpack.toml", TOML.replace('"fill<int>"]', '"fill<int>", "fill<double>"]'), 1)]  # a kernel more
    for f, text, generated in changes:
        (proj / f).write_text(text)
        runs.clear()
        inc = build(proj, jobs=1)
        assert inc.linked and len(runs) == generated, (f, runs)
        with cache_in_force(tmp_path_factory.mktemp("empty-cache")):
            clean = build(proj, jobs=1, out=tmp_path_factory.mktemp("clean"), force=True)
        got, want = _tree(proj / "build"), _tree(Path(clean.out))
        assert sorted(got) == sorted(want)
        assert [p for p in want if got[p] != want[p]] == [], f"outputs differ from a clean build's after changing {f}"
        # the summary: rows of unchanged kernels come from the previous state (report.row_key), the same rows
        assert [{**r.to_json(), "status": ""} for r in inc.rows] == [{**r.to_json(), "status": ""} for r in clean.rows]


@needs_cuda_compiler
def test_relinks_when_an_output_is_deleted_and_force_rebuilds_everything(proj: Path, fresh_cache) -> None:
    build(proj, jobs=1)
    (proj / "build/lib/libproj.so").unlink()
    r = build(proj, jobs=1)
    assert not r.up_to_date and r.linked and set(r.jobs.values()) == {"reused"}
    assert (proj / "build/lib/libproj.so").is_file()
    forced = build(proj, jobs=1, force=True)
    assert set(forced.jobs.values()) == {"cached"} and forced.linked


@needs_cuda_compiler
def test_parallel_workers_give_the_same_bundle(proj: Path, fresh_cache, tmp_path_factory) -> None:
    serial = build(proj, jobs=1, out=tmp_path_factory.mktemp("serial"))
    parallel = build(proj, jobs=2, out=tmp_path_factory.mktemp("parallel"), force=True)
    assert Path(serial.outputs["bundle"]).read_bytes() == Path(parallel.outputs["bundle"]).read_bytes()


@needs_cuda_compiler
def test_failed_step_names_the_job_and_keeps_the_good_ones(proj: Path, fresh_cache) -> None:
    (proj / "other.cu").write_text("extern \"C\" __global__ void neg(float* y) { y[0] = undefined_name; }")
    with pytest.raises(BuildFailed) as e:
        build(proj, jobs=2)
    assert "cuda:other.cu" in e.value.message and "1 of 2" in e.value.message and e.value.log
    (proj / "other.cu").write_text(OTHER)
    r = build(proj, jobs=1)
    assert r.jobs == {"cuda:k.cu": "reused", "cuda:other.cu": "compiled"}


@needs_cuda_compiler
def test_python_project_module(tmp_path: Path, fresh_cache) -> None:
    (tmp_path / "k.cu").write_text(OTHER)
    (tmp_path / "kernelpack_project.py").write_text(textwrap.dedent("""
        from kernelpack.project import Cuda
        LIBRARY = {"name": "pyproj", "archs": ["sm_90a"], "out": "out"}
        KERNELS = [Cuda("k.cu", ["neg"], options=["-O3"])]
    """))
    r = build(tmp_path, jobs=1)
    assert r.jobs == {"cuda:k.cu": "compiled"} and (tmp_path / "out/lib/libpypro.so").exists() is False
    assert (tmp_path / "out/lib/libpyproj.so").is_file()
    assert build(tmp_path, jobs=1).up_to_date
    text = (tmp_path / "kernelpack_project.py").read_text().replace('"-O3"', '"-O2"')
    (tmp_path / "kernelpack_project.py").write_text(text)
    assert build(tmp_path, jobs=1).jobs == {"cuda:k.cu": "compiled"}


@needs_cuda_compiler
def test_triton_specializations_are_separate_steps(tmp_path: Path, fresh_cache) -> None:
    pytest.importorskip("triton")
    src = Path(__file__).parent / "triton_kernels.py"
    (tmp_path / "tk.py").write_text(src.read_text())
    (tmp_path / "kernelpack.toml").write_text(textwrap.dedent("""
        [library]
        name = "tr"
        archs = ["sm_90a"]
        outputs = ["bundle"]
        [[triton]]
        kernel = "tk.py:add_kernel"
        name = "add"
        signature = { x_ptr = "*fp32", y_ptr = "*fp32", out_ptr = "*fp32", n = "i32" }
        constexprs = { BLOCK = 1024 }
        specializations = [{}, { divisibility = "all" }]
    """))
    r = build(tmp_path, jobs=2)
    assert sorted(r.jobs) == ["triton:add[div]", "triton:add[nodiv]"]
    assert sorted(x.kernel for x in r.rows) == ["add[div]", "add[nodiv]"]  # the names a joint compile gives
    assert not (tmp_path / "build/lib").exists()


def test_project_file_errors_name_the_problem(tmp_path: Path) -> None:
    f = tmp_path / "kernelpack.toml"
    f.write_text('[library]\nname = "x"\n[[cuda]]\nsource = "a.cu"\nkernel = ["k"]\n')
    with pytest.raises(ProjectError, match=r"\[\[cuda\]\] #1: unknown key\(s\) \['kernel'\]"):
        load_project(tmp_path)
    f.write_text('[library]\nname = "not an identifier"\n')
    with pytest.raises(ProjectError, match=r"\[library\] name must be an identifier .*got 'not an identifier'"):
        load_project(f)
    f.write_text('[libary]\nname = "x"\n')
    with pytest.raises(ProjectError, match=r"unknown table\(s\) \['libary'\]"):
        load_project(f)
    f.write_text("[library\n")
    with pytest.raises(ProjectError, match="invalid TOML"):
        load_project(f)
    with pytest.raises(ProjectError, match="no kernelpack.toml"):
        load_project(tmp_path / "..")
    f.write_text('[library]\nname = "x"\n[[cuda]]\nsource = "a.cu"\nkernels = ["k"]\n')
    (tmp_path / "a.cu").write_text("")
    with pytest.raises(KernelpackError, match="no archs"):
        build(tmp_path)


def test_python_entries_are_plain_dataclasses() -> None:
    c = Cuda("k.cu", ["a"], archs=["sm_90a"], options=["-O3"])
    assert (c.source, c.kernels, c.archs, c.frontend) == ("k.cu", ["a"], ["sm_90a"], "cuda")


def test_occupancy_and_warnings() -> None:
    full = occupancy(9, 0, 256, 32, 0)
    assert full is not None and full.fraction == 1.0
    regs = occupancy(9, 0, 256, 168, 0)
    assert regs is not None and regs.limiter == "registers" and regs.fraction == 0.125  # 1 block of 8 warps
    smem = occupancy(8, 0, 128, 32, 100 * 1024)
    assert smem is not None and smem.limiter == "smem" and smem.fraction == 0.0625
    assert occupancy(5, 2, 128, 32, 0) is None  # an arch the launch model's table does not hold


@needs_cuda_compiler
def test_summary_warns_about_spills_registers_and_smem(tmp_path: Path, fresh_cache) -> None:
    from kernelpack.core.launchspec import LaunchSpec
    from kernelpack.frontends.cuda import compile as cuda

    src = """
    extern "C" __global__ void __launch_bounds__(256) heavy(float* y, int n) {
        extern __shared__ float tile[];  // 120 KiB dynamic: too much for sm_86
        float acc[64];
        for (int i = 0; i < 64; i++) acc[i] = y[(threadIdx.x * 7 + i * 131) % n];
        for (int r = 0; r < 8; r++) for (int i = 0; i < 64; i++) acc[(i * 17 + r) % 64] += acc[i] * y[i];
        tile[threadIdx.x] = acc[threadIdx.x % 64];
        __syncthreads();
        y[threadIdx.x] = tile[(threadIdx.x + 1) % 256] + acc[y[0] > 0 ? 3 : 5];
    }"""
    bundle = cuda.compile(src, ["heavy"], arch=["sm_80"], maxrregcount=32, launch=LaunchSpec(dynamic_smem=120 << 10))
    r = row(bundle.artifacts[0], ["sm_80", "sm_90a"])
    text = "\n".join(r.warnings)
    assert "local memory" in text and "will not launch on sm_86, sm_88, sm_89" in text
    assert "not built for sm_90a" in text
    assert "occupancy" in text and "smem" in text


@needs_cuda_compiler
def test_cli_project_form_json_and_summary_and_the_bundle_form(proj: Path, tmp_path_factory) -> None:
    cache = tmp_path_factory.mktemp("clicache")
    r = kp("build", "-j", "2", cwd=proj, cache=cache)
    assert r.returncode == 0, r.stderr
    assert "compiled" in r.stdout and "fill[float]" in r.stdout and "not built for sm_80" in r.stdout
    r = kp("build", "--json", cwd=proj, cache=cache)
    report = json.loads(r.stdout)
    assert report["up_to_date"] and len(report["kernels"]) == 4
    lib = tmp_path_factory.mktemp("direct")
    r = kp("build", "direct", str(proj / "build/proj.kpack"), "-o", str(lib), cwd=proj, cache=cache)
    assert r.returncode == 0, r.stderr
    assert (lib / "lib/libdirect.so").is_file()
    (proj / "other.cu").write_text("broken")
    r = kp("build", str(proj / "kernelpack.toml"), cwd=tmp_path_factory.mktemp("elsewhere"), cache=cache)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("kernelpack: error: 1 of 2 build step(s) failed:") and "cuda:other.cu" in r.stderr
