"""The ctypes mirrors in kernelpack.runtime.cstructs have the generated header's layout (sizeof and every offsetof)."""

from __future__ import annotations

import ctypes
import subprocess

from clib_support import compile_program
from kernelpack.runtime.cstructs import KpLaunch, KpTensor


def test_ctypes_mirrors_match_the_headers_layout(clib_env, tmp_path):
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "demo.h"', "int main(void) {"]
    for struct, mirror in (("kp_launch", KpLaunch), ("kp_tensor", KpTensor)):
        lines.append(f'    printf("{struct} size %zu\\n", sizeof({struct}));')
        for name, _ in mirror._fields_:
            lines.append(f'    printf("{struct} {name} %zu\\n", offsetof({struct}, {name}));')
    lines += ["    return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = compile_program(src, tmp_path / "layout", clib_env.demo.include_dir, [])
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    want = []
    for struct, mirror in (("kp_launch", KpLaunch), ("kp_tensor", KpTensor)):
        want.append(f"{struct} size {ctypes.sizeof(mirror)}")
        want += [f"{struct} {name} {getattr(mirror, name).offset}" for name, _ in mirror._fields_]
    assert got == want
