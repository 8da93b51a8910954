"""kernelpack capture --native without a GPU: the driver recorder (kernelpack/capture/native/recorder.c) stands in for
libcuda.so.1 in front of kernelpack's dry-run driver (the test double for the real one; the same recorder on the real
driver, with nvcc-built CUDA C++ and FlashInfer's CUDA modules, is tests/test_capture_native_gpu.py).

The native code: tests/native_host.c, host code that loads a cubin and launches scale<float> (cuLaunchKernel) and
pair_add(Pair, ...) (cuLaunchKernelEx, 64 bytes of dynamic shared memory) with the grid it computes.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpack.capture.native import driver, kernels, log
from kernelpack.core.errors import KernelpackError
from toolchain_support import CC, NVCC, needs_nvcc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCALE, PAIR = "_Z5scaleIfEvPKT_PS0_fi", "_Z8pair_add4PairPKfS1_Pfi"
KERNELS = """
struct Pair { float a, b; };
template <class T> __global__ void scale(const T* x, T* out, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = T(s * float(x[i]));
}
template __global__ void scale<float>(const float*, float*, float, int);
__global__ void pair_add(Pair p, const float* x, const float* y, float* out, int n) {
    extern __shared__ float stage[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    stage[threadIdx.x % 16] = 0.0f;
    if (i < n) out[i] = p.a * x[i] + p.b * y[i] + out[i];
}
"""
SCRIPT = """
import ctypes, sys
from pathlib import Path
here = Path(__file__).resolve().parent
lib = ctypes.CDLL(str(here / "libnative_host.so"))
lib.native_run.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
for n in (1000, 4096):
    r = lib.native_run(str(here / "k.cubin").encode(), n, 0x7f0000001000, 0x7f0000101000, 0x7f0000201000)
    if r:
        raise SystemExit(f"native_run: {r}")
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if NVCC is None:
        pytest.skip("nvcc not installed")
    d = tmp_path_factory.mktemp("native")
    (d / "k.cu").write_text(KERNELS)
    subprocess.run([str(NVCC), "-cubin", "-arch=sm_90a", str(d / "k.cu"), "-o", str(d / "k.cubin")], check=True)
    subprocess.run([CC, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(d / "libnative_host.so"),
                    str(HERE / "native_host.c"), "-ldl"], check=True)
    (d / "script.py").write_text(SCRIPT)
    return d


def _env(tmp: Path) -> dict[str, str]:
    from kernelpack.runtime import dryrun

    return dict(os.environ, KERNELPACK_DRYRUN_DEVICES="sm_90a", KERNELPACK_RECORD_DRIVER=str(dryrun.library_path()),
                KERNELPACK_CACHE_DIR=str(tmp / "cache"),
                PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))


def _capture(work: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelpack.cli", "capture", *extra, "--device", "h100", "-o",
                           str(out), "--", "python", "script.py"], cwd=work, env=_env(out.parent),
                          capture_output=True, text=True, timeout=300)


@needs_nvcc
def test_native_launches_become_cubin_entries_that_build(work: Path, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    got = _capture(work, proj, "--native-from", "memory")
    assert got.returncode == 0, got.stdout + got.stderr
    toml = (proj / "kernelpack.toml").read_text()
    assert toml.count("[[cubin]]") == 2 and SCALE in toml and PAIR in toml
    assert "grid (8, 1, 1) block (128, 1, 1) smem 0; grid (32, 1, 1) block (128, 1, 1) smem 0" in toml
    assert "grid (8, 1, 1) block (128, 1, 1) smem 64" in toml
    state = json.loads((proj / "capture.json").read_text())
    fams = {f["name"]: f for f in state["families"]}
    assert set(fams) == {"scale_float", "pair_add"}
    assert fams["pair_add"]["specs"][0]["launches"] == 2
    cubins = list((proj / "native").glob("*.sm_90a.cubin"))
    assert len(cubins) == 1 and cubins[0].read_bytes() == (work / "k.cubin").read_bytes()
    built = subprocess.run([sys.executable, "-m", "kernelpack.cli", "build", str(proj)], env=_env(tmp_path),
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    header = (proj / "build" / "include" / "proj.h").read_text()
    assert "proj_pair_add(const kp_launch* kp_cfg, const proj_Pair* p0, const float* p1" in header
    assert "proj_scale_float(const kp_launch* kp_cfg, const float* p0, float* p1, float p2, int32_t p3)" in header
    # capturing again merges: nothing new, names kept
    again = _capture(work, proj, "--native-from", "memory")
    assert again.returncode == 0 and "0 new families, 0 new specialization(s)" in again.stdout, again.stdout


@needs_nvcc
def test_by_default_images_from_memory_are_left_out_and_said(work: Path, tmp_path: Path) -> None:
    got = _capture(work, tmp_path / "proj", "--native")
    assert got.returncode == 1, got.stdout + got.stderr
    assert "4 launch(es) of kernels not kept" in got.stdout
    assert "nothing was captured" in got.stderr


@needs_nvcc
def test_the_log_holds_every_launch_with_its_parameter_bytes(work: Path, tmp_path: Path) -> None:
    logfile = tmp_path / "native.log"
    code = (f"from pathlib import Path\nfrom kernelpack.capture.native import driver\n"
            f"driver.install(Path({str(logfile)!r}))\nimport runpy\nrunpy.run_path('script.py')\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=work, env=_env(tmp_path), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    got = log.read(logfile)
    assert [la.name for la in got.launches] == [SCALE, PAIR, SCALE, PAIR]
    assert len(got.images) == 2 and all(i.data == (work / "k.cubin").read_bytes() for i in got.images.values())
    scale, pair = got.launches[2], got.launches[3]
    assert scale.grid == (32, 1, 1) and scale.block == (128, 1, 1) and scale.smem == 0 and not scale.ex
    assert scale.params == (struct.pack("<Q", 0x7f0000001000), struct.pack("<Q", 0x7f0000201000),
                            struct.pack("<f", 2.5), struct.pack("<i", 4096))
    assert pair.ex and pair.smem == 64 and pair.cluster == (1, 1, 1)
    assert pair.params[0] == struct.pack("<ff", 0.5, -1.25) and pair.params[4] == struct.pack("<i", 4096)
    assert {name for _, name in got.names.values()} == {SCALE, PAIR}


def test_a_truncated_log_keeps_whole_records_and_says_so(tmp_path: Path) -> None:
    rec = struct.pack("<II", 5, 5) + b"hello"
    (tmp_path / "l").write_bytes(rec + struct.pack("<II", 5, 50) + b"cut")
    got = log.read(tmp_path / "l")
    assert got.notes[0] == "hello" and "ends inside a record" in got.notes[1]


def test_the_recorder_forwards_every_other_export_and_skips_its_own() -> None:
    from kernelpack.runtime import dryrun

    names = driver.exports(Path(dryrun.library_path()))
    assert "cuDriverGetVersion" in names and "cuGetProcAddress_v2" not in names
    x86 = driver.exports_source(["cuA", "cuB"], "x86_64")
    assert "jmp *kp_rec_real+8(%rip)" in x86 and "HIDDEN const unsigned kp_rec_count = 2;" in x86
    assert "br x16" in driver.exports_source(["cuA"], "aarch64")
    with pytest.raises(KernelpackError, match="not done on riscv64"):
        driver.exports_source(["cuA"], "riscv64")


def test_a_process_that_loaded_the_driver_already_is_told_to_start_the_capture_first(tmp_path: Path) -> None:
    from kernelpack.runtime import dryrun

    fake = tmp_path / "libcuda.so.1"
    fake.write_bytes(Path(dryrun.library_path()).read_bytes())
    code = (f"import ctypes\nctypes.CDLL({str(fake)!r})\nimport kernelpack\n"
            f"try:\n    kernelpack.capture(device='h100', native=True)\nexcept Exception as e:\n    print(e)\n")
    run = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert "has loaded the CUDA driver already" in run.stdout and "--native" in run.stdout, run.stdout + run.stderr


def test_gpu_less_native_capture_needs_a_stand_in_driver(tmp_path: Path) -> None:
    env = {k: v for k, v in _env(tmp_path).items() if k != "KERNELPACK_RECORD_DRIVER"}
    code = ("import kernelpack\ntry:\n    kernelpack.capture(device='h100', native=True)\n"
            "except Exception as e:\n    print(e)\n")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "KERNELPACK_RECORD_DRIVER" in run.stdout and "dry-run driver" in run.stdout, run.stdout + run.stderr


@needs_nvcc
def test_kernels_are_kept_by_where_their_device_code_came_from(work: Path) -> None:
    assert kernels.kept("memory", ["memory"]) and not kernels.kept("memory", None)
    assert not kernels.kept("/x/site-packages/torch/lib/libtorch_cuda.so", None)
    assert kernels.kept("/root/.cache/flashinfer/90a/cached_ops/rope/rope.so", None)
    assert kernels.kept("/a/b/rope.so", ["rope.so"]) and not kernels.kept("/a/b/norm.so", ["rope.so"])
    assert kernels.readable(SCALE) == "scale_float" and kernels.readable("plain_c") == "plain_c"


@needs_nvcc
def test_a_launch_whose_bytes_do_not_fit_the_cubin_is_skipped_with_the_parameter(work: Path) -> None:
    cubin = (work / "k.cubin").read_bytes()
    bad = log.Launch(1, SCALE, (1, 1, 1), (32, 1, 1), 0, (1, 1, 1), 0, False, (b"\0" * 8, b"\0" * 8, b"\0" * 4,
                                                                              b"\0" * 8), False)
    plain = log.Launch(2, "extern_c_kernel", (1, 1, 1), (32, 1, 1), 0, (1, 1, 1), 0, False, (), False)
    lg = log.Log(images={7: log.Image(7, 0x1000, 4, cubin)}, names={1: (7, SCALE), 2: (7, "extern_c_kernel")},
                 launches=[bad, plain])
    skipped: list[tuple[str, str]] = []
    found, left = kernels.launches(lg, ["sm_90a"], ["memory"], lambda w, y: skipped.append((w, y)))
    assert not found and left == 0
    assert skipped[0] == (f"native kernel {SCALE}", "memory (sm_90a): parameter 3: the launch passed 8 bytes, the "
                                                    "cubin's table says 4")
    assert skipped[1][0] == "native kernel extern_c_kernel"


def test_the_recorder_compiles_warning_free(tmp_path: Path) -> None:
    from kernelpack.runtime import dryrun

    gen = tmp_path / "exports.c"
    gen.write_text(driver.exports_source(driver.exports(Path(dryrun.library_path()))))
    cmd = [CC, "-std=gnu99", "-Wall", "-Wextra", "-Werror", "-O1", "-fPIC", "-shared", "-I", str(driver.CSRC), "-o",
           str(tmp_path / "libcuda.so.1"), str(driver.SOURCE), str(gen), "-ldl", "-lpthread"]
    got = subprocess.run(cmd, capture_output=True, text=True)
    assert got.returncode == 0, got.stderr


@needs_nvcc
@pytest.mark.parametrize("sanitizer", ["thread", "address"])
def test_the_recorder_under_a_sanitizer_records_8_threads_launching_at_once(work: Path, tmp_path: Path,
                                                                            sanitizer: str) -> None:
    """The recorder built with -fsanitize (and the storm program of tests/native_host.c): 8 threads each load the
    cubin and launch both kernels 20 times; no report, and the log holds every launch with its thread's bytes."""
    from kernelpack.runtime import dryrun

    gen = tmp_path / "exports.c"
    gen.write_text(driver.exports_source(driver.exports(Path(dryrun.library_path()))))
    flags = ["-g", "-O1", f"-fsanitize={sanitizer}", "-fno-omit-frame-pointer"]
    subprocess.run([CC, "-std=gnu99", *flags, "-fPIC", "-shared", "-Wl,-soname,libcuda.so.1", "-I", str(driver.CSRC),
                    "-o", str(tmp_path / "libcuda.so.1"), str(driver.SOURCE), str(gen), "-ldl", "-lpthread"],
                   check=True)
    exe = tmp_path / "storm"
    subprocess.run([CC, "-std=gnu99", *flags, "-DNATIVE_HOST_MAIN", "-o", str(exe), str(HERE / "native_host.c"),
                    "-ldl", "-lpthread"], check=True)
    logfile = tmp_path / "native.log"
    env = dict(_env(tmp_path), LD_LIBRARY_PATH=str(tmp_path), KERNELPACK_RECORD_LOG=str(logfile),
               TSAN_OPTIONS="halt_on_error=1", ASAN_OPTIONS="detect_leaks=0:halt_on_error=1")
    run = subprocess.run([str(exe), str(work / "k.cubin")], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "Sanitizer" not in run.stderr, run.stderr[-4000:]
    got = log.read(logfile)
    assert len(got.launches) == 8 * 20 * 2 and not got.notes
    for la in got.launches:
        if la.name == SCALE:
            thread = (int.from_bytes(la.params[0], "little") >> 32) - 1
            assert la.params[3] == struct.pack("<i", 1000 + thread) and la.grid == (-(-(1000 + thread) // 128), 1, 1)
    assert len(got.images) >= 1 and {la.name for la in got.launches} == {SCALE, PAIR}


@needs_nvcc
def test_only_the_devices_entries_of_a_fatbin_are_expanded(work: Path, tmp_path: Path) -> None:
    from kernelpack.frontends.prebuilt.fatbin import read_fatbin

    fat = tmp_path / "k.fatbin"
    subprocess.run([str(NVCC), "-fatbin", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
                    "arch=compute_90a,code=sm_90a", "-gencode", "arch=compute_90,code=compute_90", "-Xfatbin",
                    "-compress-all", str(work / "k.cu"), "-o", str(fat)], check=True)
    data = fat.read_bytes()
    assert sorted((e.kind, e.sm) for e in read_fatbin(data)) == [("cubin", 80), ("cubin", 90), ("ptx", 90)]
    seen: list[tuple[str, int]] = []
    kept = read_fatbin(data, keep=lambda kind, sm: seen.append((kind, sm)) or (kind == "cubin" and sm == 90))
    assert [(e.kind, e.sm) for e in kept] == [("cubin", 90)] and len(seen) == 3
    assert [str(c.arch) for c, _ in kernels._cubins(data, "k.fatbin", frozenset({90}))] == ["sm_90a"]


def test_a_hostile_library_name_stays_data_in_the_project_file(tmp_path: Path) -> None:
    """A library's file name (where a native kernel came from) is data: a line break, quotes and brackets in it
    neither end the comment nor make TOML; the cubin's file name is made of safe characters."""
    from kernelpack.capture.project import write
    from kernelpack.capture.records import Launch, short_name
    from kernelpack.project.model import read_toml

    evil = 'lib"]\n[[triton]]\nkernel = "x.py:k'
    files = {f"native/{short_name(evil)[:32]}_0123456789ab.sm_90a.cubin": b"\x7fELF"}
    la = Launch(dsl="native", kernel=SCALE, name=kernels.readable(SCALE), call="", family={"symbol": SCALE},
                variant={}, options={"files": sorted(files), "from": evil}, grid=(1, 1, 1),
                grid_consts={"block": [32, 1, 1], "smem": 0, "cluster": [1, 1, 1]}, archs=("sm_90a",), payload=files)
    write(tmp_path, [la], [], {"command": "test"})
    data = read_toml(tmp_path / "kernelpack.toml")
    assert "triton" not in data and len(data["cubin"]) == 1
    assert data["cubin"][0]["kernels"] == {SCALE: {"name": "scale_float"}}
    assert all(f.name.isascii() and "\n" not in f.name for f in (tmp_path / "native").iterdir())
