"""One kernelpack library holding CUDA C++, CuTe kernel-level artifacts and CuTe host programs (GPU-less): built
with kernelpack.Library, only libc/libdl needed, no cu*/cuda* symbol imported, one header for all, host entries
reporting through the library's own last-error state, and calls through the fake driver."""

from __future__ import annotations

import subprocess

import pytest

from clib_support import compile_program, results, session_env
from cute_support import example, need_cute
from fake_cuda import run
from toolchain_support import needs_tools

need_cute()
import cutlass  # noqa: E402

import kernelpack.cute as kc  # noqa: E402
from kernelpack.clib import Library  # noqa: E402

pytestmark = needs_tools("ld", "objcopy")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    env = session_env(tmp_path_factory)
    ea, hg = example("elementwise_add"), example("hopper_gemm")
    kernels = kc.compile(ea.elementwise_add, *ea.example_args(cutlass.Float32), arch=["sm_80", "sm_90a"],
                         name="ew_add", variant="f32")
    programs = [kc.export(ea.elementwise_add, *ea.example_args(cutlass.Float32), arch=["sm_80", "sm_90a"],
                          name="host_add", variant="f32"),
                kc.export(hg.HopperGemm(), *hg.example_args(cutlass.Float16), arch="sm_90a", name="gemm",
                          variant="f16")]
    cuda = [a for a in env.artifacts if a.name in ("add", "tma2d", "scratch")]
    lib = Library("mix", kernels, *cuda, *programs, cflags=["-Werror"]).build(tmp_path_factory.mktemp("mix"))
    return env, lib


def _tool(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def test_one_library_needs_only_libc_and_imports_no_cuda(mixed):
    _, lib = mixed
    undefined = _tool("nm", "-D", "--undefined-only", str(lib.shared)).split()
    assert not [s for s in undefined if s.lower().startswith(("cu", "_cu"))], undefined
    needed = [line.split()[0] for line in _tool("ldd", str(lib.shared)).splitlines() if "=>" in line]
    assert set(needed) <= {"libc.so.6", "libdl.so.2"}, needed
    exported = {line.split()[-1] for line in _tool("nm", "-D", "--defined-only", str(lib.shared)).splitlines()}
    for sym in ("mix_ew_add", "mix_ew_add_f32", "mix_add", "mix_tma2d", "mix_scratch", "mix_host_add_f32",
                "mix_gemm_f16", "mix_last_error", "mix_set_default_device"):
        assert sym in exported
    assert all(s.startswith("mix_") for s in exported if not s.startswith(("_", "GLIBC"))), exported
    static_defs = _tool("nm", "--defined-only", "--extern-only", str(lib.static)).split()
    assert not [s for s in static_defs if s.startswith(("_cuda", "_cu", "kp_shim"))]


MAIN = r"""
#include <stdio.h>
#include <string.h>
#include "mix.h"
int main(void) {
    mix_tensor_f32_dxd_Dx1 empty = {NULL, 0, 8, 8};
    printf("zero %d\n", (int)mix_host_add_f32(empty, empty, empty));
    mix_tensor_f16_dxd_Dx1 a = {(kp_f16*)0x10000, 128, 64, 64}, c = {(kp_f16*)0x30000, 128, 128, 128};
    mix_tensor_f16_dxd_Dx1 bad = {(kp_f16*)0x10000, 128, 60, 60};
    printf("contract %d %s\n", (int)mix_gemm_f16(bad, bad, c, NULL), mix_last_error());
    kp_status s = mix_gemm_f16(a, a, c, NULL);
    printf("gemm %d %s\n", (int)s, s ? mix_last_error() : "");
    mix_tensor_f32_dxd_Dx1 t = {(float*)0x40000, 16, 64, 64};
    s = mix_host_add_f32(t, t, t);
    printf("host_add %d %s\n", (int)s, s ? mix_last_error() : "");
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = 2, l.block[0] = 128;
    printf("add %d\n", (int)mix_add(&l, (void*)0x10000, KP_F32, (void*)0x20000, KP_F32, (void*)0x30000, KP_F32, 64));
    return 0;
}
"""


@pytest.mark.parametrize("cxx", [False, True])
def test_header_declares_everything_and_entries_share_the_error_state(mixed, tmp_path, cxx):
    env, lib = mixed
    src = tmp_path / ("main.cpp" if cxx else "main.c")
    src.write_text(MAIN.replace('"mix.h"', '"mix.hpp"') if cxx else MAIN)
    exe = compile_program(src, tmp_path / "main", lib.include_dir, [str(lib.static), "-ldl", "-lpthread"], cxx=cxx)
    r = run(exe, env.root, env.fake, FAKECUDA_CC="9.0", FAKECUDA_CURRENT="0")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert lines["zero"] == "0"  # zero extent: nothing runs
    assert lines["contract"].startswith("7 mix_gemm_f16: ") and "multiple of 8" in lines["contract"]
    assert lines["add"] == "0"
    # host programs run CuTe's host code over the shim against the fake driver: it loads CuTe's embedded cubin
    # (the fake does not emulate CuTe's kernel lookup, so that load fails); the failure reaches mix_last_error
    assert lines["host_add"] == "4 mix: host_add[f32]: loading the sm_90a object on device 0 failed (CUresult 500)"
    assert lines["gemm"].startswith("4 mix: gemm[f16]: loading the sm_90a object")
    assert len(r.calls("cuLibraryLoadData")) >= 2  # the kernels' bundle and CuTe's own cubin
    if cxx:
        assert "inline kp_status gemm_f16(" in (lib.include_dir / "mix.hpp").read_text()


def test_results_through_a_shared_library(mixed, tmp_path):
    env, lib = mixed
    src = tmp_path / "main.c"
    src.write_text(MAIN)
    exe = compile_program(src, tmp_path / "main_so", lib.include_dir,
                          [f"-L{lib.lib_dir}", "-lmix", f"-Wl,-rpath,{lib.lib_dir}"])
    r = run(exe, env.root, None)  # no driver: the host programs' own message through mix_last_error
    assert "host_add 1 mix: host_add[f32]: cannot load the CUDA driver libcuda.so.1" in r.stdout, r.stdout
    assert "add 1" in r.stdout and results(r) == {}
