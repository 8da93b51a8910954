"""What a capture keeps: one :class:`Launch` per recorded kernel launch (or ``cute.compile`` call), one
:class:`Skip` per thing it could not record, with the reason."""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Launch:
    """One launch, as the project needs it: which kernel (a reference the build resolves), the arguments of the call
    (Python source of an example-arguments expression), what makes its family and its specialization."""

    dsl: str  # "triton" | "cutile" | "cute"
    kernel: str  # reference: "package.module:attr", or "/abs/path/file.py:attr" (made relative when written)
    name: str  # the kernel's Python name
    call: str  # Python source of the example arguments (a dict by parameter name, or a tuple)
    family: dict[str, Any]  # what must be equal within a family (JSON)
    variant: dict[str, Any]  # what may differ between its specializations (JSON)
    options: dict[str, Any] = field(default_factory=dict)  # entry options (Triton num_warps...; CuTe options)
    grid: tuple[int, int, int] | None = None  # the grid the wrapper launched with
    grid_formula: tuple[Any, Any, Any] | None = None  # its formula of the arguments, when one was traced
    grid_args: dict[str, int] = field(default_factory=dict)  # the integer arguments (to check formulas against)
    grid_consts: dict[str, Any] = field(default_factory=dict)  # the integer constexprs
    label: str = ""  # the specialization's name, as the DSL reads its variant (element types)
    configs: tuple[str, ...] = ()  # autotune: the configs to build ("c0", ...); () for a kernel not autotuned
    chosen: str = ""  # autotune: the config this launch ran
    measured: dict[str, Any] | None = None  # on a GPU: {"key": {...}, "timings_ms": {config: ms}}
    imports: tuple[str, ...] = ()  # names ``call`` needs (values.HEADER)
    archs: tuple[str, ...] = ()  # the arch of the device the capture ran for
    source: str = ""  # which run made it
    payload: Any = None  # the DSL objects, for compiling in this process (never written)

    @property
    def qualname(self) -> str:
        return self.kernel.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Skip:
    """Something the capture could not record: what (a kernel, a script), why, and in which run."""

    what: str
    why: str
    source: str = ""

    def line(self) -> str:
        return f"{self.what}: {self.why}" + (f" [{self.source}]" if self.source else "")


def stable(obj: Any) -> str:
    """A JSON key: equal values give equal text."""
    return json.dumps(obj, sort_keys=True, default=repr)


def short_name(name: str) -> str:
    """A name for C, Python and TOML alike: characters outside ASCII letters, digits and ``_`` become ``_``, runs of
    ``_`` one, no leading/trailing ``_``; a leading digit gets ``k``, a Python keyword a trailing ``_`` (the
    example-arguments module defines a function of each family's name)."""
    n = re.sub(r"_+", "_", re.sub(r"\W", "_", name, flags=re.ASCII)).strip("_") or "kernel"
    if n[0].isdigit():
        n = f"k{n}"
    return f"{n}_" if keyword.iskeyword(n) else n
