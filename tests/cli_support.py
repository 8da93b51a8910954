"""The ``kernelpack`` command line run as users run it: a fresh ``python -m kernelpack.cli`` process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def kp(*args: str, cwd: Path | None = None, cache: str | os.PathLike[str] = "off",
       timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``kernelpack ARGS...`` in ``cwd`` with ``KERNELPACK_CACHE_DIR=cache`` ("off": no cache) and 200 columns."""
    env = dict(os.environ, KERNELPACK_CACHE_DIR=str(cache), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "kernelpack.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)
