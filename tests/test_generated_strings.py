"""User strings are data in every file kernelpack writes: each writer is fuzzed with hostile strings and the real
consumer (C compiler, CMake, pkg-config) reads back exactly the string, or the string is refused up front.

A hostile ``[library] version`` once put a CMake command into NAMEConfigVersion.cmake that ran on ``find_package``;
versions are now PEP 440 (checked) and quoted for CMake all the same.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelpack.clib.build import cmake_version, pkgconfig
from kernelpack.core import names
from kernelpack.core.errors import KernelpackError
from toolchain_support import CC, needs_tools

HOSTILE_VERSIONS = [
    '1")\nexecute_process(COMMAND touch MARKER)\n#', "1.0.0\nexecute_process(COMMAND touch MARKER)", "${MARKER}",
    "1.0;execute_process(COMMAND touch MARKER)", "$<1:x>", '1.0"', "1.0\\", "1.0 # comment", "1.0\x00", "1.0\n",
    "", " 1.0", "v1.0", "1..0", "01.0", "1.0.0.0.0", "1.0-", "1.0+local", "a" * 100, "1.0\r\nLibs: -lmalicious",
    "1.0\nLibs: -L/tmp -lmalicious", "1.0 ${pcfiledir}", 1, None, ["1.0"],
]
GOOD_VERSIONS = ["0", "1", "1.0", "1.2.3", "10.20.30.40", "2.0.0rc1", "1.0.0-beta.2", "1.0a1", "1.4.post1", "1.0.dev3",
                 "3.1.4-rc.1", "1.0.0b2.post3.dev4"]

# every byte value, quotes, escapes, trigraphs, comment and line-splice sequences, format directives
TEXTS = st.text(st.characters(min_codepoint=1, max_codepoint=0x10FFFF, exclude_categories=("Cs",)), max_size=40)
NASTY = ["", '"', "\\", "\\\n", "*/", "/*", "??/", "??=", "%s%n", "\x00", "\n#include <x>", "*/ int evil; /*",
         "\\x41\\101", "é€😀", "\x7f\x1b[31m", "${X}", "$<X>", ";", '"; system("x"); "', "*\\", "/\\*"]


@pytest.mark.parametrize("version", HOSTILE_VERSIONS, ids=range(len(HOSTILE_VERSIONS)))
def test_hostile_versions_are_refused(version):
    with pytest.raises(KernelpackError, match="version"):
        names.check_version(version)
    with pytest.raises(KernelpackError, match="version"):
        cmake_version(version)  # type: ignore[arg-type]
    with pytest.raises(KernelpackError, match="version"):
        pkgconfig("lib", version, 1)  # type: ignore[arg-type]


def test_library_refuses_a_hostile_version_before_writing(tmp_path):
    from kernelpack.clib import Library

    with pytest.raises(KernelpackError, match="library mylib: version"):
        Library("mylib", version=HOSTILE_VERSIONS[0]).build(tmp_path / "out")
    assert not (tmp_path / "out").exists()


@needs_tools("cmake")
def test_cmake_reads_back_every_accepted_version_and_runs_nothing(tmp_path):
    script = []
    for i, v in enumerate(GOOD_VERSIONS):
        f = tmp_path / f"v{i}.cmake"
        f.write_text(cmake_version(v))
        script.append(f'set(PACKAGE_FIND_VERSION "{v}")\nset(PACKAGE_FIND_VERSION_MAJOR "{names.version_major(v)}")\n'
                      f'include("{f}")\nmessage(STATUS "v{i}=[${{PACKAGE_VERSION}}] ${{PACKAGE_VERSION_COMPATIBLE}}")')
    (tmp_path / "check.cmake").write_text("\n".join(script) + "\n")
    out = subprocess.run(["cmake", "-P", str(tmp_path / "check.cmake")], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout
    for i, v in enumerate(GOOD_VERSIONS):
        assert f"v{i}=[{v}] TRUE" in out, out
    assert not (tmp_path / "MARKER").exists()


@needs_tools("pkg-config")
def test_pkgconfig_reads_back_every_accepted_version(tmp_path):
    for i, v in enumerate(GOOD_VERSIONS):
        (tmp_path / f"lib{i}.pc").write_text(pkgconfig(f"lib{i}", v, 3))
    env = dict(os.environ, PKG_CONFIG_PATH=str(tmp_path))
    for i, v in enumerate(GOOD_VERSIONS):
        got = subprocess.run(["pkg-config", "--modversion", f"lib{i}"], capture_output=True, text=True, env=env,
                             check=True).stdout.strip()
        assert got == v


@needs_tools("cmake")
@settings(max_examples=60, deadline=None)
@given(st.lists(TEXTS.filter(lambda t: not any(ord(c) < 0x20 and c not in "\n\t\r" for c in t)
                             and "\x7f" not in t), min_size=1, max_size=12))
def test_cmake_string_round_trips(tmp_path_factory, texts):
    texts = texts + [t for t in NASTY if "\x00" not in t and "\x1b" not in t and "\x7f" not in t]
    d = tmp_path_factory.mktemp("cm")
    lines = [f"set(S{i} {names.cmake_string(t)})\nfile(WRITE \"{d}/o{i}\" \"${{S{i}}}\")" for i, t in enumerate(texts)]
    (d / "s.cmake").write_text("\n".join(lines) + "\n", encoding="utf-8")
    subprocess.run(["cmake", "-P", str(d / "s.cmake")], check=True, capture_output=True, cwd=d)
    for i, t in enumerate(texts):
        assert (d / f"o{i}").read_bytes().decode("utf-8") == t


def _run_c(tmp: Path, body: str) -> bytes:
    src, exe = tmp / "s.c", tmp / "s"
    src.write_text("#include <stdio.h>\n#include <string.h>\n" + body, encoding="ascii")
    subprocess.run([CC, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wcomment", "-Wtrigraphs",
                    "-trigraphs", str(src), "-o", str(exe)], check=True, capture_output=True, text=True)
    return subprocess.run([str(exe)], check=True, capture_output=True).stdout


@settings(max_examples=40, deadline=None)
@given(st.lists(TEXTS, min_size=1, max_size=16))
def test_c_string_literals_hold_exactly_the_text(tmp_path_factory, texts):
    texts = texts + NASTY
    d = tmp_path_factory.mktemp("cs")
    rows = "\n".join(f"    {{{names.c_string(t)}, sizeof {names.c_string(t)} - 1}}," for t in texts)
    out = _run_c(d, f"static const struct {{ const char* s; size_t n; }} T[] = {{\n{rows}\n}};\n"
                    "int main(void) { for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {\n"
                    "  fwrite(T[i].s, 1, T[i].n, stdout); fputc(0xff, stdout); } return 0; }\n")
    assert out.split(b"\xff")[:-1] == [t.encode("utf-8", "surrogateescape") for t in texts]


@settings(max_examples=40, deadline=None)
@given(st.lists(TEXTS, min_size=1, max_size=16))
def test_c_comments_stay_comments(tmp_path_factory, texts):
    texts = texts + NASTY
    d = tmp_path_factory.mktemp("cc")
    decls = "\n".join(f"/** {names.c_comment(t)} */ static const int v{i} = {i + 1};\n// {names.c_comment(t)}"
                      for i, t in enumerate(texts))
    total = " + ".join(f"v{i}" for i in range(len(texts)))
    out = _run_c(d, f"{decls}\nint main(void) {{ printf(\"%d\", {total}); return 0; }}\n")
    assert int(out) == sum(range(1, len(texts) + 1))
