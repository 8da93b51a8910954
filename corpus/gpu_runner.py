"""What every corpus package's GPU run shares (``scripts/corpus_gpu.py --package liger|flashinfer``).

* :func:`compile_harness`: a C++ harness over a library's C entries, compiled on the GPU machine with g++ -Werror
  against the library's header and shared library (:func:`corpus.gpu_check.driver_command`) and loaded;
* :func:`python_then_cpp`: one launch through kernelpack's Python runtime, then the same launch through the C
  entry from the same starting state, the C++ result compared with Python's;
* :func:`ensure_extension`, :func:`report_file`, :func:`write_report`: the run's set-up and its report.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from .gpu_check import compare, driver_command

ROOT = Path(__file__).resolve().parents[1]


def compile_harness(source: str, lib_dir: Path, lib: str, work: Path, stem: str) -> ctypes.CDLL:
    """``source`` written to ``work/<stem>.cpp``, compiled against ``lib_dir`` (include/, lib/lib<lib>.so) into
    ``work/lib<stem>.so`` and loaded; RuntimeError with the compiler's output when it does not compile."""
    work.mkdir(parents=True, exist_ok=True)
    src, so = work / f"{stem}.cpp", work / f"lib{stem}.so"
    src.write_text(source)
    cmd = driver_command(src, lib_dir, lib, so)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(p.stderr or p.stdout)
    return ctypes.CDLL(str(so))


def ensure_extension() -> None:
    """The runtime's C extension, built in place when this python cannot import it (a run outside scripts/gpu.py)."""
    try:
        import kernelpack.runtime._launch  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=ROOT, check=False,
                       capture_output=True)


def report_file(out: Path | None, name: str, default_dir: Path) -> Path:
    """Where a report goes: ``out`` itself when it names a file, ``out/<name>`` when it is (or looks like) a folder,
    else ``$OUT/<name>`` when $OUT is set, else ``default_dir/<name>``."""
    if out is None:
        out = Path(os.environ["OUT"]) if os.environ.get("OUT") else default_dir
    return out / name if out.is_dir() or not out.suffix else out


def write_report(path: Path, text: str) -> None:
    """The report on stdout and in ``path``."""
    print(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    print(f"wrote {path}")


class CEntries(Protocol):
    def why_not(self, family: str) -> str: ...

    def call(self, family: str, values: dict[str, Any], grid: tuple[int, int, int], stream: int) -> str: ...


def python_then_cpp(tensors: Sequence[tuple[str, Any]], python: Callable[[], Any], cpp: CEntries, family: str,
                    values: dict[str, Any], grid: tuple[int, int, int], stream: int, exact: bool = True
                    ) -> tuple[list[Any], list[Any], str]:
    """Launch ``python``, then the C entry ``family`` with ``values`` from the state the tensors had before it;
    returns (the tensors before, after Python, the C++ verdict: 'pass (== Python...)', 'FAIL: ...' or 'n/a: why').
    The tensors hold C++'s result afterwards. C++ is compared with Python bit for bit when ``exact`` (the same
    binary), else at each tensor's own precision."""
    import torch

    from .gpu_run import restore_tensors

    start = [t.clone() for _, t in tensors]
    python()
    torch.cuda.synchronize()
    after = [t.clone() for _, t in tensors]
    why = cpp.why_not(family)
    if why:
        return start, after, f"n/a: {why}"
    restore_tensors([t for _, t in tensors], start)
    err = cpp.call(family, values, grid, stream)
    torch.cuda.synchronize()
    bad = [m for (n, t), p in zip(tensors, after) if (m := compare(n, p, t, exact=exact))]
    if err:
        return start, after, f"FAIL: {err}"
    return start, after, ("pass (== Python, bit for bit)" if exact else "pass (== Python)") if not bad else \
        "FAIL: " + "; ".join(bad)
