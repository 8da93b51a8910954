"""What a DSL's compile error says, for kernelpack's own messages: its first diagnostic line and its full chain.

A DSL error is often a chain: CuTe DSL raises ``CompilerDiagnosticError`` (a rendered diagnostic with colour codes,
the ptxas or NVVM log in attributes) from the ``MLIRError`` that carries the raw pass failure; Triton raises
``CompilationError`` from the Python error inside the kernel. :func:`headline` is the one line that says what went
wrong, as the DSL put it (``error: ...`` with its ``-->`` location, plus the first error of a ptxas/NVVM log);
:func:`chain_log` is every exception of the chain in full (colour codes removed) followed by the traceback, for
``KernelpackError.log``.
"""

from __future__ import annotations

import re
import traceback
from pathlib import PurePath

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ERROR = re.compile(r"^\s*error(?:\[[^\]]*\])?\s*:\s*(.+?)\s*$")
_WHERE = re.compile(r"^\s*-->\s*(\S+?)(?::\d+)?\s*$")
_MAX_CHAIN = 16


def plain(text: str) -> str:
    """``text`` without terminal colour codes."""
    return _ANSI.sub("", text)


def chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first."""
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out and len(out) < _MAX_CHAIN:
        out.append(cur)
        cur = cur.__cause__ if cur.__cause__ is not None else (None if cur.__suppress_context__ else cur.__context__)
    return out


def _error_line(text: str) -> str:
    """The first ``error: ...`` line of a rendered diagnostic, with the ``-->`` location that follows it."""
    lines = plain(text).splitlines()
    for i, line in enumerate(lines):
        m = _ERROR.match(line)
        if not m:
            continue
        where = next((w.group(0).strip()[3:].strip() for w in (_WHERE.match(x) for x in lines[i + 1:i + 4]) if w),
                     "")
        return f"{m.group(1)} ({_short(where)})" if where else m.group(1)
    return ""


def _short(where: str) -> str:
    path, sep, rest = where.partition(":")
    return PurePath(path).name + sep + rest


def _backend_error(exc: BaseException) -> str:
    """The first error line of a ptxas/NVVM log the DSL attached to its diagnostic (CuTe's CompilerDiagnosticError)."""
    for attr in ("ptxas_error", "nvvm_error"):
        log = getattr(exc, attr, "")
        if isinstance(log, str) and log.strip():
            lines = [x.strip() for x in plain(log).splitlines() if x.strip()]
            return next((x for x in lines if "error" in x.lower()), lines[0])
    return ""


def headline(exc: BaseException) -> str:
    """One line saying what went wrong, as the DSL said it: the first ``error:`` diagnostic found along the chain
    (with its location and the first ptxas/NVVM error line), else ``Type: first line`` of the outermost error."""
    for e in chain(exc):
        line = _error_line(str(e))
        if line:
            backend = _backend_error(e)
            return f"{line}: {backend}" if backend and backend not in line else line
    text = plain(str(exc)).strip()
    first = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def chain_log(exc: BaseException) -> str:
    """Every exception of the chain (type and full text, colour codes removed), then the traceback."""
    parts = []
    for i, e in enumerate(chain(exc)):
        parts.append(f"[{i}] {type(e).__module__}.{type(e).__qualname__}:\n{plain(str(e)).rstrip()}")
        raw = getattr(e, "raw_error", "")
        if isinstance(raw, str) and raw.strip() and raw.strip() not in str(e):
            parts.append(f"[{i}] raw error:\n{plain(raw).rstrip()}")
    parts.append("traceback:\n" + plain("".join(traceback.format_exception(exc))).rstrip())
    return "\n\n".join(parts)
