"""Where a value of a project file is written: the line of a key in ``[table]`` or the n-th ``[[table]]``, so an
error reads ``kernelpack.toml:12: [[cuda]] #2: key 'source': ...`` (``tomllib`` keeps no positions).

Found by reading the file's lines: table headers (``[library]``, ``[[cuda]]``, in a pyproject.toml
``[tool.kernelpack.library]``) and ``key =`` at the start of a line. A key written inside an inline table or over a
multi-line value elsewhere is not found: the message then names the table's header line, or no line.
"""

from __future__ import annotations

import re
from pathlib import Path

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]\s][^\]]*?)\s*\]\]?\s*(#.*)?$")
_PREFIXES = ("", "tool.kernelpack.")


def _key_re(key: str) -> re.Pattern[str]:
    k = re.escape(key)
    return re.compile(rf"^\s*(?:{k}|\"{k}\"|'{k}')\s*=")


def line_of(path: Path, table: str, index: int | None = None, key: str | None = None) -> int | None:
    """The 1-based line of ``key`` in table ``table`` (``index``: which ``[[table]]``, from 0; None: ``[table]``),
    the table's header line when the key is not found there, or None (no such table, the file unreadable)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    names = {p + table for p in _PREFIXES}
    want_array = index is not None
    seen = -1
    header: int | None = None
    key_re = _key_re(key) if key else None
    for n, line in enumerate(lines, 1):
        m = _HEADER.match(line)
        if m:
            if header is not None:
                break  # the table ended without the key
            is_array = m.group(1) == "[["
            if m.group(2).strip() in names and is_array == want_array:
                seen += 1
                if not want_array or seen == index:
                    header = n
            continue
        if header is not None and key_re is not None and key_re.match(line):
            return n
    return header


def where(path: Path, table: str, index: int | None = None, key: str | None = None) -> str:
    """``kernelpack.toml:12`` (the file's name and the line of the key, :func:`line_of`), or the name alone."""
    n = line_of(path, table, index, key)
    return f"{path.name}:{n}" if n is not None else path.name
