"""Build state never executes code (issue 12, item 2): ``OUT/.kernelpack-build`` ships with build trees, so
``kernelpack build`` reads it as untrusted data. A crafted state naming a pickle (inside or outside the folder) runs
nothing; malformed state of any shape means a rebuild, never a traceback; job files are found from the job id, never
through a link; outputs the state names must be the build's own. GPU-less (NVRTC)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from kernelpack.core import config
from kernelpack.frontends.cuda.toolkit import find_nvcc, nvrtc_available
from kernelpack.project import build

pytestmark = pytest.mark.skipif(not nvrtc_available() and find_nvcc() is None, reason="no CUDA C++ compiler")

KERNEL = 'extern "C" __global__ void neg(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = -y[i]; }\n'
TOML = '[library]\nname = "st"\narchs = ["sm_90a"]\n[[cuda]]\nsource = "k.cu"\nkernels = ["neg"]\n'
JOB = "cuda:k.cu"


class Boom:
    """Unpickling this runs a shell command that creates MARKER."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def proj(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("proj")
    (root / "src").mkdir()
    (root / "src/k.cu").write_text(KERNEL)
    (root / "src/kernelpack.toml").write_text(TOML)
    with config.override(cache_dir=tmp_path_factory.mktemp("kpcache")):
        yield root / "src"


def state_of(proj: Path) -> dict[str, Any]:
    return json.loads((proj / "build/.kernelpack-build/state.json").read_text())


def write_state(proj: Path, state: Any) -> None:
    (proj / "build/.kernelpack-build/state.json").write_text(json.dumps(state))


def job_file(job_id: str, ext: str) -> str:
    return hashlib.sha256(job_id.encode()).hexdigest()[:16] + ext


def test_a_crafted_state_with_pickles_runs_nothing_and_the_build_rebuilds(proj: Path) -> None:
    build(proj, jobs=1)
    good = state_of(proj)
    marker = proj.parent / "MARKER"
    evil = pickle.dumps(Boom(marker))
    jobs = proj / "build/.kernelpack-build/jobs"
    (proj / "build/evil.pkl").write_bytes(evil)  # = build/.kernelpack-build/jobs/../../evil.pkl
    row = {k: v for k, v in good["jobs"][JOB].items() if k != "file"}
    crafted = [
        # the state of kernelpack before round 2 (version 1): a pickled host program, named by the state
        {**good, "version": 1, "digest": None, "jobs": {JOB: {**row, "kind": "host", "file": "../../evil.pkl"}}},
        # the same in the current format: a stored name is not a field the state has
        {**good, "digest": None, "jobs": {JOB: {**row, "kind": "host", "file": "../../evil.pkl"}}},
        # well-formed, with the pickle where the job's own file is and its hash in the row
        {**good, "digest": None, "jobs": {JOB: {**row, "kind": "host", "sha256": hashlib.sha256(evil).hexdigest()}}},
        {**good, "digest": None, "jobs": {JOB: {**row, "kind": "bundle", "sha256": hashlib.sha256(evil).hexdigest()}}},
    ]
    for i, state in enumerate(crafted):
        for ext in (".kpack", ".json", ".pkl"):
            (jobs / job_file(JOB, ext)).write_bytes(evil)
        write_state(proj, state)
        try:
            r = build(proj, jobs=1)
        finally:
            assert not marker.exists(), f"case {i}: unpickled a file named by the build state (ran its command)"
        assert r.jobs == {JOB: "cached"} and r.linked, i  # rebuilt (from the compile cache), not reused
        assert (proj / "build/lib/libst.so").is_file()
    assert build(proj, jobs=1).up_to_date  # and the state it wrote is good


def _kind(v: Any, like: Any) -> str:
    """A JSON value's type, as strict as the field ``like`` (a float field takes any number)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(like, float):
        return "number"
    return type(v).__name__


def _shapes(state: dict[str, Any]) -> list[tuple[str, bool, Any]]:
    """(what, malformed, state) for each field of a real state replaced by other values: ``malformed`` when the
    value has another JSON type than the field (else the state is well-formed, only different)."""
    out: list[tuple[str, bool, Any]] = [("not an object", True, []), ("a string", True, "x"), ("null", True, None),
                                        ("empty", True, {})]
    others = [None, 5, 1.5, True, "x", [], {}, [1], {"a": 1}]

    def vary(prefix: str, table: dict[str, Any], put: Any) -> None:
        for key, value in table.items():
            for bad in others:
                if bad != value or type(bad) is not type(value):
                    legit = _kind(bad, value) == _kind(value, value) or (key == "digest" and bad is None)
                    out.append((f"{prefix}{key}={bad!r}", not legit, put({**table, key: bad})))

    vary("", state, lambda t: t)
    vary("jobs row: ", state["jobs"][JOB], lambda t: {**state, "jobs": {JOB: t}})
    vary("rows[0]: ", state["rows"][0], lambda t: {**state, "rows": [t]})
    row = state["jobs"][JOB]
    outs = state["outputs"]
    out += [
        ("jobs row with an extra key", True, {**state, "jobs": {JOB: {**row, "file": "x"}}}),
        ("version as a string", True, {**state, "version": str(state["version"])}),
        ("version true", True, {**state, "version": True}),
        ("unknown key", True, {**state, "__reduce__": ["os.system", ["true"]]}),
        ("rows holding a number", True, {**state, "rows": [5]}),
        ("outputs naming a file that is not an output", True, {**state, "outputs": {**outs, "/etc/passwd": [1, 2]}}),
        ("outputs with a string stat", True, {**state, "outputs": dict.fromkeys(outs, "x")}),
        ("outputs_paths naming another file", True, {**state, "outputs_paths": {"bundle": "/etc/passwd"}}),
        ("deep nesting", True, {**state, "rows": [[[[[[[[[[[[1]]]]]]]]]]]]}),
    ]
    return out


def test_malformed_state_of_any_shape_means_a_rebuild(proj: Path) -> None:
    (proj / "kernelpack.toml").write_text(TOML.replace("[[cuda]]", 'outputs = ["bundle"]\n[[cuda]]'))  # fast: no link
    build(proj, jobs=1)
    good = copy.deepcopy(state_of(proj))
    cases = _shapes(good)
    for what, malformed, bad in cases:
        write_state(proj, bad)
        r = build(proj, jobs=1)  # never raises
        if malformed:  # nothing from it is trusted
            assert not r.up_to_date and r.jobs == {JOB: "cached"}, what
        assert state_of(proj)["version"] == good["version"], what
    for raw in (b"", b"{", b"\xff\xfe", b"[" * 100_000, b"1e999999"):
        (proj / "build/.kernelpack-build/state.json").write_bytes(raw)
        assert not build(proj, jobs=1).up_to_date
    n = sum(m for _, m, _ in cases) + 5
    print(f"{n} malformed states (+{len(cases) + 5 - n} well-formed variations): all rebuilt, 0 tracebacks")
    assert n > 150


def test_job_files_are_read_only_inside_the_jobs_folder(proj: Path) -> None:
    build(proj, jobs=1)
    d = proj / "build/.kernelpack-build"
    outside = proj.parent / "elsewhere.kpack"
    own = d / "jobs" / job_file(JOB, ".kpack")
    outside.write_bytes(own.read_bytes())
    own.unlink()
    own.symlink_to(outside)  # a link out of the folder is not followed
    write_state(proj, {**state_of(proj), "digest": None})
    r = build(proj, jobs=1)
    assert r.jobs == {JOB: "cached"} and not own.is_symlink()
    # the folders themselves as links out of the tree: replaced by real folders
    (proj.parent / "fake_jobs").mkdir()
    jobs = d / "jobs"
    for p in jobs.iterdir():
        p.unlink()
    jobs.rmdir()
    jobs.symlink_to(proj.parent / "fake_jobs", target_is_directory=True)
    write_state(proj, {**state_of(proj), "digest": None})
    assert build(proj, jobs=1).jobs == {JOB: "cached"}
    assert jobs.is_dir() and not jobs.is_symlink() and list((proj.parent / "fake_jobs").iterdir()) == []


def test_a_job_file_that_does_not_match_its_state_row_is_rebuilt(proj: Path) -> None:
    """A build killed after writing a job's file but before its state: the file is not taken for the old one."""
    build(proj, jobs=1)
    own = proj / "build/.kernelpack-build/jobs" / job_file(JOB, ".kpack")
    good = own.read_bytes()
    (proj / "k.cu").write_text(KERNEL.replace("-y[i]", "y[i] * 2.0f"))
    build(proj, jobs=1)
    changed = own.read_bytes()
    state = state_of(proj)
    (proj / "k.cu").write_text(KERNEL)  # back to the first source: its fingerprint...
    build(proj, jobs=1)
    assert own.read_bytes() == good
    own.write_bytes(changed)  # ...but the other file in place, as a killed build would leave it
    write_state(proj, {**state_of(proj), "digest": None})
    r = build(proj, jobs=1)
    assert r.jobs == {JOB: "cached"} and own.read_bytes() == good
    assert state["jobs"][JOB]["sha256"] == hashlib.sha256(changed).hexdigest()


def test_outputs_named_by_the_state_must_be_the_builds_own(proj: Path) -> None:
    build(proj, jobs=1)
    state = state_of(proj)
    foreign = proj.parent / "foreign"
    foreign.write_text("x")
    st = foreign.stat()
    write_state(proj, {**state, "outputs": {str(foreign): [st.st_size, st.st_mtime_ns]}})
    r = build(proj, jobs=1)
    assert not r.up_to_date and r.linked


def test_summary_rows_round_trip() -> None:
    from kernelpack.project.report import Row
    from kernelpack.project.state import row_from_json

    r = Row("k", "cuda", ["sm_90a"], 10, {"sm_90a": 8}, {"sm_90a": 0}, {"sm_90a": 0}, "any", {"sm_90a": 1.0})
    assert row_from_json(r.to_json()) == r
    assert row_from_json({**r.to_json(), "bytes": "10"}) is None and row_from_json({"kernel": "k"}) is None


def test_the_fast_row_check_accepts_exactly_the_rows_row_from_json_accepts() -> None:
    from kernelpack.project.report import Row
    from kernelpack.project.state import _row_shape, row_from_json

    good = Row("k", "cuda", ["sm_90a"], 10, {"sm_90a": 8}, {"sm_90a": 0}, {"sm_90a": 0}, "any", {"sm_90a": 1.0},
               warnings=["w"]).to_json()
    bad_values = [None, True, 1.5, float("nan"), float("inf"), "x", [], {}, ["x"], [1], {"a": "b"}, {"a": True},
                  {"a": 1.5}, {1: 1}, {"a": float("nan")}]
    cases = [good, {"kernel": "k"}, [], None, {**good, "extra": 1}]
    cases += [{**good, k: v} for k in good for v in bad_values]
    cases += [{**good, "occupancy": {"sm_90a": 1}}, {**good, "registers": {}}]
    for case in cases:
        assert _row_shape(case) == (row_from_json(case) is not None), case
