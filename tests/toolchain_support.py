"""Where the tests find their tools: the CUDA toolkit (nvcc, ptxas, cuobjdump) through kernelpack's own lookups
(``KERNELPACK_NVCC``, ``CUDA_HOME``, PATH, the pip nvidia-* packages), the C compiler as kernelpack's library
builder finds it (``CC``, default ``cc``), the C++ compiler from ``CXX`` (default ``c++``), and marks that skip a
test when a tool is missing."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import pytest

from kernelpack.cli.describe import find_cuda_tool
from kernelpack.core import config
from kernelpack.frontends.cuda.toolkit import cuda_include_dirs, find_nvcc, nvrtc_available

CC = config.knobs().cc
CXX = os.environ.get("CXX") or "c++"
NVCC = find_nvcc()
CLANG = shutil.which("clang") or shutil.which("clang-14")


def _ptxas() -> str | None:
    beside = Path(NVCC).parent / "ptxas" if NVCC else None
    return str(beside) if beside and beside.is_file() else shutil.which("ptxas")


PTXAS = _ptxas()


@functools.cache
def cuobjdump() -> Path | None:
    """cuobjdump from PATH, the toolkit or the pip package nvidia-cuda-cuobjdump; None when absent."""
    found = find_cuda_tool("cuobjdump")
    return Path(found) if found else None


def cuda_include() -> Path | None:
    """The directory holding cuda.h (the toolkit's, else the pip nvidia-* packages'); None when there is none."""
    dirs = cuda_include_dirs()
    return Path(dirs[0]) if dirs else None


@functools.cache
def cuda_compiler_available() -> bool:
    """NVRTC or nvcc: what ``kernelpack.cuda.compile`` needs."""
    return nvrtc_available() or NVCC is not None


def require_nvcc() -> str:
    """nvcc's path; skips the test when there is none."""
    if NVCC is None or PTXAS is None:
        pytest.skip("nvcc/ptxas not found (KERNELPACK_NVCC, CUDA_HOME or PATH)")
    return NVCC


def missing(*tools: str) -> list[str]:
    """The ``tools`` not on PATH."""
    return [t for t in tools if shutil.which(t) is None]


def needs_tools(*tools: str) -> pytest.MarkDecorator:
    """Skip unless every one of ``tools`` is on PATH."""
    gone = missing(*tools)
    return pytest.mark.skipif(bool(gone), reason=f"needs {', '.join(tools)} ({', '.join(gone)} not found)")


needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC (cuda-bindings) is not installed")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
needs_cuda_compiler = pytest.mark.skipif(not cuda_compiler_available(), reason="no CUDA C++ compiler (NVRTC or nvcc)")
