"""Generated libraries as artifacts: warnings, sanitizers, symbols, dependencies, consumers, embedded bundle."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from clib_support import HERE, add_abi, bins, compile_program, results
from fake_cuda import run
from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.bundle.kpack import Bundle
from kernelpack.clib import Library, build_library, read_embedded_bundle, read_embedded_bundles
from kernelpack.core.abi import Abi, DType, Param, Pointer, Scalar
from kernelpack.core.errors import KernelpackError
from toolchain_support import CC, cuda_include, needs_tools


def _sanitized(env, tmp: Path, flags: list[str], name: str) -> Path:
    src = env.demo.sources
    exe = tmp / name
    subprocess.run([CC, "-std=c99", "-g", "-O1", *flags, f"-I{env.demo.include_dir}", f"-Wa,-I{src}",
                    str(src / "demo.c"), str(src / "demo_data.s"), str(HERE / "clib_harness.c"), "-o", str(exe), "-ldl",
                    "-lpthread"],
                   check=True)
    return exe


def test_first_launch_race_under_thread_sanitizer(clib_env, tmp_path):
    exe = _sanitized(clib_env, tmp_path, ["-fsanitize=thread"], "harness_tsan")
    r = run(exe, clib_env.root, clib_env.fake, "race", FAKECUDA_LOAD_US="20000", TSAN_OPTIONS="halt_on_error=1")
    assert r.returncode == 0, r.stderr
    assert "ThreadSanitizer" not in r.stderr and "race ok=32" in r.stdout
    assert len(r.calls("cuLibraryLoadData")) == 1


def test_every_scenario_under_address_and_ub_sanitizers(clib_env, tmp_path):
    exe = _sanitized(clib_env, tmp_path, ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"],
                     "harness_asan")
    for scenario in ("pack", "dispatch", "tensor", "smem", "cluster", "block", "hidden", "add", "stream", "preload",
                     "race", "grid", "scratch", "tma"):
        r = run(exe, clib_env.root, clib_env.fake, scenario, FAKECUDA_CC="8.0,9.0")
        assert r.returncode == 0 and "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr
    r = run(exe, clib_env.root, None, "add")  # no driver path too
    assert r.returncode == 0 and results(r)["add"][0] == "KP_ERROR_NO_DRIVER", r.stderr


def test_generated_code_is_warning_free_c99_and_has_no_process_exits(clib_env, tmp_path):
    tu = (clib_env.demo.sources / "demo.c").read_text()
    assert not re.search(r"\b(printf|fprintf|puts|exit|_exit|abort|assert)\s*\(", tu)
    # the library was built with -Werror; also under -pedantic-free strict C99 with the stricter warnings
    subprocess.run([CC, "-std=c99", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wstrict-prototypes", "-fPIC",
                    "-fsyntax-only", f"-I{clib_env.demo.include_dir}", f"-Wa,-I{clib_env.demo.sources}",
                    str(clib_env.demo.sources / "demo.c")], check=True)


def test_cpp17_header_overloads_and_error_helper(clib_env, tmp_path):
    src = tmp_path / "main.cpp"
    src.write_text(CPP_MAIN)
    exe = compile_program(src, tmp_path / "cpp", clib_env.demo.include_dir,
                          [f"-L{clib_env.demo.lib_dir}", "-ldemo", f"-Wl,-rpath,{clib_env.demo.lib_dir}"], cxx=True)
    r = run(exe, clib_env.root, clib_env.fake)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "error 8 demo_fixed_block: kernel fixed_block (sm_90a): launch.block {64,1,1} differs from the block "
        "the kernel requires (REQNTID) {128,1,1}; pass {0,0,0} to use it", "ok"]
    kernels = [line.split("kernel=")[1].split(" ")[0] for line in r.log
               if line.startswith("cuLaunchKernel") and not line.endswith("-> 201")]  # 201: retried with a context
    assert kernels == ["add_f32_vec4", "add_f64", "add_f32"]


CPP_MAIN = r"""
#include <cstdio>
#include "demo.hpp"
static_assert(kp::dtype_of<float>::value == KP_F32, "dtype trait");
int main() {
    auto at = [](std::uintptr_t a) { return reinterpret_cast<float*>(a); };
    auto atd = [](std::uintptr_t a) { return reinterpret_cast<double*>(a); };
    demo::check(demo::add(kp::launch(2, 128), at(0x10000), at(0x20000), at(0x30000), 1024));
    demo::check(demo::add(kp::launch(2, 128), atd(0x10000), atd(0x20000), atd(0x30000), 1024));
    demo::check(demo::add(kp::launch(2, 128), at(0x10004), at(0x20000), at(0x30000), 1024));
    try {
        demo::check(demo_fixed_block_default(&static_cast<const kp_launch&>(kp::launch(1, 64)), at(0x1000)));
    } catch (const kp::Error& e) {
        std::printf("error %d %s\n", static_cast<int>(e.status()), e.what());
    }
    std::printf("ok\n");
    return 0;
}
"""


def test_only_public_symbols_and_no_cuda_dependency(clib_env):
    so, a = clib_env.demo.shared, clib_env.demo.static
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(so)], capture_output=True, text=True,
                               check=True).stdout
    assert not re.search(r"\bcu[A-Z]|\bcuda", undefined)
    defined = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True,
                             check=True).stdout.split()
    exported = [s for s in defined if not re.fullmatch(r"[0-9a-f]+|[A-Za-z]", s)]
    assert exported and all(s.startswith("demo_") for s in exported), exported
    ldd = subprocess.run(["ldd", str(so)], capture_output=True, text=True).stdout
    assert "cuda" not in ldd.lower() and "libstdc++" not in ldd
    needed = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout
    libs = {n for n in re.findall(r"Shared library: \[(.+?)\]", needed) if not n.startswith("ld-linux")}
    assert libs <= {"libc.so.6", "libdl.so.2"}  # (the glibc loader appears for __tls_get_addr)
    archive = subprocess.run(["nm", "--defined-only", "-g", str(a)], capture_output=True, text=True,
                             check=True).stdout
    globals_ = [line.split()[-1] for line in archive.splitlines() if re.match(r"[0-9a-f]+ [A-Z] ", line)]
    assert globals_ and all(s.startswith("demo_") for s in globals_), globals_


def test_size_is_bundle_plus_small_overhead(clib_env):
    bundle = len(clib_env.demo.sources.joinpath("demo.kpack").read_bytes())
    assert clib_env.demo.shared.stat().st_size < bundle + 96 * 1024


def test_embedded_bundle_round_trips(clib_env):
    expect = Bundle.of(*clib_env.artifacts).to_bytes()
    assert read_embedded_bundle(clib_env.demo.shared).to_bytes() == expect
    assert read_embedded_bundle(clib_env.demo.static).to_bytes() == expect
    with pytest.raises(KernelpackError, match="no kernelpack bundle inside"):
        read_embedded_bundle(clib_env.harness)


def _small_lib(env, name: str, out: Path, **kw):
    arts = [KernelArtifact("add", "add_f32", add_abi(DType.f32), bins(env.kernels, "80", "90a"), variant="f32"),
            KernelArtifact("add", "add_f64", add_abi(DType.f64), bins(env.kernels, "80", "90a"), variant="f64")]
    return Library(name, *arts, **kw).build(out / name)


TWO_LIBS = r"""
#include <stdio.h>
#include "alpha.h"
#include "beta.h"
int main(void) {
    kp_launch l = {{1, 1, 1}, {32, 1, 1}, 0, {0, 0, 0}, NULL, 0};
    kp_status a = alpha_add(&l, (void*)0x1000, KP_F32, (void*)0x2000, KP_F32, (void*)0x3000, KP_F32, 8);
    kp_status b = beta_add(&l, (void*)0x1000, KP_F64, (void*)0x2000, KP_F64, (void*)0x3000, KP_F64, 8);
    printf("%s %s\n", alpha_status_name(a), beta_status_name(b));
    return 0;
}
"""


@pytest.mark.parametrize("kind", ["static", "shared"])
def test_two_libraries_in_one_program(clib_env, tmp_path, kind):
    alpha, beta = _small_lib(clib_env, "alpha", tmp_path), _small_lib(clib_env, "beta", tmp_path)
    src = tmp_path / "two.c"
    src.write_text(TWO_LIBS)
    if kind == "static":
        libs = [str(alpha.static), str(beta.static), "-ldl", "-lpthread"]
    else:
        libs = [str(alpha.shared), str(beta.shared), f"-Wl,-rpath,{alpha.lib_dir}:{beta.lib_dir}"]
    exe = compile_program(src, tmp_path / "two", alpha.include_dir, libs, flags=(f"-I{beta.include_dir}",))
    r = run(exe, clib_env.root, clib_env.fake)
    assert r.stdout.strip() == "KP_SUCCESS KP_SUCCESS", r.stdout + r.stderr
    assert len(r.calls("cuInit")) == 2  # each library keeps its own driver state
    if kind == "static":
        assert [b.artifacts[0].name for b in read_embedded_bundles(exe)] == ["add", "add"]


CONSUMER_C = r"""
#include <stdio.h>
#include "demo.h"
int main(void) {
    kp_launch l = {{4, 1, 1}, {128, 1, 1}, 0, {0, 0, 0}, NULL, 0};
    kp_status s = demo_add(&l, (void*)0x10000, KP_F32, (void*)0x20000, KP_F32, (void*)0x30000, KP_F32, 512);
    printf("%s\n", demo_status_name(s));
    return s == KP_SUCCESS ? 0 : 1;
}
"""

CMAKE_LISTS = """cmake_minimum_required(VERSION 3.16)
project(consumer C CXX)
find_package(demo 1.0 REQUIRED)
add_executable(c_shared main.c)
target_link_libraries(c_shared PRIVATE demo::demo)
add_executable(cxx_static main.cpp)
target_link_libraries(cxx_static PRIVATE demo::demo_static Threads::Threads)
find_package(Threads REQUIRED)
set_target_properties(c_shared cxx_static PROPERTIES C_STANDARD 99 CXX_STANDARD 17)
"""


@needs_tools("cmake")
def test_cmake_consumer(clib_env, tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "main.c").write_text(CONSUMER_C)
    (proj / "main.cpp").write_text(CPP_MAIN)
    (proj / "CMakeLists.txt").write_text(CMAKE_LISTS)
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(proj), "-B", str(build), f"-DCMAKE_PREFIX_PATH={clib_env.demo.prefix}",
                    "-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build), "-j2"], check=True, capture_output=True)
    r = run(build / "c_shared", clib_env.root, clib_env.fake)
    assert r.returncode == 0 and r.stdout.strip() == "KP_SUCCESS", r.stdout + r.stderr
    r = run(build / "cxx_static", clib_env.root, clib_env.fake)
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "ok", r.stdout + r.stderr


@needs_tools("pkg-config")
def test_pkgconfig_consumer(clib_env, tmp_path):
    env = {"PKG_CONFIG_PATH": str(clib_env.demo.prefix / "lib" / "pkgconfig")}
    import os

    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "demo"], capture_output=True, text=True, check=True,
                           env={**os.environ, **env}).stdout.split()
    src = tmp_path / "main.c"
    src.write_text(CONSUMER_C)
    exe = tmp_path / "pc"
    subprocess.run([CC, "-std=c99", "-Wall", "-Werror", str(src), "-o", str(exe), *flags,
                    f"-Wl,-rpath,{clib_env.demo.lib_dir}"], check=True)
    r = run(exe, clib_env.root, clib_env.fake)
    assert r.returncode == 0 and r.stdout.strip() == "KP_SUCCESS", r.stdout + r.stderr


LAYOUT_C = r"""
#include <cuda.h>
#include <stddef.h>
#include <stdio.h>
int main(void) {
    printf("%zu %zu %zu %zu %zu %zu %zu %d %d %d %d %d %d\n", sizeof(CUlaunchAttributeValue), sizeof(CUlaunchAttribute),
           offsetof(CUlaunchAttribute, value), sizeof(CUlaunchConfig), offsetof(CUlaunchConfig, hStream),
           offsetof(CUlaunchConfig, attrs), offsetof(CUlaunchConfig, numAttrs), CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
           CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
           CUDA_ERROR_INVALID_CONTEXT);
    return 0;
}
"""


def test_driver_declarations_match_cuda_h(tmp_path):
    include = cuda_include()
    if include is None:
        pytest.skip("no cuda.h to compare with")
    src = tmp_path / "layout.c"
    src.write_text(LAYOUT_C)
    subprocess.run([CC, f"-I{include}", str(src), "-o", str(tmp_path / "layout")], check=True)
    got = subprocess.run([str(tmp_path / "layout")], capture_output=True, text=True, check=True).stdout.split()
    assert got == ["64", "72", "8", "56", "32", "40", "48", "4", "8", "75", "76", "97", "201"]
    csrc = Path(__file__).parents[1] / "src/kernelpack/csrc"
    runtime = "".join((csrc / f).read_text() for f in ("kp_cuda.h", "kp_model.h"))
    for token in ["sizeof(kp_CUlaunchAttributeValue) == 64", "sizeof(kp_CUlaunchAttribute) == 72",
                  "sizeof(kp_CUlaunchConfig) == 56", "offsetof(kp_CUlaunchConfig, numAttrs) == 48",
                  "CLUSTER_DIMENSION 4", "MAX_DYNAMIC_SHARED_SIZE_BYTES 8", "COMPUTE_CAPABILITY_MAJOR 75",
                  "COMPUTE_CAPABILITY_MINOR 76", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97", "INVALID_CONTEXT 201"]:
        assert token in runtime


def test_build_library_from_kpack_and_relink_from_so(clib_env, tmp_path):
    path = Bundle.of(*clib_env.artifacts[:3]).write(tmp_path / "adds.kpack")
    res = build_library("fromkpack", [path], tmp_path / "out1")
    assert res.shared.exists() and res.static.exists() and res.cmake_config.exists() and res.pkgconfig.exists()
    again = build_library("relinked", [res.shared], tmp_path / "out2")
    assert read_embedded_bundle(again.shared).to_bytes() == Bundle.read(path).to_bytes()


def test_generator_rejects_unusable_families(clib_env):
    k = clib_env.kernels
    f32 = KernelArtifact("add", "add_f32", add_abi(DType.f32), bins(k, "80"), variant="a")
    other = Abi((Param("x", Pointer(DType.f32, True)), Param("y", Pointer(DType.f32, True)),
                 Param("out", Pointer(DType.f32)), Param("m", Scalar(DType.i32))))
    renamed = KernelArtifact("add", "add_f32", other, bins(k, "80"), variant="b")
    with pytest.raises(KernelpackError, match="take different arguments"):
        Library("bad", f32, renamed).generate()
    u32 = Abi(add_abi(DType.f32).params[:3] + (Param("n", Scalar(DType.u32)),))
    with pytest.raises(KernelpackError, match="argument 3 'n' has different types"):
        Library("bad", f32, KernelArtifact("add", "add_f32", u32, bins(k, "80"), variant="c")).generate()
    with pytest.raises(KernelpackError, match="must be an identifier"):
        Library("my-lib", f32).generate()
    clash = KernelArtifact("add_a", "add_f32", add_abi(DType.f32), bins(k, "80"))
    with pytest.raises(KernelpackError, match="would both be named lib_add_a"):
        Library("lib", f32, clash).generate()
    launch = Abi((Param("launch", Pointer(DType.f32)),))  # a parameter may be called like the generated ones
    src = Library("lib", KernelArtifact("fixed_block", "fixed_block", launch, bins(k, "80"))).generate()
    assert "lib_fixed_block(const kp_launch* kp_cfg, float* launch);" in src.header
