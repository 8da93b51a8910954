"""The corpus GPU runs' shared runner (corpus/gpu_runner.py), GPU-lessly: C++ runs from the state Python started
from and is compared with Python's result; a C parameter list is read one way for every harness; reports go where
--out says."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from corpus.gpu_check import split_params  # noqa: E402
from corpus.gpu_runner import python_then_cpp, report_file  # noqa: E402

torch = pytest.importorskip("torch")


class FakeCpp:
    """A C entry that scales ``x`` in place by ``factor`` (what it saw first is kept), or refuses."""

    def __init__(self, factor: float, why: str = "", err: str = "") -> None:
        self.factor, self.why, self.err, self.seen = factor, why, err, []

    def why_not(self, family: str) -> str:
        return self.why

    def call(self, family: str, values: dict[str, Any], grid: tuple[int, int, int], stream: int) -> str:
        self.seen.append(values["x"].clone())
        values["x"].mul_(self.factor)
        return self.err


@pytest.fixture(autouse=True)
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)


def _run(cpp: FakeCpp, exact: bool = True) -> tuple[Any, list[Any], list[Any], str]:
    x = torch.arange(4, dtype=torch.float32)
    start, after, verdict = python_then_cpp([("x", x)], lambda: x.mul_(2), cpp, "fam", {"x": x}, (1, 1, 1), 0,
                                            exact=exact)
    return x, start, after, verdict


def test_cpp_starts_from_the_state_python_started_from_and_matches_it() -> None:
    cpp = FakeCpp(2.0)
    x, start, after, verdict = _run(cpp)
    assert torch.equal(cpp.seen[0], torch.arange(4, dtype=torch.float32))  # restored before the C++ call
    assert torch.equal(start[0], cpp.seen[0]) and torch.equal(after[0], x)
    assert verdict == "pass (== Python, bit for bit)"
    assert _run(FakeCpp(2.0), exact=False)[3] == "pass (== Python)"


def test_cpp_that_differs_fails_naming_the_tensor_and_an_error_or_refusal_is_reported() -> None:
    assert _run(FakeCpp(3.0))[3].startswith("FAIL: x: 3 of 4 elements differ")
    assert _run(FakeCpp(2.0, err="status 7: bad"))[3] == "FAIL: status 7: bad"
    assert _run(FakeCpp(2.0, why="no C entry fam"))[3] == "n/a: no C entry fam"


def test_a_c_parameter_list_gives_types_with_their_stars_and_void_gives_none() -> None:
    assert split_params("const kp_launch* kp_cfg, float *x, int32_t  n, const uint8_t **pp, void* stream") == [
        ("const kp_launch*", "kp_cfg"), ("float*", "x"), ("int32_t", "n"), ("const uint8_t**", "pp"),
        ("void*", "stream")]
    assert split_params("void") == [] and split_params(" ") == []


def test_reports_go_to_a_named_file_or_into_a_folder_or_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OUT", raising=False)
    assert report_file(tmp_path / "r.md", "x.md", Path("/d")) == tmp_path / "r.md"
    assert report_file(tmp_path, "x.md", Path("/d")) == tmp_path / "x.md"
    assert report_file(tmp_path / "new", "x.md", Path("/d")) == tmp_path / "new" / "x.md"
    assert report_file(None, "x.md", Path("/d")) == Path("/d/x.md")
    monkeypatch.setenv("OUT", str(tmp_path))
    assert report_file(None, "x.md", Path("/d")) == tmp_path / "x.md"
