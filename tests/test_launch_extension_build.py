"""The C launch path (``src/kernelpack/runtime/_launch.c``) compiles warning-free for every CPython it is built for:
the running interpreter's headers, and the limited API (``KERNELPACK_BUILD_ABI3=1``: abi3, CPython >= 3.12) against
every CPython >= 3.12 whose headers are on this machine (the running one, ``$KERNELPACK_TEST_PY_INCLUDES``, pyenv's).
A call outside the limited API slipped into the abi3 build once (the lazy-doc getter) and nothing built that variant.
``_launch.c`` is the extension's one translation unit: it includes its parts (``_launch_*.c``), and a part it does not
include would be compiled by nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "kernelpack" / "runtime" / "_launch.c"
INCLUDES = [f"-I{ROOT / 'src' / 'kernelpack' / 'runtime'}", f"-I{ROOT / 'src' / 'kernelpack' / 'csrc'}"]
CC = shutil.which("gcc") or shutil.which("cc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")


def _compile(include: str, *defines: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CC or "cc", "-std=c11", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", *defines,
                           f"-I{include}", *INCLUDES, str(SOURCE)], capture_output=True, text=True, check=False)


def _headers_312_up() -> list[str]:
    """Include directories of CPython >= 3.12 found here (deduplicated)."""
    found = []
    if sys.version_info >= (3, 12):
        found.append(sysconfig.get_paths()["include"])
    found += [p for p in os.environ.get("KERNELPACK_TEST_PY_INCLUDES", "").split(os.pathsep) if p]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found += [str(p) for p in sorted(pyenv.glob("3.*/include/python3.*"))
              if (m := re.search(r"python3\.(\d+)$", str(p))) and int(m.group(1)) >= 12]
    return [p for p in dict.fromkeys(found) if (Path(p) / "Python.h").is_file()
            and not (Path(p) / "pyconfig.h").read_text(errors="replace").count("#define Py_GIL_DISABLED 1")]


def test_the_launch_path_compiles_warning_free_for_this_interpreter():
    got = _compile(sysconfig.get_paths()["include"])
    assert got.returncode == 0, got.stderr[-3000:]


@pytest.mark.parametrize("include", _headers_312_up() or [pytest.param("", marks=pytest.mark.skip(
    reason="no CPython >= 3.12 headers here (the abi3 build needs 3.12's limited API)"))])
def test_the_abi3_build_of_the_launch_path_uses_only_the_limited_api(include):
    got = _compile(include, "-DPy_LIMITED_API=0x030C0000")
    assert got.returncode == 0, f"{include}:\n{got.stderr[-3000:]}"


def test_the_launch_source_includes_every_part_once():
    parts = sorted(p.name for p in SOURCE.parent.glob("_launch_*.c"))
    included = re.findall(r'^#include "(_launch_\w+\.c)"', SOURCE.read_text(), flags=re.M)
    assert parts, "no _launch_*.c parts next to _launch.c"
    assert sorted(included) == parts and len(set(included)) == len(included), (included, parts)
