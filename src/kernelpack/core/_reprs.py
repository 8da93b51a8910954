"""Pieces of the one-line reprs of kernelpack's public objects: what matters (label, archs, sizes), never bytes, and
bounded whatever the object holds (a mangled C++ entry symbol, a thousand kernels, a deep temporary path)."""

from __future__ import annotations

from collections.abc import Iterable

MAX_REPR = 300  # characters any public object's repr stays within


def size(n: int) -> str:
    """``n`` bytes, short: ``812 B``, ``10.2 KiB``, ``3.1 MiB``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def clip_left(text: str, limit: int) -> str:
    """``text`` cut from the left (a path keeps its end: the file name)."""
    return text if len(text) <= limit else "…" + text[len(text) - limit + 1:]


def listing(names: Iterable[str], limit: int = 80) -> str:
    """Comma-separated names within ``limit`` characters: ``a, b, c, … (+12 more)``."""
    items = list(names)
    out: list[str] = []
    used = 0
    for i, n in enumerate(items):
        rest = len(items) - i
        if out and used + len(n) + 2 > limit - 12:
            return ", ".join(out) + f", … (+{rest} more)"
        out.append(clip(n, limit - 12))
        used += len(out[-1]) + 2
    return ", ".join(out)
