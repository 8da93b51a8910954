"""Incremental relink: the generated C depends only on the C API, the binaries' bytes live in the data object, and
the compiled C object is reused from the compile cache when only binaries changed."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from clib_support import add_abi, compile_program
from fake_cuda import fnv1a, run
from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.clib import Library, read_embedded_bundle
from kernelpack.core.abi import Abi, DType, Param, Pointer
from kernelpack.core.binary import Binary
from kernelpack.core.cache import CompileCache
from toolchain_support import CC, PTXAS


def _arts(env, cubin80: bytes) -> list[KernelArtifact]:
    k = env.kernels
    one = Abi((Param("out", Pointer(DType.f32)),))
    return [KernelArtifact("add", "add_f32", add_abi(DType.f32),
                           [Binary("sm_80", cubin80), Binary("sm_90a", k.cubins["90a"])], variant="f32"),
            KernelArtifact("add", "add_f64", add_abi(DType.f64), [Binary("sm_80", cubin80)], variant="f64"),
            KernelArtifact("fixed_block", "fixed_block", one, [Binary("sm_80", cubin80)])]


def _logging_cc(tmp: Path) -> tuple[str, Path]:
    """A C compiler wrapper that logs each command line (to see which builds compiled the C)."""
    log = tmp / "cc.log"
    cc = tmp / "logcc"
    cc.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nexec {CC} \"$@\"\n")
    cc.chmod(cc.stat().st_mode | stat.S_IEXEC)
    return str(cc), log


def _entries(cache: CompileCache) -> dict[str, int]:
    """How many entries of each kind the cache holds (the kind in each entry's header line)."""
    kinds: dict[str, int] = {}
    for p in cache.root.rglob("*"):
        if p.is_file():
            kind = json.loads(p.read_bytes().split(b"\n")[1])["meta"]["kind"]
            kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


MAIN = r"""
#include <stdio.h>
#include "relink.h"
int main(void) {
    kp_launch l = {{2, 1, 1}, {128, 1, 1}, 0, {0, 0, 0}, NULL, 0};
    kp_status s = relink_add(&l, (void*)0x10000, KP_F32, (void*)0x20000, KP_F32, (void*)0x30000, KP_F32, 256);
    kp_launch f = {{1, 1, 1}, {64, 1, 1}, 0, {0, 0, 0}, NULL, 0};
    kp_status b = relink_fixed_block(&f, (float*)0x1000);
    size_t size = 0;
    relink_bundle(&size);
    printf("%s %s %zu\n", relink_status_name(s), relink_status_name(b), size);
    return 0;
}
"""


def test_binary_only_change_reassembles_and_relinks_without_compiling_c(clib_env, tmp_path, fresh_cache):
    k = clib_env.kernels
    other80 = tmp_path / "o1.cubin"  # the same kernels, other bytes
    subprocess.run([PTXAS, "-arch=sm_80", "-O1", str(clib_env.root / "k80.ptx"), "-o", str(other80)], check=True)
    changed = other80.read_bytes()
    assert changed != k.cubins["80"]
    cache = fresh_cache
    cc, log = _logging_cc(tmp_path)
    first = Library("relink", *_arts(clib_env, k.cubins["80"]), cc=cc).build(tmp_path / "a", keep_sources=True,
                                                                               cache=cache)
    assert "relink.c" in log.read_text()
    log.unlink()
    second = Library("relink", *_arts(clib_env, changed), cc=cc).build(tmp_path / "b", keep_sources=True,
                                                                         cache=cache)
    commands = log.read_text().splitlines()
    assert not any("relink.c" in c for c in commands) and any("relink_data.s" in c for c in commands), commands
    assert (first.sources / "relink.c").read_text() == (second.sources / "relink.c").read_text()
    assert (first.sources / "relink.kpack").read_bytes() != (second.sources / "relink.kpack").read_bytes()
    # the headers differ only in the build id they carry (kernelpack.clib.buildid)
    assert first.build_id != second.build_id
    assert first.header.read_text().replace(first.build_id, "ID").replace(first.build_id[:16], "ID") == \
        second.header.read_text().replace(second.build_id, "ID").replace(second.build_id[:16], "ID")
    # one C object, and one memo of the generated texts (clib/memo.py: same structure, read by the second build)
    assert _entries(fresh_cache) == {"clib-object": 1, "clib-sources": 1}

    embedded = read_embedded_bundle(second.shared)
    assert embedded.to_bytes() == Library("x", *_arts(clib_env, changed)).bundle.to_bytes()
    for res, cubin in ((first, k.cubins["80"]), (second, changed)):
        src = tmp_path / "main.c"
        src.write_text(MAIN)
        exe = compile_program(src, tmp_path / f"main_{res.prefix.name}", res.include_dir,
                              [f"-L{res.lib_dir}", "-lrelink", f"-Wl,-rpath,{res.lib_dir}"])
        r = run(exe, clib_env.root, clib_env.fake, FAKECUDA_CC="8.0")
        size = len(read_embedded_bundle(res.shared).to_bytes())
        # fixed_block's REQNTID (128) comes from the data object: a 64-thread block is refused before launching
        assert r.stdout.split() == ["KP_SUCCESS", "KP_ERROR_INVALID_LAUNCH", str(size)], r.stdout + r.stderr
        loads = r.calls("cuLibraryLoadData")
        assert loads and all(r.field(x, "fnv") == fnv1a(cubin) for x in loads), loads


def test_c_object_cache_keys_on_flags_and_text(clib_env, tmp_path, fresh_cache):
    cache = fresh_cache
    arts = _arts(clib_env, clib_env.kernels.cubins["80"])
    Library("keyed", *arts).build(tmp_path / "a", cache=cache)
    Library("keyed", *arts, cflags=["-DKP_TEST_FLAG=1"]).build(tmp_path / "b", cache=cache)
    Library("keyed", *arts[:2]).build(tmp_path / "c", cache=cache)  # a kernel fewer: other C
    Library("keyed", *arts).build(tmp_path / "d", cache=cache)  # hit
    assert _entries(fresh_cache) == {"clib-object": 3, "clib-sources": 2}  # texts: the flags are not in them
    # a disabled cache still builds
    res = Library("keyed", *arts).build(tmp_path / "e", cache=CompileCache(None))
    assert res.shared.exists() and not os.path.exists(tmp_path / "e" / "share")


def test_data_object_symbols_are_hidden_and_prefixed(clib_env, tmp_path):
    res = Library("symlib", *_arts(clib_env, clib_env.kernels.cubins["80"])).build(tmp_path / "o",
                                                                                  cache=CompileCache(None))
    dynsym = subprocess.run(["nm", "-D", "--defined-only", str(res.shared)], capture_output=True, text=True,
                            check=True).stdout
    assert "kp_" not in dynsym
    syms = subprocess.run(["nm", "--defined-only", str(res.static)], capture_output=True, text=True,
                          check=True).stdout
    for name in ("symlib_kp_bundle", "symlib_kp_bins", "symlib_kp_blobs", "symlib_kp_bundle_size"):
        assert f" {name}\n" in syms
    readelf = subprocess.run(["readelf", "-sW", str(res.static)], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in readelf.splitlines() if line.rstrip().endswith("symlib_kp_bins")]
    assert rows and all("HIDDEN" in row for row in rows), rows
