"""The sources stay lint-clean (ruff) and type-check (mypy, with the stubs of the C extensions) as they change."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_sources_tests_and_benchmarks_pass_ruff() -> None:
    pytest.importorskip("ruff", reason="ruff is not installed (pip install -e '.[dev]')")
    out = _run("ruff", "check", "src", "tests", "bench", "scripts", "examples")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_the_package_type_checks_with_mypy() -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[dev]')")
    out = _run("mypy", "src")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
