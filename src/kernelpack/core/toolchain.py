"""Running the system C toolchain (cc, ar, ld, objcopy) for the library builders, with errors that carry the log."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .errors import KernelpackError


def run_tool(cmd: Sequence[str], what: str, cwd: Path, *, hint: str = "install a C compiler and binutils") -> None:
    """Run one toolchain command; KernelpackError with the command line and its output when it fails."""
    try:
        proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:
        raise KernelpackError(f"{what}: {cmd[0]!r} not found; {hint}") from None
    if proc.returncode != 0:
        raise KernelpackError(f"{what} failed (exit {proc.returncode}): {shlex.join(cmd)}",
                              log=proc.stdout + proc.stderr)
