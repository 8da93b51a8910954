"""The command line follows the conventions users expect (issue 30, item 2): --version, -v/--verbose, distinct
documented exit statuses (usage 2, failure 1, no binary for the device 3), a JSON error object with --json,
`inspect | head` ending quietly, a description in every --help, a build summary readable at 80 columns that gives
the link its own time. GPU-less."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import kp
from kernelpack.bundle.kpack import Bundle
from kernelpack.cli import commands
from kernelpack.core.version import __version__


@pytest.fixture(scope="module")
def bundle_file(runtime_bundle: Bundle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return runtime_bundle.write(tmp_path_factory.mktemp("cli") / "rt.kpack")


def test_version_before_or_after_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--version"], ["inspect", "--version"], ["build", "--version"]):
        with pytest.raises(SystemExit) as e:
            commands.main(argv)
        assert e.value.code == 0
        assert capsys.readouterr().out == f"kernelpack {__version__}\n"


def test_verbose_is_an_option_of_every_command(bundle_file: Path) -> None:
    for argv in (["-v", "inspect", str(bundle_file)], ["inspect", str(bundle_file), "--verbose"]):
        r = kp(*argv)
        assert r.returncode == 0, r.stderr
        assert "sha256" in r.stdout  # what -v adds to inspect: each binary's hash and provenance
    assert "sha256" not in kp("inspect", str(bundle_file)).stdout


def test_usage_errors_and_failures_have_distinct_statuses(bundle_file: Path, tmp_path: Path) -> None:
    bad_option = kp("inspect", str(bundle_file), "--bogus")
    assert bad_option.returncode == commands.EXIT_USAGE == 2
    assert "usage: kernelpack" in bad_option.stderr and "unrecognized arguments: --bogus" in bad_option.stderr
    missing_out = kp("build", "mylib", str(bundle_file))  # the direct form needs -o
    assert missing_out.returncode == 2 and "needs -o DIR" in missing_out.stderr
    unreadable = kp("inspect", str(tmp_path / "nope.kpack"))
    assert unreadable.returncode == commands.EXIT_FAILED == 1
    assert unreadable.stderr.startswith("kernelpack: error: cannot read")
    assert len({commands.EXIT_OK, commands.EXIT_FAILED, commands.EXIT_USAGE, commands.EXIT_NO_BINARY,
                commands.EXIT_INTERNAL_ERROR, commands.EXIT_INTERRUPTED, commands.EXIT_BROKEN_PIPE}) == 7


def test_json_prints_an_error_object_on_failure(tmp_path: Path) -> None:
    r = kp("inspect", str(tmp_path / "nope.kpack"), "--json")
    assert r.returncode == 1
    err = json.loads(r.stdout)["error"]
    assert err["status"] == 1 and err["kind"] == "failed" and err["type"] == "KernelpackError"
    assert err["message"].startswith("cannot read") and err["log"] is None
    r = kp("inspect", "--json")  # no file: a usage error, answered in JSON too
    err = json.loads(r.stdout)["error"]
    assert r.returncode == 2 and err["kind"] == "usage" and "the following arguments are required" in err["message"]
    (tmp_path / "kernelpack.toml").write_text('[library]\nname = "p"\narchs = ["sm90"]\n')
    r = kp("build", str(tmp_path), "--json")
    err = json.loads(r.stdout)["error"]
    assert r.returncode == 1 and err["type"] == "ProjectError" and "did you mean 'sm_90'" in err["message"]


def test_inspect_into_a_closed_pipe_ends_quietly(bundle_file: Path) -> None:
    env = dict(os.environ, KERNELPACK_CACHE_DIR="off")
    for extra in ([], ["--json"]):
        proc = subprocess.Popen([sys.executable, "-m", "kernelpack.cli", "inspect", str(bundle_file), *extra],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # `| head -0`: the reader is gone before the first write
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == commands.EXIT_BROKEN_PIPE and err == "", err


def test_inspect_device_exits_3_when_a_kernel_has_no_binary_there(bundle_file: Path) -> None:
    ok = kp("inspect", str(bundle_file), "--device", "sm_90", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["runs"] is True
    none = kp("inspect", str(bundle_file), "--device", "sm_100", "--json")
    assert none.returncode == commands.EXIT_NO_BINARY == 3
    desc = json.loads(none.stdout)
    assert desc["runs"] is False and desc["families"]["add"]["error"] == "KP_ERROR_NO_BINARY_FOR_ARCH"
    assert kp("inspect", str(bundle_file), "--device", "sm_100").returncode == 3


def test_every_subcommand_is_a_row_of_the_table_with_a_description() -> None:
    parser = commands.make_parser()
    sub = next(a for a in parser._actions if isinstance(a, commands.argparse._SubParsersAction))
    assert list(sub.choices) == [c.name for c in commands.COMMANDS]
    for c in commands.COMMANDS:
        text = sub.choices[c.name].format_help()
        assert c.description and c.description.split()[0] in text, c.name
        assert "--verbose" in text and "--debug" in text and "--version" in text


def test_the_build_summary_is_readable_at_80_columns() -> None:
    from rich.console import Console

    from kernelpack.project.report import Row
    from kernelpack.project.runner import BuildReport
    from kernelpack.project.ui import summarize

    name = "cscale_rows_kernel[f16_aligned_warps8]"
    rows = [Row(name, "triton", ["sm_80", "sm_90a"], 123456, {"sm_80": 32, "sm_90a": 40}, {"sm_80": 0},
                {"sm_80": 1024, "sm_90a": 2048}, "128x1x1", {"sm_80": 0.5}, "compiled"),
            Row("axpy", "cuda", ["sm_80", "sm_90a", "compute_90"], 1234, {"sm_80": 16}, {}, {}, "any", {}, "cached")]
    report = BuildReport(Path("kernelpack.toml"), Path("build"), jobs={"triton:c": "compiled", "cuda:a": "cached"},
                         linked=True, link_seconds=0.41, rows=rows, seconds=17.59)
    console = Console(width=80, record=True, force_terminal=False)
    summarize(report, console)
    text = console.export_text()
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines) and "…" not in text
    head = next(line for line in lines if "kernel" in line and "archs" in line)
    start, end = head.index("kernel"), head.index("archs")
    column = "".join(line[start:end].strip() for line in lines[lines.index(head) + 1:])
    assert name in column and "axpy" in column, text  # folded onto the next line, never cut
    assert "compiled" in text and "cached" in text and "128x1x1" in text
    assert "library linked in 0.41 s; 17.59 s in all" in " ".join(text.split())  # the link's own time, the build's
