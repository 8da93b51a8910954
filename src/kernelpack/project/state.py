"""What ``kernelpack build`` keeps between builds, in ``OUT/.kernelpack-build/``: ``state.json`` and one output file
per job under ``jobs/`` (its SHA-256 in the state: a file that a killed build replaced without writing the state is
not taken for the one the state describes).

The folder ships with build trees, so it is read as untrusted data: JSON only (no pickle, nothing executed), every
field's shape checked (anything unexpected means "no state": a full rebuild, never a traceback), job files named by
this module from the job id and read only as regular files inside ``jobs/`` (a name stored in the state is never
used), output paths accepted only when they are the outputs this build writes. Job files are decoded by the bundle
and host-program readers, which refuse malformed input; one that fails is rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import stat
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from .report import Row

STATE_VERSION = 2  # 2: host programs as JSON (kernelpack.bundle.host_serial), job files named from the job id
STATE_DIR = ".kernelpack-build"
KINDS = {"bundle": ".kpack", "host": ".json"}  # job output kind -> file suffix
MAX_STATE_BYTES = 64 << 20


def job_file(job_id: str, kind: str) -> str:
    """The file name of a job's output: derived from the id, ``[0-9a-f]{16}.(kpack|json)``."""
    return hashlib.sha256(job_id.encode()).hexdigest()[:16] + KINDS[kind]


def prepare(d: Path) -> None:
    """``d`` and ``d/jobs`` as real folders (a link or a file in their place is removed), without the temp files of
    an interrupted build."""
    for folder in (d, d / "jobs"):
        if os.path.islink(folder) or (os.path.lexists(folder) and not folder.is_dir()):
            folder.unlink()
        folder.mkdir(parents=True, exist_ok=True)
        for p in folder.iterdir():
            if p.name.endswith(".tmp") and not p.is_dir():
                p.unlink(missing_ok=True)


def read_job(d: Path, job_id: str, kind: str) -> bytes | None:
    """A previous job output, or None (missing, not a regular file, or its folder is a link)."""
    jobs = d / "jobs"
    if os.path.islink(d) or os.path.islink(jobs):
        return None
    path = jobs / job_file(job_id, kind)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read()


def save_job(d: Path, job_id: str, kind: str, data: bytes) -> None:
    path = d / "jobs" / job_file(job_id, kind)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def read_state(d: Path, outputs: Collection[str]) -> dict[str, Any]:
    """The previous build's state, or {} when there is none or any part of it is not what :func:`write` writes.
    ``outputs``: the output paths this build may write (the only ones a state may name)."""
    path = d / "state.json"
    try:
        if os.path.islink(d) or not stat.S_ISREG(os.lstat(path).st_mode) or os.path.getsize(path) > MAX_STATE_BYTES:
            return {}
        state = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    return state if valid(state, outputs) else {}


def encode(state: dict[str, Any]) -> str:
    # compact: json's C encoder (an indent means its pure-Python one, ~5x slower on a 1,000-kernel state)
    return json.dumps(state, sort_keys=True, separators=(",", ":"))


def write(d: Path, state: dict[str, Any]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / "state.json.tmp"
    tmp.write_text(encode(state))
    os.replace(tmp, d / "state.json")


# ------------------------------------------------------------------------------------------------ shapes


def valid(state: Any, outputs: Collection[str]) -> bool:
    """Whether ``state`` has exactly the shapes a build writes (types of every field; output paths in
    ``outputs``)."""
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION or type(state["version"]) is not int:
        return False
    checks: dict[str, Callable[[Any], bool]] = {
        "version": lambda v: True,
        "digest": lambda v: v is None or isinstance(v, str),
        "library_stamp": lambda v: isinstance(v, str),
        "jobs": lambda v: _dict_of(v, _job_row),
        "outputs": lambda v: _dict_of(v, _stat_value) and set(v) <= set(outputs),
        "outputs_paths": lambda v: _dict_of(v, lambda p: isinstance(p, str) and p in outputs),
        "rows": lambda v: isinstance(v, list) and all(_row_shape(r) for r in v),
        "row_keys": lambda v: _dict_of(v, lambda k: isinstance(k, str) and len(k) == 64),
    }
    return set(state) <= set(checks) and all(checks[k](v) for k, v in state.items())


def _dict_of(v: Any, ok: Callable[[Any], bool]) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and ok(x) for k, x in v.items())


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _job_row(v: Any) -> bool:
    return (isinstance(v, dict) and set(v) - {"dropped"} == {"fingerprint", "kind", "seconds", "sha256"}
            and isinstance(v["fingerprint"], str) and isinstance(v["kind"], str) and v["kind"] in KINDS
            and _num(v["seconds"]) and isinstance(v["sha256"], str) and len(v["sha256"]) == 64
            and ("dropped" not in v or _dropped(v["dropped"])))


def _dropped(v: Any) -> bool:
    """A job's configs left out for an arch: [[kernel, config label, arch, reason], ...]."""
    return isinstance(v, list) and all(isinstance(d, list) and len(d) == 4 and _str_list(d) for d in v)


def _stat_value(v: Any) -> bool:
    return v is None or (isinstance(v, list) and len(v) == 2 and all(_int(x) for x in v))


_ROW_FIELDS: dict[str, Callable[[Any], bool]] = {
    "kernel": lambda v: isinstance(v, str), "frontend": lambda v: isinstance(v, str),
    "archs": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "bytes": _int,
    "registers": lambda v: _dict_of(v, _int), "spills": lambda v: _dict_of(v, _int),
    "smem": lambda v: _dict_of(v, _int), "block": lambda v: isinstance(v, str),
    "occupancy": lambda v: _dict_of(v, _num), "status": lambda v: isinstance(v, str),
    "warnings": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
}


_ROW_KEYS = frozenset(_ROW_FIELDS)


def _str_list(v: Any) -> bool:
    if type(v) is not list:
        return False
    for x in v:
        if type(x) is not str:
            return False
    return True


def _map_of(v: Any, num: bool) -> bool:
    """A dict of str -> int (``num``: -> finite int or float), as JSON gives them (no bool)."""
    if type(v) is not dict:
        return False
    for k, x in v.items():
        t = type(x)
        if type(k) is not str or not (t is int or (num and t is float and math.isfinite(x))):
            return False
    return True


def _row_shape(r: Any) -> bool:
    """Whether ``r`` is a summary row as ``Row.to_json`` writes it (what :func:`row_from_json` accepts, checked
    without building the row: a no-op rebuild checks every row of the state)."""
    if type(r) is not dict or r.keys() != _ROW_KEYS:
        return False
    return (type(r["kernel"]) is str and type(r["frontend"]) is str and type(r["block"]) is str
            and type(r["status"]) is str and type(r["bytes"]) is int and _str_list(r["archs"])
            and _str_list(r["warnings"]) and _map_of(r["registers"], False) and _map_of(r["spills"], False)
            and _map_of(r["smem"], False) and _map_of(r["occupancy"], True))


def row_from_json(r: Any) -> Row | None:
    """A summary row as ``Row.to_json`` wrote it, or None."""
    if not isinstance(r, dict) or set(r) != set(_ROW_FIELDS) or not all(_ROW_FIELDS[k](v) for k, v in r.items()):
        return None
    with contextlib.suppress(TypeError):
        return Row(**r)
    return None
