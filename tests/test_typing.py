"""The public API is typed (issue 30, item 4): ``mypy --strict`` passes on a user's script that uses every public verb
(typing_scripts/user_script.py), and sees the mistakes of typing_scripts/user_mistakes.py (kernels are typed
``kernelpack.Kernel``, not ``Any``); the public classes are top-level names and ``dir(kernelpack)`` lists only public
names."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import kernelpack

HERE = Path(__file__).parent / "typing_scripts"
SRC = Path(kernelpack.__file__).parents[1]


@pytest.fixture(scope="module")
def mypy_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[int, str]]]:
    """mypy --strict over both scripts, once: (line, error code) per file."""
    pytest.importorskip("mypy")
    cache = tmp_path_factory.mktemp("mypy_cache")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-color-output",
                           "--cache-dir", str(cache), str(HERE / "user_script.py"), str(HERE / "user_mistakes.py")],
                          capture_output=True, text=True, timeout=300, env={"MYPYPATH": str(SRC),
                                                                            "PATH": "/usr/bin:/bin"})
    assert "error:" in proc.stdout or proc.returncode == 0, proc.stdout + proc.stderr
    out: dict[str, list[tuple[int, str]]] = {"user_script.py": [], "user_mistakes.py": []}
    for m in re.finditer(r"^.*?([\w.]+):(\d+): error: .*\[([\w-]+)\]$", proc.stdout, re.M):
        out.setdefault(m.group(1), []).append((int(m.group(2)), m.group(3)))
    return out


def test_mypy_strict_passes_on_a_script_using_every_public_verb(mypy_report) -> None:
    assert mypy_report["user_script.py"] == []


def test_mypy_sees_a_users_mistakes_in_kernel_calls(mypy_report) -> None:
    lines = (HERE / "user_mistakes.py").read_text().splitlines()
    want = [(i + 1, m.group(1)) for i, line in enumerate(lines) if (m := re.search(r"# error: ([\w-]+)$", line))]
    assert len(want) >= 5 and sorted(mypy_report["user_mistakes.py"]) == want


def test_public_classes_are_top_level_names_and_dir_is_the_public_api() -> None:
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.runtime import DriverError, KernelModule

    assert kernelpack.Bundle is Bundle and kernelpack.KernelModule is KernelModule
    assert kernelpack.DriverError is DriverError and kernelpack.Kernel.__name__ == "Kernel"
    names = dir(kernelpack)
    assert not [n for n in names if n.startswith("_") and n != "__version__"], names
    assert "TYPE_CHECKING" not in names and "annotations" not in names
    assert {"load", "Bundle", "Library", "cuda", "triton", "cutile", "cute", "prebuilt"} <= set(names)
    for n in names:  # every name dir() lists is there
        assert getattr(kernelpack, n) is not None
