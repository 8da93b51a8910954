"""The types a project's values must have, checked where they are read (TOML tables and Python entries alike).

Each check returns None when the value is fine, else what was expected; :func:`check` turns that into one message
naming the key, what was expected and what was given (the caller adds the file and the table). Each frontend's
entry class lists the rules of its keys (``Entry.rules``); ``[library]`` has its own in :mod:`kernelpack.project`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ..core.arch import Arch
from ..core.errors import KernelpackError

Check = Callable[[Any], "str | None"]


def given(v: Any) -> str:
    """A value as an error message shows it: its type and a short repr."""
    text = repr(v)
    return f"{type(v).__name__} {text if len(text) <= 80 else text[:77] + '...'}"


def check(key: str, value: Any, rule: Check) -> str | None:
    """The message for ``value`` of ``key`` failing ``rule``, or None."""
    expected = rule(value)
    return None if expected is None else f"key {key!r}: expected {expected}, got {given(value)}"


def rule(test: Callable[[Any], bool], expected: str) -> Check:
    """A check: None when ``test(value)``, else ``expected`` (what the message says was expected)."""
    return lambda v: None if test(v) else expected


def is_sequence(v: Any) -> bool:
    return isinstance(v, (list, tuple))


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def str_key_map(v: Any, value_ok: Callable[[Any], bool]) -> bool:
    return isinstance(v, Mapping) and all(isinstance(k, str) and value_ok(x) for k, x in v.items())


def optional(inner: Check) -> Check:
    return lambda v: None if v is None else (None if inner(v) is None else f"{inner(v)} (or leave the key out)")


def one_of(*values: str) -> Check:
    return rule(lambda v: isinstance(v, str) and v in values, "one of " + ", ".join(repr(x) for x in values))


STRING = rule(lambda v: isinstance(v, str), "a string")
NAME = optional(rule(lambda v: isinstance(v, str) and v != "", "a non-empty string"))
BOOL = rule(lambda v: isinstance(v, bool), "true or false")
POSITIVE = rule(lambda v: is_int(v) and v >= 1, "an integer >= 1")
PATH = rule(lambda v: isinstance(v, (str, os.PathLike)) and str(v) != "" and "\0" not in str(v),
            "a path (a non-empty string)")
STRINGS = rule(lambda v: is_sequence(v) and all(isinstance(x, str) for x in v), "a list of strings")
PATHS = rule(lambda v: is_sequence(v) and all(isinstance(x, (str, os.PathLike)) for x in v), "a list of paths")
def _archs(v: Any) -> str | None:
    """None for a list of arch names, else what was expected and why the first bad one is not an arch (with the
    arch it was near: ``sm90`` -> did you mean 'sm_90')."""
    expected = "a list of CUDA archs such as [\"sm_80\", \"sm_90a\"]"
    if not is_sequence(v):
        return expected
    for x in v:
        try:
            Arch.parse(x)
        except KernelpackError as e:
            return f"{expected} ({e.message})"
    return None


ARCHS: Check = _archs
TABLE = rule(lambda v: str_key_map(v, lambda x: True), "a table")
STRING_TABLE = rule(lambda v: str_key_map(v, lambda x: isinstance(x, str)), "a table of strings")
TABLES = rule(lambda v: is_sequence(v) and all(isinstance(x, Mapping) for x in v), "a list of tables")
# a reference "file.py:name" / "module:name" (in a Python project, the object itself)
REF = rule(lambda v: v is not None and not isinstance(v, (bool, int, float, list, tuple, dict)),
           "a reference such as \"kernels.py:name\"")
