"""Suggestions ("did you mean"): the nearest valid spelling of a misspelled name (a type, an arch, a kernel, a key).

One helper for every message that refuses a name out of a known set, built on the standard library's
:func:`difflib.get_close_matches` (case-insensitive; at most a few candidates, only close ones).
"""

from __future__ import annotations

from collections.abc import Iterable
from difflib import get_close_matches

CUTOFF = 0.6  # difflib's ratio below which a candidate is not offered


def close(word: str, choices: Iterable[str], n: int = 1, cutoff: float = CUTOFF) -> list[str]:
    """The valid names nearest to ``word`` (best first, at most ``n``), compared case-insensitively; [] when none is
    close or ``word`` is itself valid."""
    if not isinstance(word, str):
        return []
    names = list(dict.fromkeys(c for c in choices if isinstance(c, str)))
    if word in names:
        return []
    folded: dict[str, str] = {}
    for c in names:
        folded.setdefault(c.lower(), c)
    if word.lower() in folded:  # only the case differs: that is the one to offer
        return [folded[word.lower()]]
    return [folded[m] for m in get_close_matches(word.lower(), list(folded), n=n, cutoff=cutoff)]


def did_you_mean(word: str, choices: Iterable[str], n: int = 1, cutoff: float = CUTOFF) -> str:
    """``"; did you mean 'x'?"`` (or ``'x' or 'y'``) for the end of a message, ``""`` when nothing is close."""
    got = close(word, choices, n, cutoff)
    if not got:
        return ""
    return "; did you mean " + " or ".join(repr(g) for g in got) + "?"


def hint(word: str, choices: Iterable[str], n: int = 1, cutoff: float = CUTOFF) -> str:
    """`` (did you mean 'x'?)`` to follow the refused name in a message, ``""`` when nothing is close."""
    got = close(word, choices, n, cutoff)
    return " (did you mean " + " or ".join(repr(g) for g in got) + "?)" if got else ""
