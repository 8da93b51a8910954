"""Bundles and libraries built before the launch-model rework still load, inspect, link and launch: the fixtures in
tests/fixtures/built-2026-12-01/ were built by kernelpack at commit cf8dc13 (`kernelpack demo`: the demo kernels for
sm_80 and sm_90a, a .kpack and the libkpdemo library). The .kpack format and the libraries' C ABI are unchanged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clib_support import compile_program
from fake_cuda import run

FIXTURES = Path(__file__).parent / "fixtures" / "built-2026-12-01"
KPACK = FIXTURES / "demo.kpack"
LIB = FIXTURES  # include/kpdemo.h{,pp}, lib/libkpdemo.{so,a}

PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include "kpdemo.h"

int main(void) {
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = 4, l.block[0] = 128;
    kp_status s = kpdemo_axpy(&l, 2.0f, (const float*)0x10000, (float*)0x20000, 512);
    printf("axpy %s\n", kpdemo_status_name(s));
    s = kpdemo_scale(&l, (const void*)0x10000, KP_F32, (void*)0x20000, KP_F32, 0.5f, 512);
    printf("scale %s\n", kpdemo_status_name(s));
    s = kpdemo_scale(&l, (const void*)0x10000, KP_F32, (void*)0x20000, KP_I8, 0.5f, 512);
    printf("mismatch %s %s\n", kpdemo_status_name(s), kpdemo_last_error());
    return 0;
}
"""


def test_old_bundle_and_library_load_and_describe_the_same_kernels():
    import kernelpack
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.clib import read_embedded_bundle

    bundle = Bundle.read(KPACK)
    assert {a.label for a in bundle} >= {"axpy", "scale[float]", "scale[half]", "scale[double]"}
    assert read_embedded_bundle(LIB / "lib" / "libkpdemo.so").to_bytes() == bundle.to_bytes()
    for source in (KPACK, LIB / "lib" / "libkpdemo.so", LIB / "lib" / "libkpdemo.a"):
        mod = kernelpack.load(source)
        assert set(mod.families) == {"axpy", "scale", "row_sum", "affine"}, source


def test_old_files_inspect():
    for f in (KPACK, LIB / "lib" / "libkpdemo.so"):
        out = subprocess.run([sys.executable, "-m", "kernelpack.cli", "inspect", str(f), "--json"],
                             capture_output=True, text=True)
        assert out.returncode == 0 and '"axpy"' in out.stdout, out.stderr


def test_old_library_links_and_launches_through_its_c_abi(tmp_path, fake_cuda):
    src = tmp_path / "main.c"
    src.write_text(PROGRAM)
    exe = compile_program(src, tmp_path / "main", LIB / "include",
                          [f"-L{LIB / 'lib'}", "-lkpdemo", f"-Wl,-rpath,{LIB / 'lib'}"])
    r = run(exe, tmp_path, fake_cuda, FAKECUDA_CC="9.0")
    assert r.returncode == 0, r.stderr
    assert "axpy KP_SUCCESS" in r.stdout and "scale KP_SUCCESS" in r.stdout, r.stdout
    assert "mismatch KP_ERROR_NO_MATCHING_SPECIALIZATION" in r.stdout, r.stdout
    assert len(r.launches()) == 2  # (a first try may meet no context: not a launch)


def test_old_bundle_links_into_a_new_library_with_the_same_entries(tmp_path):
    from kernelpack.clib import Library

    lib = Library("relinked", KPACK).build(tmp_path / "out")
    header = lib.header.read_text()
    old = (LIB / "include" / "kpdemo.h").read_text()
    for entry in ("axpy", "scale", "scale_float", "row_sum", "affine_default"):
        # the same parameters in the same order and C types (the parameter names of the launch config differ)
        new_decl = next(line for line in header.splitlines() if f" relinked_{entry}(" in line)
        old_decl = next(line for line in old.splitlines() if f" kpdemo_{entry}(" in line)
        assert _params(new_decl, "relinked") == _params(old_decl, "kpdemo"), (new_decl, old_decl)


def _params(decl: str, lib: str) -> str:
    return decl.split("(", 1)[1].replace(f"{lib}_", "").replace("kp_cfg", "launch")


@pytest.fixture(autouse=True)
def _fixtures_present():
    if not KPACK.exists():
        pytest.skip("fixtures missing")
