"""One library verb: kernelpack.Library builds CuTe host programs alone into what build_host_library builds (now a
thin wrapper over it) plus what every kernelpack library has (NAME.hpp, CMake and pkg-config files); host programs of
one name built for disjoint archs merge into one, in Library and in kernelpack build. GPU-less."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from cute_support import EXAMPLES, host_programs, need_cute
from toolchain_support import CC, CXX, needs_tools

need_cute()

import kernelpack  # noqa: E402
from kernelpack.bundle.merge import merge_programs  # noqa: E402
from kernelpack.clib import BuildResult  # noqa: E402
from kernelpack.clib.host import HostLibrary, HostProgram, build_host_library  # noqa: E402
from kernelpack.core.errors import BundleError, KernelpackError  # noqa: E402

pytestmark = needs_tools(CC, "ld", "objcopy")


def tool(*cmd: str) -> str:
    return subprocess.run(list(cmd), check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def programs() -> list[HostProgram]:
    return host_programs()


@pytest.fixture(scope="module")
def both(programs: list[HostProgram], tmp_path_factory: pytest.TempPathFactory) -> tuple[BuildResult, HostLibrary]:
    verb = kernelpack.Library("kpcute", *programs).build(tmp_path_factory.mktemp("verb"))
    wrapper = build_host_library("kpcute", programs, tmp_path_factory.mktemp("wrapper"))
    return verb, wrapper


def _defined(path: Path) -> list[str]:
    return sorted(line.split()[-1] for line in tool("nm", "-D", "--defined-only", str(path)).splitlines())


def test_library_of_host_programs_alone_is_what_build_host_library_builds(both) -> None:
    verb, wrapper = both
    assert verb.header.read_text() == wrapper.header.read_text()
    assert _defined(verb.shared) == _defined(wrapper.shared) == list(wrapper.exports)
    assert {"kpcute_last_error", "kpcute_last_cuda_error", "kpcute_set_default_device",
            "kpcute_gemm_f16"} <= set(wrapper.exports)
    assert wrapper.object == wrapper.shared.parent / "libkpcute_cute.o" and wrapper.object.is_file()
    assert "(SONAME)" in tool("readelf", "-d", str(verb.shared)) and "[libkpcute.so]" in tool("readelf", "-d",
                                                                                                str(verb.shared))
    for f in (verb.cpp_header, verb.cmake_config, verb.pkgconfig, verb.static, verb.prefix / "lib/libkpcute_cute.o"):
        assert f.is_file(), f
    assert "5 CuTe host programs" in verb.pkgconfig.read_text()
    assert "5 CuTe host programs" in verb.cmake_config.read_text()
    mod = kernelpack.load(verb.shared)
    assert set(mod.host_programs) == {"ew_add", "gemm", "scale_shift"}, mod.host_programs


CPP = r"""
#include <cstdio>
#include "kpcute.hpp"
int main() {
    float* p = nullptr;
    kp::tensor_view<float, 2> empty(p, {0, 64});  // zero extent: success without a driver
    auto t = kpcute::to_tensor_f32_dxd_Dx1(empty);
    kpcute::check(kpcute::ew_add_f32(t, t, t));
    kp_f16* h = nullptr;
    auto g = kpcute::to_tensor_f16_dxd_Dx1(kp::tensor_view<kp_f16, 2>(h, {16, 60}));  // K = 60: refused
    try {
        kpcute::check(kpcute::gemm_f16(g, g, g, nullptr));
    } catch (const kp::Error& e) {
        std::printf("%d %s\n", (int)e.status(), e.what());
        return 0;
    }
    return 1;
}
"""


def test_the_cpp_header_of_host_programs_compiles_and_calls_the_entries(both, tmp_path: Path) -> None:
    if shutil.which(CXX) is None:
        pytest.skip("no C++ compiler")
    verb, _ = both
    (tmp_path / "main.cpp").write_text(CPP)
    exe = tmp_path / "main"
    subprocess.run([CXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{verb.include_dir}",
                    str(tmp_path / "main.cpp"), str(verb.static), "-ldl", "-lpthread", "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and "is not a multiple of 8" in out.stdout, out


def _split(p: HostProgram) -> list[HostProgram]:
    """``p`` as one program per arch (as separate exports would give)."""
    out = []
    for o in p.objects:
        kernels = tuple(dataclasses.replace(k, binaries=tuple(b for b in k.binaries if b.arch == o.arch))
                        for k in p.kernels)
        out.append(dataclasses.replace(p, objects=(o,), kernels=kernels))
    return out


def test_host_programs_of_disjoint_archs_merge_and_conflicts_are_refused(programs, tmp_path: Path) -> None:
    f32, bf16 = (next(p for p in programs if p.label == label) for label in ("ew_add[f32]", "ew_add[bf16]"))
    p80, p90 = _split(f32)
    assert merge_programs([p90, p80]) == merge_programs([p80, p90]) == [f32]
    assert merge_programs([f32, p80]) == [f32]  # the same object twice: harmless
    built = kernelpack.Library("kpsplit", p90, p80).build(tmp_path / "split")
    assert "kpsplit_ew_add_f32" in _defined(built.shared)

    other = dataclasses.replace(_split(bf16)[1], name="ew_add", variant="f32")  # bf16 params under f32's name
    with pytest.raises(BundleError, match=r"host program ew_add\[f32\]: cannot merge item 1 \(sm_80\) with item 2 "
                                          r"\(sm_90a\): parameters \(tensor_f32"):
        kernelpack.Library("kpbad", p80, other)
    swapped = dataclasses.replace(p80, objects=(dataclasses.replace(_split(bf16)[0].objects[0]),))
    with pytest.raises(BundleError, match=r"two different sm_80 objects: sha256 \w+, \d+ bytes, prefix "
                                          r"kpcute_ew_add_bf16_sm_80 from item 2, sha256 \w+, \d+ bytes, prefix "
                                          r"kpcute_ew_add_f32_sm_80 from item 1"):
        kernelpack.Library("kpbad", f32, dataclasses.replace(swapped, params=f32.params))


def test_library_refuses_what_is_not_an_item() -> None:
    with pytest.raises(KernelpackError, match="library kpx: item 2 is int 5; expected a KernelArtifact"):
        kernelpack.Library("kpx", [], 5)
    with pytest.raises(KernelpackError, match="library kpx: nothing to build"):
        kernelpack.Library("kpx").build("/nonexistent/never-written")


TOML = """
[library]
name = "kphost"
archs = ["sm_80", "sm_90a"]

[[cute]]
function = "elementwise_add.py:elementwise_add"
example_args = "elementwise_add.py:example_args"
name = "ew_add"
mode = "host"
archs = ["sm_80"]
variants = { f32 = [{ py = "cutlass.Float32" }] }

[[cute]]
function = "elementwise_add.py:elementwise_add"
example_args = "elementwise_add.py:example_args"
name = "ew_add"
mode = "host"
archs = ["sm_90a"]
variants = { f32 = [{ py = "cutlass.Float32" }] }
"""


def test_kernelpack_build_of_host_programs_alone_merges_per_arch_entries(tmp_path: Path, fresh_cache) -> None:
    from kernelpack.project import build

    shutil.copy(EXAMPLES / "elementwise_add.py", tmp_path)
    (tmp_path / "kernelpack.toml").write_text(TOML)
    report = build(tmp_path, jobs=1)
    out = tmp_path / "build"
    for f in ("lib/libkphost.so", "lib/libkphost.a", "include/kphost.h", "include/kphost.hpp",
              "lib/cmake/kphost/kphostConfig.cmake", "lib/pkgconfig/kphost.pc"):
        assert (out / f).is_file(), f
    assert "kphost_ew_add_f32" in _defined(out / "lib/libkphost.so")
    entries = "\n".join(line for line in (out / "include/kphost.h").read_text().splitlines() if "Run the CuTe" in line)
    assert "ew_add[f32] (sm_80, sm_90a)" in entries, entries
    assert report.linked


def test_host_objects_have_short_reprs(programs, both) -> None:
    from test_reprs import check_repr

    verb, wrapper = both
    gemm = next(p for p in programs if p.label == "gemm[f16]")
    check_repr(gemm, "gemm[f16]", "sm_90a", "(a, b, c, stream)", "1 kernel", "KiB")
    check_repr(gemm.objects[0], "sm_90a", "KiB", gemm.objects[0].prefix)
    check_repr(gemm.objects[0].info, "x86_64", "imported")
    check_repr(gemm.params[0], "tensor_f16", "data % 16 == 0")
    check_repr(gemm.params[3], "stream")
    check_repr(gemm.kernels[0], "gemm_kernel[f16]", "sm_90a")
    check_repr(wrapper, "libkpcute.so", "10 exports")
    check_repr(verb, "libkpcute.so")
    check_repr(kernelpack.Library("kpcute", *programs), "5 host programs", "ew_add[f32]")
    mod = kernelpack.load(verb.shared)
    check_repr(mod, "ew_add, scale_shift, gemm")
    check_repr(mod.gemm, "gemm(a: tensor f16", "[kpcute_gemm_f16, kpcute_gemm_bf16]")
    check_repr(mod.host_programs["gemm"], "gemm(a, b, c, *, stream)", "2 host programs")
