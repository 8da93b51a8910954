"""Readers of untrusted files outside the bundle path (issue 25, item 5): tuning tables (``kernelpack build --tuning``),
a wheel's readme and license files (``kernelpack wheel``, ``kernelpack.build_meta``), and wheel names that would
replace someone else's package.

* Hostile tuning tables (the ``TABLES`` list: non-JSON numbers, deep nesting, every field of the wrong type or out of
  range, contradictions) are each refused with a TuningError naming the file, the field's path, expected and given;
  FIFOs, devices and sparse files are refused without being read (each in a time box with a cap on the address
  space it may add, so a regression fails instead of hanging or filling memory); the CLI prints one line, exit 2.
* A readme or license that is a FIFO, a device or a 10 GiB sparse file: WheelError, one line, exit 2.
* A wheel named like a packaging tool, a package of the GPU stack, an installed distribution or an installed
  package's import name (in PEP 503 spellings) is refused unless ``[library] claim_name`` names it.
GPU-less, no compiler: the bundle is made from a fixture's cubins.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import fuzz_support as fz
import kernelpack.cli as cli
from kernelpack.bundle.kpack import Bundle
from kernelpack.project import ProjectError, load_project
from kernelpack.tuning.tune import TuningError, TuningTable, bundle_sha256, embed
from kernelpack.wheel import WheelError

HERE = Path(__file__).parent
DEMO = HERE / "fixtures" / "built-2026-12-01" / "demo.kpack"
TIME_BOX_S = 10.0
HEADROOM = 64 << 20  # address space one refusal may add
SPARSE = 10 << 30
DEEP = 100_000

Table = dict[str, Any]
Edit = Callable[[Table], "Table | str | bytes"]


@pytest.fixture(scope="module")
def configs() -> Bundle:
    """Family axpy with two configs, c0 and c1 (the same cubins: the reader and embed never launch)."""
    axpy = next(a for a in Bundle.read(DEMO) if a.name == "axpy")
    return Bundle(tuple(replace(axpy, variant=v) for v in ("c0", "c1")))


def good(sha: str) -> Table:
    return {"format": 1, "bundle_sha256": sha, "arch": "sm_90a", "device": "fake",
            "families": {"axpy": {"key": ["n"], "shapes": [
                {"shape": {"n": 100}, "chosen": "axpy[c0]", "timings_ms": {"axpy[c0]": 1.0, "axpy[c1]": 2.0}},
                {"shape": {"n": 5000}, "chosen": "axpy[c1]", "timings_ms": {"axpy[c0]": 3.0, "axpy[c1]": 2.0}}]}}}


# ------------------------------------------------------------------ edits of the good table


def at(path: str, value: Any) -> Edit:
    """Set the field at ``path`` (dotted; list indices as numbers) to ``value``."""

    def edit(t: Table) -> Table:
        *parents, last = _keys(path)
        node: Any = t
        for k in parents:
            node = node[k]
        node[last] = value
        return t

    return edit


def drop(path: str) -> Edit:
    def edit(t: Table) -> Table:
        *parents, last = _keys(path)
        node: Any = t
        for k in parents:
            node = node[k]
        del node[last]
        return t

    return edit


def _keys(path: str) -> list[str | int]:
    return [int(k) if k.isdigit() else k for k in path.split("|")]


def text(old: str, new: str) -> Edit:
    """Replace the first ``old`` in the table's JSON text (for what JSON cannot hold as a value)."""
    return lambda t: json.dumps(t).replace(old, new, 1)


def raw(data: str | bytes) -> Edit:
    return lambda t: data


S0 = "families|axpy|shapes|0"
F = r"families\.axpy"
T0 = r'families\.axpy\.shapes\[0\]\.timings_ms\["axpy\[c1\]"\]'

TABLES: list[tuple[str, Edit, str]] = [  # (id, edit, what the refusal says after the file's name)
    # not JSON, or JSON no reader should take
    ("shape_value_infinity", text('"n": 100', '"n": Infinity'), r"cannot read it as JSON: Infinity is not a JSON num"),
    ("timing_nan", text('"axpy[c1]": 2.0', '"axpy[c1]": NaN'), r"cannot read it as JSON: NaN is not a JSON number"),
    ("timing_minus_infinity", text('"axpy[c1]": 2.0', '"axpy[c1]": -Infinity'), r"-Infinity is not a JSON number"),
    ("timing_1e400", text('"axpy[c1]": 2.0', '"axpy[c1]": 1e400'), T0 + r": expected a kernel time .*got number "
                                                                   r"Infinity"),
    ("arrays_nested_100000_deep", at("families", "@DEEP@"), r"nested deeper than Python's recursion limit"),
    ("objects_nested_100000_deep", at("device", "@DEEPOBJ@"), r"nested deeper than Python's recursion limit"),
    ("timing_integer_10_to_the_400", text('"axpy[c1]": 2.0', '"axpy[c1]": 1' + "0" * 400), T0 + r": expected a kernel "
                                                                                            r"time .*got number 1000"),
    ("integer_of_5000_digits", text('"n": 100', '"n": ' + "9" * 5000), r"cannot read it as JSON: .*digits"),
    ("truncated", lambda t: json.dumps(t)[:150], r"cannot read it as JSON: "),
    ("invalid_utf8", lambda t: json.dumps(t).encode().replace(b'"fake"', b'"\xff\xfe"'), r"cannot read it as JSON: "
                                                                                         r".*utf-8"),
    ("empty_file", raw(""), r"cannot read it as JSON: Expecting value"),
    ("zero_bytes", raw(b"\0" * 4096), r"cannot read it as JSON: it starts with b'\\x00"),
    ("top_level_array", raw("[]"), r"the top level: expected an object with format, .*got array \[\]"),
    # the top level
    ("format_true", at("format", True), r"format true is not 1"),
    ("format_string", at("format", "1"), r'format "1" is not 1'),
    ("format_2", at("format", 2), r"format 2 is not 1"),
    ("format_missing", drop("format"), r"not a kernelpack tuning file: the top level has no 'format'"),
    ("sha_number", at("bundle_sha256", 5), r"bundle_sha256: expected the bundle's SHA-256 as 64 lower-case hex digits"
                                           r", got number 5"),
    ("sha_short", at("bundle_sha256", "abc"), r'bundle_sha256: expected .*got string "abc"'),
    ("arch_number", at("arch", 90), r"arch: expected a CUDA arch .*got number 90"),
    ("arch_not_an_arch", at("arch", "hopper"), r'arch: expected a CUDA arch .*got string "hopper"'),
    ("device_number", at("device", 5), r"device: expected a string .*got number 5"),
    ("families_list", at("families", []), r"families: expected an object .*got array \[\]"),
    ("unknown_top_level_key", at("familes", {}), r"the top level: unknown key\(s\) 'familes'"),
    # a family
    ("family_not_object", at("families|axpy", 5), F + r": expected an object with key, shapes, got number 5"),
    ("family_unknown_key", at("families|axpy|chosen", "axpy[c0]"), F + r": unknown key\(s\) 'chosen'"),
    ("family_not_in_bundle", lambda t: {**t, "families": {"gemm": t["families"]["axpy"]}}, r"no family gemm in the "
                                                                                           r"bundle"),
    ("key_empty", at("families|axpy|key", []), F + r"\.key: expected a non-empty list .*got array \[\]"),
    ("key_string", at("families|axpy|key", "n"), F + r'\.key: expected a non-empty list .*got string "n"'),
    ("key_number", at("families|axpy|key", [1]), F + r"\.key\[0\]: expected an argument name .*got number 1"),
    ("key_twice", at("families|axpy|key", ["n", "n"]), F + r'\.key\[1\]: expected a name not given before .*"n"'),
    ("key_names_no_argument", lambda t: json.dumps(t).replace('"n"', '"m"'),
     F + r"\.key: expected integer arguments of axpy, got \['m'\]: .*names no argument \(arguments: alpha, x, y, n\)"),
    ("key_names_a_pointer", lambda t: json.dumps(t).replace('"n"', '"x"'),
     F + r"\.key: expected integer arguments of axpy, got \['x'\]: .*argument x: const f32\* has no integer value"),
    ("shapes_object", at("families|axpy|shapes", {}), F + r"\.shapes: expected a non-empty list .*got object \{\}"),
    ("shapes_empty", at("families|axpy|shapes", []), F + r"\.shapes: expected a non-empty list .*got array \[\]"),
    # a shape
    ("shape_entry_number", at(S0, 7), F + r"\.shapes\[0\]: expected an object with shape, chosen, timings_ms, got "
                                          r"number 7"),
    ("shape_entry_no_chosen", drop(f"{S0}|chosen"), F + r"\.shapes\[0\] has no 'chosen'"),
    ("shape_list", at(f"{S0}|shape", [100]), F + r"\.shapes\[0\]\.shape: expected an object .*got array \[100\]"),
    ("n_float", at(f"{S0}|shape|n", 2.5), F + r"\.shapes\[0\]\.shape\.n: expected an integer \(not a boolean, float "
                                              r"or string\) within int64, got number 2\.5"),
    ("n_float_integral", at(f"{S0}|shape|n", 100.0), F + r"\.shapes\[0\]\.shape\.n: expected an integer .*got number "
                                                         r"100\.0"),
    ("n_true", at(f"{S0}|shape|n", True), F + r"\.shapes\[0\]\.shape\.n: expected an integer .*got boolean true"),
    ("n_string", at(f"{S0}|shape|n", "100"), F + r'\.shapes\[0\]\.shape\.n: expected an integer .*got string "100"'),
    ("n_null", at(f"{S0}|shape|n", None), F + r"\.shapes\[0\]\.shape\.n: expected an integer .*got null"),
    ("n_2_to_the_70", at(f"{S0}|shape|n", 2**70), F + r"\.shapes\[0\]\.shape\.n: expected an integer .*within int64, "
                                                      r"got number 1180591620717411303424"),
    ("shape_without_key_argument", at(f"{S0}|shape", {}), F + r"\.shapes\[0\]\.shape: no value for key argument 'n'"),
    ("shape_with_other_argument", at(f"{S0}|shape|m", 3), F + r"\.shapes\[0\]\.shape\.m: 'm' is not in the key "
                                                              r"\['n'\]"),
    # chosen
    ("chosen_names_no_config", at(f"{S0}|chosen", "axpy[c9]"), F + r"\.shapes\[0\]\.chosen: expected a config label of "
                                                                   r"timings_ms \('axpy\[c0\]', 'axpy\[c1\]'\), got "
                                                                   r'string "axpy\[c9\]"'),
    ("chosen_number", at(f"{S0}|chosen", 5), F + r"\.shapes\[0\]\.chosen: expected a config label .*got number 5"),
    ("chosen_not_the_fastest", at(f"{S0}|chosen", "axpy[c1]"), F + r"\.shapes\[0\]\.chosen: expected the config with "
                                                                   r"the least time, 'axpy\[c0\]' \(1\.0 ms\), got "
                                                                   r"'axpy\[c1\]' \(2\.0 ms\)"),
    ("chosen_cannot_run", at(f"{S0}|timings_ms|axpy[c0]", None), F + r"\.shapes\[0\]\.chosen: expected the config with "
                                                                     r"the least time, 'axpy\[c1\]' .*got 'axpy\[c0\]' "
                                                                     r"\(None ms\)"),
    # timings
    ("timing_negative", at(f"{S0}|timings_ms|axpy[c1]", -1.0), T0 + r": expected a kernel time in milliseconds \(a "
                                                                    r"finite number > 0\), or null .*got number -1\.0"),
    ("timing_zero", at(f"{S0}|timings_ms|axpy[c1]", 0), T0 + r": expected a kernel time .*got number 0"),
    ("timing_string", at(f"{S0}|timings_ms|axpy[c1]", "2.0"), T0 + r': expected a kernel time .*got string "2\.0"'),
    ("timing_true", at(f"{S0}|timings_ms|axpy[c1]", True), T0 + r": expected a kernel time .*got boolean true"),
    ("timings_empty", at(f"{S0}|timings_ms", {}), F + r"\.shapes\[0\]\.timings_ms: expected a non-empty object"),
    ("timings_list", at(f"{S0}|timings_ms", [1.0]), F + r"\.shapes\[0\]\.timings_ms: expected a non-empty object .*got "
                                                        r"array \[1\.0\]"),
    ("timings_all_null", at(f"{S0}|timings_ms", {"axpy[c0]": None, "axpy[c1]": None}),
     F + r"\.shapes\[0\]\.timings_ms: expected at least one config with a time"),
    ("timing_of_no_config", at(f"{S0}|timings_ms|axpy[c7]", 5.0), F + r"\.shapes\[0\]\.timings_ms: axpy\[c7\]: not a "
                                                                      r"specialization of axpy in the bundle"),
    # contradictions
    ("same_shape_twice_other_choice", at(f"{S0}|shape|n", 5000), F + r'\.shapes\[0\] and families\.axpy\.shapes\[1\] '
                                                                     r'are the same shape \{"n": 5000\} with different '
                                                                     r"choices \('axpy\[c0\]' and 'axpy\[c1\]'\)"),
]


def materialize(edit: Edit, sha: str) -> bytes:
    """The file's bytes: the edited good table (with the deep-nesting placeholders expanded)."""
    out = edit(copy.deepcopy(good(sha)))
    data = out if isinstance(out, bytes) else (out if isinstance(out, str) else json.dumps(out)).encode()
    return (data.replace(b'"@DEEP@"', b"[" * DEEP + b"]" * DEEP)
            .replace(b'"@DEEPOBJ@"', b'{"a": ' * DEEP + b"1" + b"}" * DEEP))


def use(bundle: Bundle, path: Path) -> Bundle:
    """What ``kernelpack build`` does with ``[library] tuning`` (kernelpack.project.runner._tuned)."""
    return embed(bundle, TuningTable.read(path), source=f"[library] tuning {path}")


@pytest.mark.parametrize(("edit", "match"), [c[1:] for c in TABLES], ids=[c[0] for c in TABLES])
def test_a_hostile_tuning_table_is_refused_naming_file_field_expected_and_given(tmp_path: Path, configs: Bundle,
                                                                                edit: Edit, match: str) -> None:
    path = tmp_path / "tuning.json"
    path.write_bytes(materialize(edit, bundle_sha256(configs)))
    with fz.bounded(TIME_BOX_S, HEADROOM), pytest.raises(TuningError, match=match) as e:
        use(configs, path)
    assert str(path) in str(e.value)


@pytest.mark.parametrize("edit", [
    lambda t: t,
    at(f"{S0}|timings_ms|axpy[c1]", None),  # a config that cannot run a shape
    at(f"{S0}|timings_ms|axpy[c1]", 1.0),  # a tie: either may be chosen
    at(f"{S0}|timings_ms|axpy[c1]", 2),  # JSON has one number type
    lambda t: (t["families"]["axpy"]["shapes"].append(copy.deepcopy(t["families"]["axpy"]["shapes"][0])), t)[1],
    drop("device"),
], ids=["as_tune_writes_it", "null_timing", "tie", "integer_timing", "same_shape_twice_same_choice", "no_device"])
def test_valid_tables_are_still_accepted(tmp_path: Path, configs: Bundle, edit: Edit) -> None:
    path = tmp_path / "tuning.json"
    path.write_bytes(materialize(edit, bundle_sha256(configs)))
    tuned = use(configs, path)
    assert {a.label for a in tuned} >= {"axpy[c0_t0]"}


def test_tune_writes_what_the_build_reads_and_refuses_a_broken_timer(configs: Bundle) -> None:
    from kernelpack.tuning.tune import Problem, tune

    def load(b: Bundle) -> Any:
        class Mod:
            axpy = staticmethod(lambda *a, **k: None)
        return Mod()

    def make(shape: Any, meta: Any) -> tuple[tuple[()], dict[str, Any]]:
        return (), {}

    times = {"axpy[c0]": [1.0], "axpy[c1]": [2.0]}
    labels = iter(["axpy[c0]", "axpy[c1]"] * 100)
    t = tune(configs, {"axpy": Problem(["n"], [{"n": 4}, {"n": 64}], make)}, timer=lambda f: times[next(labels)],
             arch="sm_90a", load=load, rounds=1)
    assert TuningTable.from_json(json.loads(json.dumps(t.to_json()))) == t
    with pytest.raises(TuningError, match=r"shapes\[0\] and shapes\[1\] are the same shape \{'n': 4\}"):
        tune(configs, {"axpy": Problem(["n"], [{"n": 4}, {"n": 4}], make)}, timer=lambda f: [1.0], arch="sm_90a",
             load=load)
    with pytest.raises(TuningError, match=r"expected an integer for each key argument \['n'\]"):
        tune(configs, {"axpy": Problem(["n"], [{"n": 2.5}], make)}, timer=lambda f: [1.0], arch="sm_90a", load=load)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(TuningError, match=r"the timer gave .* ms for axpy\[c0\] on shape \{'n': 4\}; kernel times "
                                              r"are > 0"):
            tune(configs, {"axpy": Problem(["n"], [{"n": 4}], make)}, timer=lambda f, bad=bad: [bad],
                 arch="sm_90a", load=load)


# ------------------------------------------------------------------ files that are no regular file


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name -> (path, what the refusal says)."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    sparse = tmp_path / "sparse.json"
    with open(sparse, "wb") as f:
        f.truncate(SPARSE)
    zeros = tmp_path / "zeros.json"  # within the limit: refused after its first bytes
    with open(zeros, "wb") as f:
        f.truncate(1 << 30)
    folder = tmp_path / "folder.json"
    folder.mkdir()
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    return {
        "fifo": (fifo, r"is a FIFO \(named pipe\), not a regular file"),
        "dev_zero": (Path("/dev/zero"), "is a character device, not a regular file"),
        "symlink_to_dev_zero": (link, "is a character device, not a regular file"),
        "directory": (folder, "is a directory, not a regular file"),
        "sparse_10_GiB": (sparse, r"is 10\.0 GiB \(10737418240 bytes\), above the limit of 4\.0 GiB"),
        "sparse_1_GiB_of_zeros": (zeros, r"cannot read it as JSON: it starts with b'\\x00"),
    }


KINDS = ["fifo", "dev_zero", "symlink_to_dev_zero", "directory", "sparse_10_GiB", "sparse_1_GiB_of_zeros"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_tuning_file_that_is_no_regular_file_or_too_big_is_refused_unread(hostile, configs: Bundle,
                                                                           kind: str) -> None:
    path, message = hostile[kind]
    with fz.bounded(TIME_BOX_S, HEADROOM), pytest.raises(TuningError, match=message) as e:
        use(configs, path)
    assert str(path) in str(e.value)


# ------------------------------------------------------------------ kernelpack build --tuning: one line, exit 2

CUBIN_PROJECT = """[library]
name = "p"
archs = ["sm_90a"]
outputs = ["bundle"]

[[cubin]]
files = ["axpy.cubin"]
kernels = { axpy = "float alpha, const float* x, float* y, int n" }
"""


@pytest.fixture(scope="module")
def cubin_project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A project of one prebuilt cubin (nothing to compile), built once; and its untuned bundle's hash."""
    from kernelpack.core import config

    root = tmp_path_factory.mktemp("cubin_project")
    axpy = next(a for a in Bundle.read(DEMO) if a.name == "axpy")
    (root / "axpy.cubin").write_bytes(next(b.data for b in axpy.binaries if str(b.arch) == "sm_90a"))
    (root / "kernelpack.toml").write_text(CUBIN_PROJECT)
    with config.override(cache_dir=root / "cache"):
        assert cli.main(["build", "-q", "-j", "1", str(root)]) == 0
    return root, bundle_sha256(Bundle.read(root / "build" / "p.kpack"))


def _one_table(sha: str) -> Table:
    t = good(sha)
    t["families"]["axpy"]["shapes"] = [{"shape": {"n": 100}, "chosen": "axpy", "timings_ms": {"axpy": 1.0}}]
    return t


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "sparse_10_GiB", "shape_value_infinity",
                                  "arrays_nested_100000_deep", "n_true", "timing_negative", "valid"])
def test_kernelpack_build_tuning_prints_one_line_and_exits_2(cubin_project, hostile, tmp_path: Path, kind: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpack.core import config

    root, sha = cubin_project
    edits = {"shape_value_infinity": text('"n": 100', '"n": Infinity'), "arrays_nested_100000_deep":
             at("families", "@DEEP@"), "n_true": at("families|axpy|shapes|0|shape|n", True),
             "timing_negative": at("families|axpy|shapes|0|timings_ms|axpy", -1.0), "valid": lambda t: t}
    if kind in edits:
        path = tmp_path / "t.json"
        out = edits[kind](_one_table(sha))
        data = (out if isinstance(out, str) else json.dumps(out)).encode()
        path.write_bytes(data.replace(b'"@DEEP@"', b"[" * DEEP + b"]" * DEEP))
    else:
        path = hostile[kind][0]
    with config.override(cache_dir=root / "cache"), fz.bounded(60.0, 1 << 30):
        code = cli.main(["build", "-q", "-j", "1", str(root), "--tuning", str(path)])
    err = capsys.readouterr().err
    if kind == "valid":
        assert code == 0, err
        return
    assert code == 1, err
    assert err.startswith("kernelpack: error: ") and err.count("\n") == 1, err
    assert str(path) in err and "internal error" not in err


# ------------------------------------------------------------------ a wheel's readme and license

PYPROJECT = """[project]
name = "readme_kernels"
version = "1.0.0"
readme = "README.md"
license = {{ file = "LICENSE" }}

[tool.kernelpack.library]
archs = ["sm_90a"]
{claim}
[[tool.kernelpack.cubin]]
files = ["axpy.cubin"]
kernels = {{ axpy = "float alpha, const float* x, float* y, int n" }}
"""


def wheel_project(root: Path, name: str = "readme_kernels", claim: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text("# readme\n")
    (root / "LICENSE").write_text("MIT\n")
    text = PYPROJECT.format(claim=claim).replace('name = "readme_kernels"', f'name = "{name}"')
    (root / "pyproject.toml").write_text(text)
    return root


def _char_device(path: Path) -> bool:
    try:
        os.mknod(path, 0o600 | 0o020000, os.makedev(1, 5))  # /dev/zero's numbers, inside the project folder
    except PermissionError:
        return False
    return True


@pytest.mark.parametrize("which", ["README.md", "LICENSE"])
@pytest.mark.parametrize("kind", ["fifo", "char_device", "sparse_10_GiB"])
def test_a_readme_or_license_that_is_no_regular_file_or_too_big_is_refused(tmp_path: Path, which: str, kind: str,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpack.wheel import preflight

    root = wheel_project(tmp_path / "p")
    target = root / which
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
        message = r"is a FIFO \(named pipe\), not a regular file"
    elif kind == "char_device":
        if not _char_device(target):
            pytest.skip("mknod needs privileges here")
        message = "is a character device, not a regular file"
    else:
        with open(target, "wb") as f:
            f.truncate(SPARSE)
        message = r"is 10\.0 GiB \(10737418240 bytes\), above the limit"
    key = "readme" if which == "README.md" else "license"
    with fz.bounded(TIME_BOX_S, HEADROOM), pytest.raises(WheelError, match=rf"\[project\] {key} file .*{message}"):
        preflight(root)
    with fz.bounded(TIME_BOX_S, 1 << 30):
        assert cli.main(["wheel", "-q", str(root), "-o", str(tmp_path / "dist")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kernelpack: error: ") and err.count("\n") == 1 and str(target) in err, err


def test_the_pep517_backend_refuses_a_fifo_readme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelpack.build_meta as backend

    root = wheel_project(tmp_path / "p")
    (root / "README.md").unlink()
    os.mkfifo(root / "README.md")
    monkeypatch.chdir(root)
    with fz.bounded(TIME_BOX_S, 1 << 30), pytest.raises(WheelError, match="is a FIFO"):
        backend.build_wheel(str(tmp_path / "dist"))
    with fz.bounded(TIME_BOX_S, 1 << 30), pytest.raises(WheelError, match="is a FIFO"):
        backend.build_sdist(str(tmp_path / "sdist"))


def test_a_readme_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    from kernelpack.wheel import preflight

    root = wheel_project(tmp_path / "p")
    (root / "README.md").write_bytes(b"# \xff\n")
    with pytest.raises(WheelError, match=r"\[project\] readme file .*README\.md is not UTF-8 text"):
        preflight(root)


# ------------------------------------------------------------------ wheel names that are someone else's


@pytest.mark.parametrize(("name", "owner"), [
    ("pip", "a Python packaging tool"), ("setuptools", "a Python packaging tool"),
    ("wheel", "a Python packaging tool"), ("packaging", "a Python packaging tool"),
    ("torch", "a package of the GPU Python stack"), ("numpy", "a package of the GPU Python stack"),
    ("triton", "a package of the GPU Python stack"), ("jax", "a package of the GPU Python stack"),
    ("Pip", r"a Python packaging tool \(pip\)"), ("NumPy", r"GPU Python stack \(numpy\)"),
    ("cuda_python", r"GPU Python stack \(cuda-python\)"), ("Nvidia_Cutlass_DSL", r"\(nvidia-cutlass-dsl\)"),
    ("pytest", "the installed distribution pytest"),  # installed here (it runs this test), on no list
])
def test_a_wheel_named_like_someone_elses_package_is_refused(tmp_path: Path, name: str, owner: str) -> None:
    from kernelpack.wheel import preflight

    root = wheel_project(tmp_path / "p", name)
    with pytest.raises(WheelError, match=rf"\[library\] name '{name}' is the name of .*{owner}.*: installing this "
                                         rf"wheel would replace it .*\[library\] claim_name = \"{name}\""):
        preflight(root)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A site-packages folder on sys.path with: a distribution other-dist, a package whose import name differs from
    its distribution's (fancyimg, of dist fancy-image), a module file of no distribution (solo.py), and an earlier
    kernelpack wheel mykernels."""
    site = tmp_path / "venv" / "site-packages"
    for dist, name, generator, package in (("other_dist", "other-dist", "bdist_wheel (0.40.0)", "other_dist"),
                                           ("fancy_image", "fancy-image", "bdist_wheel (0.40.0)", "fancyimg"),
                                           ("mykernels", "mykernels", "kernelpack 0.1.0", "mykernels")):
        info = site / f"{dist}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "WHEEL").write_text(f"Wheel-Version: 1.0\nGenerator: {generator}\nRoot-Is-Purelib: true\n")
        (site / package).mkdir()
        (site / package / "__init__.py").write_text("")
    (site / "solo.py").write_text("")  # a module file no distribution lists
    monkeypatch.syspath_prepend(str(site))
    return site


@pytest.mark.parametrize(("name", "owner"), [
    ("other_dist", r"the name of the installed distribution other-dist 1\.0 \(in .*site-packages\)"),
    ("Other_Dist", r"the name of the installed distribution other-dist 1\.0"),
    ("fancyimg", r"the import name of an installed package \(.*site-packages/fancyimg\)"),
    ("solo", r"the import name of an installed package \(.*site-packages/solo\.py\)"),
])
def test_a_name_taken_where_the_build_runs_is_refused(site: Path, tmp_path: Path, name: str, owner: str) -> None:
    from kernelpack.wheel import preflight

    with pytest.raises(WheelError, match=rf"\[library\] name '{name}' is {owner}"):
        preflight(wheel_project(tmp_path / "p", name))


def test_rebuilding_an_installed_kernelpack_wheel_is_an_upgrade(site: Path, tmp_path: Path) -> None:
    from kernelpack.wheel import preflight

    assert preflight(wheel_project(tmp_path / "p", "mykernels")).name == "mykernels"


@pytest.mark.parametrize(("name", "claim"), [("pip", "pip"), ("Pip", "pip"), ("numpy", "NumPy"),
                                             ("other_dist", "other-dist")])
def test_claim_name_says_the_name_is_ours(site: Path, tmp_path: Path, name: str, claim: str) -> None:
    from kernelpack.wheel import preflight

    root = wheel_project(tmp_path / "p", name, claim=f'claim_name = "{claim}"')
    assert preflight(root).name == name


def test_claim_name_must_be_the_name_and_a_string(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpack.wheel import preflight

    root = wheel_project(tmp_path / "p", "pip", claim='claim_name = "torch"')
    with pytest.raises(WheelError, match=r"\[library\] claim_name = 'torch' is not the library name 'pip'"):
        preflight(root)
    root = wheel_project(tmp_path / "q", "pip", claim="claim_name = true")
    with pytest.raises(ProjectError, match=r"\[library\] key 'claim_name': expected a string, got bool True"):
        load_project(root)


def test_the_cli_and_the_pep517_backend_refuse_a_taken_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import kernelpack.build_meta as backend

    root = wheel_project(tmp_path / "p", "pip")
    assert cli.main(["wheel", "-q", str(root), "-o", str(tmp_path / "dist")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kernelpack: error: ") and err.count("\n") == 1 and "'pip'" in err, err
    monkeypatch.chdir(root)
    with pytest.raises(WheelError, match=r"\[library\] name 'pip' is the name of a Python packaging tool"):
        backend.build_wheel(str(tmp_path / "dist"))
    assert not (tmp_path / "dist").exists()


def test_names_of_no_one_still_build(tmp_path: Path) -> None:
    from kernelpack.wheel import preflight

    for name in ("readme_kernels", "mykernels2", "pip_kernels", "torchkernels"):
        assert preflight(wheel_project(tmp_path / name, name)).name == name


def test_an_sdist_refuses_a_source_above_the_limit_unread(tmp_path: Path) -> None:
    from kernelpack.wheel import build_sdist

    root = wheel_project(tmp_path / "p")
    with open(root / "axpy.cubin", "wb") as f:
        f.truncate(SPARSE)
    with fz.bounded(TIME_BOX_S, HEADROOM), pytest.raises(WheelError, match=r"sdist file .*axpy\.cubin is 10\.0 GiB"):
        build_sdist(root, tmp_path / "sdist")


def test_mutated_tables_raise_tuning_errors_only(configs: Bundle) -> None:
    """2,000 tables with 1-3 fields replaced by values of every JSON type and edge (ints past int64 and float, -0.0,
    denormals, long strings), added or deleted: each is accepted or refused with a TuningError, never another
    exception. (A 20,000-table run of the same loop: 19,130 refused, 870 accepted, 0 other exceptions.)"""
    import random

    sha = bundle_sha256(configs)
    values = [None, True, False, 0, -1, 1, 2**63, -2**63 - 1, 10**400, 0.0, -0.0, 1e-320, 1e308, 2.5, "", "n", "m",
              "axpy[c0]", "axpy[c1]", [], [1], ["n"], {}, {"n": 1}, {"axpy[c0]": 1.0}, "sm_90a", sha, "x" * 1000]
    rnd = random.Random(25)
    refused = 0
    for _ in range(2000):
        t = good(sha)
        for _ in range(rnd.randint(1, 3)):
            *parents, last = rnd.choice(list(_paths(t)))
            node: Any = t
            for k in parents:
                node = node[k]
            op = rnd.random()
            if op < 0.7:
                node[last] = copy.deepcopy(rnd.choice(values))
            elif op < 0.85 and isinstance(node, dict):
                node[rnd.choice(["n", "m", "axpy[c0]", "key", "x"])] = copy.deepcopy(rnd.choice(values))
            else:
                del node[last]
        try:
            embed(configs, TuningTable.from_json(json.loads(json.dumps(t)), "mutated"), source="mutated")
        except TuningError:
            refused += 1
    assert refused > 1500  # most mutations break the table; the rest are valid variations


def _paths(node: Any, pre: tuple[Any, ...] = ()) -> Any:
    if pre:
        yield pre
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        yield from _paths(v, (*pre, k))
