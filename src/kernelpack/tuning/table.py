"""The tuning file (``kernelpack tune`` writes it, ``kernelpack build`` reads it): its model, and a reader that
trusts nothing in it.

Format 1 (JSON)::

    {"format": 1, "bundle_sha256": "<sha256 of the untuned bundle file>", "arch": "sm_90a",
     "device": "NVIDIA H200",
     "families": {"matmul": {"key": ["M", "N", "K"],
                             "shapes": [{"shape": {"M": 128, "N": 128, "K": 64}, "chosen": "matmul[c2]",
                                         "timings_ms": {"matmul[c0]": 0.031, ...}}, ...]}}}

Every field is checked on reading (:meth:`TuningTable.from_json`); a refusal is a :class:`TuningError` naming the
file, the field's path (``families.matmul.shapes[3].timings_ms["matmul[c0]"]``), what was expected and what was
given. ``format`` is the integer 1; ``bundle_sha256`` 64 lower-case hex digits; ``arch`` a CUDA arch; ``device``
(optional) a string; no other key. Per family: ``key`` a non-empty list of distinct argument names, ``shapes`` a
non-empty list. Per shape: ``shape`` gives an integer (not a boolean, float or string; within int64) for exactly
the key's arguments; ``timings_ms`` maps config labels to a time in milliseconds, a finite number > 0, or ``null``
for a config that cannot run the shape, with at least one time; ``chosen`` names a config of ``timings_ms`` with the
least time (ties allowed). A shape listed twice must choose the same config. Whether the families, labels and key
arguments exist in the bundle is checked when the table is embedded (:func:`kernelpack.tuning.embed`).
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.arch import Arch
from ..core.errors import KernelpackError
from ..core.files import read_json
from ..launch.ranges import INT64_MAX, INT64_MIN

FORMAT = 1
_SHA256 = re.compile(r"[0-9a-f]{64}")
_ARG = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOP = ("format", "bundle_sha256", "arch", "device", "families")
_MAX_FLOAT = sys.float_info.max


class TuningError(KernelpackError):
    """A tuning file that cannot be used for this bundle (another bundle, another arch, malformed)."""


@dataclass(frozen=True)
class TunedShape:
    shape: dict[str, int]  # key argument -> value
    chosen: str  # the label of the fastest config
    timings_ms: dict[str, float]  # config label -> median kernel time (inf: the config cannot run the shape)


@dataclass(frozen=True)
class FamilyTable:
    key: tuple[str, ...]  # the integer arguments the shapes are over
    shapes: tuple[TunedShape, ...]


@dataclass(frozen=True)
class TuningTable:
    bundle_sha256: str
    arch: str
    device: str
    families: dict[str, FamilyTable] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "bundle_sha256": self.bundle_sha256, "arch": self.arch, "device": self.device,
                "families": {name: {"key": list(f.key), "shapes": [
                    {"shape": s.shape, "chosen": s.chosen,
                     "timings_ms": {k: v if math.isfinite(v) else None for k, v in s.timings_ms.items()}}
                    for s in f.shapes]}
                    for name, f in sorted(self.families.items())}}

    def write(self, path: str | Path) -> Path:
        p = Path(path)
        p.write_text(json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n")
        return p

    @classmethod
    def from_json(cls, d: Any, where: str = "tuning file") -> TuningTable:
        """The table of a parsed tuning file; TuningError naming ``where``, the field, expected and given."""
        return _Reader(where).table(d)

    @classmethod
    def read(cls, path: str | Path) -> TuningTable:
        """The tuning file at ``path``, read bounded (:func:`kernelpack.core.files.read_json`) and checked field by
        field."""
        return cls.from_json(read_json(path, "tuning file", error=TuningError), f"tuning file {path}")


# ------------------------------------------------------------------ reading


def given(v: Any) -> str:
    """A JSON value as a message shows it: its JSON type and (short) text."""
    kind = ("null" if v is None else "boolean" if isinstance(v, bool) else "number" if isinstance(v, (int, float))
            else "string" if isinstance(v, str) else "array" if isinstance(v, list) else "object")
    return f"{kind} {_text(v)}"


def _text(v: Any) -> str:
    try:
        text = json.dumps(v)
    except (TypeError, ValueError):  # not JSON (only from_json's Python callers can pass such values)
        text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def _step(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _ARG.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_time(v: Any) -> bool:
    """A kernel time: a float or int > 0 that is finite as a float (10**400 is not: float() would overflow)."""
    return type(v) in (int, float) and 0 < v <= _MAX_FLOAT


class _Reader:
    """One pass over a parsed tuning file, raising at the first field that breaks the format."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, path: str, expected: str, v: Any) -> TuningError:
        return TuningError(f"{self.where}: {path or 'the top level'}: expected {expected}, got {given(v)}")

    def obj(self, v: Any, path: str, required: tuple[str, ...], allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.fail(path, f"an object with {', '.join(required)}", v)
        missing = [k for k in required if k not in v]
        if missing:
            raise TuningError(f"{self.where}: " + ("not a kernelpack tuning file: the top level" if not path else path)
                              + f" has no {', '.join(map(repr, missing))} (expected {', '.join(allowed)}; given: "
                              f"{', '.join(map(repr, v)) or 'none'})")
        unknown = [k for k in v if k not in allowed]
        if unknown:
            raise TuningError(f"{self.where}: {path or 'the top level'}: unknown key(s) {', '.join(map(repr, unknown))}"
                              f"; expected {', '.join(allowed)}")
        return v

    def table(self, d: Any) -> TuningTable:
        if isinstance(d, dict) and "format" in d and (not _is_int(d["format"]) or d["format"] != FORMAT):
            raise TuningError(f"{self.where}: format {_text(d['format'])} is not {FORMAT} (expected the integer "
                              f"{FORMAT}: a kernelpack tuning file of format {FORMAT})")
        d = self.obj(d, "", ("format", "bundle_sha256", "arch", "families"), _TOP)
        sha = d["bundle_sha256"]
        if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
            raise self.fail("bundle_sha256", "the bundle's SHA-256 as 64 lower-case hex digits", sha)
        arch = d["arch"]
        try:
            Arch.parse(arch)
        except KernelpackError:
            raise self.fail("arch", "a CUDA arch such as \"sm_90a\"", arch) from None
        device = d.get("device", "")
        if not isinstance(device, str):
            raise self.fail("device", "a string (the GPU's name)", device)
        fams = d["families"]
        if not isinstance(fams, dict):
            raise self.fail("families", "an object {family: {key, shapes}}", fams)
        return TuningTable(sha, arch, device, {name: self.family(f, _step("families", name))
                                               for name, f in fams.items()})

    def family(self, f: Any, path: str) -> FamilyTable:
        f = self.obj(f, path, ("key", "shapes"), ("key", "shapes"))
        key = f["key"]
        if not isinstance(key, list) or not key:
            raise self.fail(f"{path}.key", "a non-empty list of the kernel's integer argument names", key)
        for i, k in enumerate(key):
            if not isinstance(k, str) or not _ARG.fullmatch(k):
                raise self.fail(f"{path}.key[{i}]", "an argument name (an identifier)", k)
            if k in key[:i]:
                raise self.fail(f"{path}.key[{i}]", "a name not given before in the key", k)
        shapes = f["shapes"]
        if not isinstance(shapes, list) or not shapes:
            raise self.fail(f"{path}.shapes", "a non-empty list of tuned shapes", shapes)
        out = tuple(self.shape(s, f"{path}.shapes[{i}]", key) for i, s in enumerate(shapes))
        seen: dict[tuple[int, ...], int] = {}
        for i, s in enumerate(out):
            j = seen.setdefault(tuple(s.shape[k] for k in key), i)
            if out[j].chosen != s.chosen:
                raise TuningError(f"{self.where}: {path}.shapes[{j}] and {path}.shapes[{i}] are the same shape "
                                  f"{json.dumps(s.shape)} with different choices ({out[j].chosen!r} and "
                                  f"{s.chosen!r}); keep one of them")
        return FamilyTable(tuple(key), out)

    def shape(self, s: Any, path: str, key: list[str]) -> TunedShape:
        s = self.obj(s, path, ("shape", "chosen", "timings_ms"), ("shape", "chosen", "timings_ms"))
        values = s["shape"]
        if not isinstance(values, dict):
            raise self.fail(f"{path}.shape", f"an object {{argument: integer}} over the key {key}", values)
        for k in key:
            if k not in values:
                raise TuningError(f"{self.where}: {path}.shape: no value for key argument {k!r} (the key is {key}); "
                                  f"given {given(values)}")
        for k, v in values.items():
            if k not in key:
                raise TuningError(f"{self.where}: {_step(f'{path}.shape', k)}: {k!r} is not in the key {key}")
            if not _is_int(v) or not INT64_MIN <= v <= INT64_MAX:
                raise self.fail(_step(f"{path}.shape", k), "an integer (not a boolean, float or string) within int64",
                                v)
        times = s["timings_ms"]
        if not isinstance(times, dict) or not times:
            raise self.fail(f"{path}.timings_ms", "a non-empty object {config label: milliseconds or null}", times)
        for label, t in times.items():
            if t is not None and not _is_time(t):
                raise self.fail(_step(f"{path}.timings_ms", label), "a kernel time in milliseconds (a finite number "
                                                                    "> 0), or null for a config that cannot run it", t)
        timed = {label: t for label, t in times.items() if t is not None}
        if not timed:
            raise self.fail(f"{path}.timings_ms", "at least one config with a time (null: cannot run the shape)", times)
        chosen = s["chosen"]
        if not isinstance(chosen, str) or chosen not in times:
            raise self.fail(f"{path}.chosen", f"a config label of timings_ms ({', '.join(map(repr, times))})", chosen)
        if times[chosen] is None or times[chosen] > min(timed.values()):
            best = min(timed, key=lambda lb: timed[lb])
            raise TuningError(f"{self.where}: {path}.chosen: expected the config with the least time, {best!r} "
                              f"({timed[best]} ms), got {chosen!r} ({times[chosen]} ms); the build follows the "
                              f"timings, so edit those to change a choice")
        return TunedShape(dict(values), chosen, {label: math.inf if t is None else float(t)
                                                 for label, t in times.items()})
