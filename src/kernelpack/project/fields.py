"""The types a project's values must have, checked where they are read (TOML tables and Python entries alike).

Each check returns None when the value is fine, else what was expected; :func:`check` turns that into one message
naming the key, what was expected and what was given (the caller adds the file and the table)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ..arch import Arch
from ..errors import KernelpackError

Check = Callable[[Any], "str | None"]


def given(v: Any) -> str:
    """A value as an error message shows it: its type and a short repr."""
    text = repr(v)
    return f"{type(v).__name__} {text if len(text) <= 80 else text[:77] + '...'}"


def check(key: str, value: Any, rule: Check) -> str | None:
    """The message for ``value`` of ``key`` failing ``rule``, or None."""
    expected = rule(value)
    return None if expected is None else f"key {key!r}: expected {expected}, got {given(value)}"


def _ok(test: Callable[[Any], bool], expected: str) -> Check:
    return lambda v: None if test(v) else expected


def _sequence(v: Any) -> bool:
    return isinstance(v, (list, tuple))


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _str_key_map(v: Any, value_ok: Callable[[Any], bool]) -> bool:
    return isinstance(v, Mapping) and all(isinstance(k, str) and value_ok(x) for k, x in v.items())


def _arch(v: Any) -> bool:
    if not isinstance(v, str):
        return False
    try:
        Arch.parse(v)
    except KernelpackError:
        return False
    return True


def optional(rule: Check) -> Check:
    return lambda v: None if v is None else (None if rule(v) is None else f"{rule(v)} (or leave the key out)")


def one_of(*values: str) -> Check:
    return _ok(lambda v: isinstance(v, str) and v in values, "one of " + ", ".join(repr(x) for x in values))


STRING = _ok(lambda v: isinstance(v, str), "a string")
NAME = optional(_ok(lambda v: isinstance(v, str) and v != "", "a non-empty string"))
BOOL = _ok(lambda v: isinstance(v, bool), "true or false")
POSITIVE = _ok(lambda v: _int(v) and v >= 1, "an integer >= 1")
PATH = _ok(lambda v: isinstance(v, (str, os.PathLike)) and str(v) != "" and "\0" not in str(v),
           "a path (a non-empty string)")
STRINGS = _ok(lambda v: _sequence(v) and all(isinstance(x, str) for x in v), "a list of strings")
PATHS = _ok(lambda v: _sequence(v) and all(isinstance(x, (str, os.PathLike)) for x in v), "a list of paths")
ARCHS = _ok(lambda v: _sequence(v) and all(_arch(x) for x in v),
            "a list of CUDA archs such as [\"sm_80\", \"sm_90a\"]")
TABLE = _ok(lambda v: _str_key_map(v, lambda x: True), "a table")
STRING_TABLE = _ok(lambda v: _str_key_map(v, lambda x: isinstance(x, str)), "a table of strings")
TABLES = _ok(lambda v: _sequence(v) and all(isinstance(x, Mapping) for x in v), "a list of tables")
# a reference "file.py:name" / "module:name" (in a Python project, the object itself)
REF = _ok(lambda v: v is not None and not isinstance(v, (bool, int, float, list, tuple, dict)),
          "a reference such as \"kernels.py:name\"")

KERNELS = _ok(lambda v: (isinstance(v, str) and v != "") or (_sequence(v) and len(v) > 0 and all(
    isinstance(x, str) for x in v)) or (_str_key_map(v, lambda x: isinstance(x, str)) and len(v) > 0),
    "a non-empty list of kernel names or C++ name expressions, or a table {name = \"expression\"}")
DEFINES = _ok(lambda v: _str_key_map(v, lambda x: x is None or isinstance(x, str) or _int(x)),
              "a table of macro values (strings or integers)")
TRITON_SIGNATURE = _ok(lambda v: _str_key_map(v, lambda x: isinstance(x, str)) or (
    _sequence(v) and all(isinstance(x, str) for x in v)), "a table {param = \"type\"} or a list of types")

ENTRY: dict[str, Check] = {"archs": optional(ARCHS), "depends": STRINGS}
FIELDS: dict[str, dict[str, Check]] = {
    "cuda": {"source": PATH, "kernels": KERNELS, "options": STRINGS, "defines": DEFINES, "include_dirs": PATHS,
             "maxrregcount": optional(POSITIVE), "lineinfo": BOOL, "signatures": optional(STRING_TABLE),
             "compiler": optional(one_of("nvrtc", "nvcc"))},
    "triton": {"kernel": REF, "signature": TRITON_SIGNATURE, "name": NAME, "constexprs": TABLE,
               "num_warps": POSITIVE, "num_stages": POSITIVE, "num_ctas": POSITIVE, "specializations": TABLES,
               "options": TABLE},
    "cutile": {"kernel": REF, "name": NAME, "signatures": _ok(lambda v: v is not None and not isinstance(
        v, (bool, int, float)), "a reference such as \"kernels.py:SIGNATURES\" (or the signatures themselves)")},
    "cute": {"function": REF, "example_args": REF, "name": NAME, "variants": optional(TABLE),
             "args": lambda v: None, "init": TABLE, "mode": one_of("kernel", "host"), "options": STRING,
             "zero_extent": one_of("skip", "error")},  # cute_host.program.ZERO_EXTENT_POLICIES
}
LIBRARY: dict[str, Check] = {"name": STRING, "archs": ARCHS, "out": PATH, "outputs": STRINGS, "version": STRING,
                             "cflags": STRINGS, "include": STRINGS}
