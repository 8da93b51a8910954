"""Every user error is a KernelpackError (issue 12, item 7): project-file values of the wrong type or shape name the
file, the table, the key, what was expected and what was given; the CLI prints one line on stderr and exits 1 (also
with -q; issue 30: 2 is a usage error), 70 for an internal error, 130 when interrupted; --debug adds the traceback;
-o pointing at a file is refused before any work. GPU-less."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kernelpack.cli as cli
from kernelpack.project import Cuda, ProjectError, load_project

LIB = '[library]\nname = "p"\narchs = ["sm_90a"]\n'
CUDA = '[[cuda]]\nsource = "k.cu"\nkernels = ["neg"]\n'
KERNEL = 'extern "C" __global__ void neg(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = -y[i]; }\n'

CASES = [  # (TOML, the message: file, table, key, expected, given)
    ('library = "x"\n', r"kernelpack.toml(:\d+)?: library must be a table .*got str 'x'"),
    ('[library]\nname = "p"\nout = 5\n', r"kernelpack.toml(:\d+)?: \[library\] key 'out': expected a path .*got int 5"),
    (LIB + '[[cuda]]\nsource = 5\nkernels = ["neg"]\n',
     r"kernelpack.toml(:\d+)?: \[\[cuda\]\] #1: key 'source': expected a path .*got int 5"),
    (LIB + CUDA + '[[cuda]]\nsource = "k.cu"\nkernels = 5\n',
     r"kernelpack.toml(:\d+)?: \[\[cuda\]\] #2: key 'kernels': expected a non-empty list of kernel names.*got int 5"),
    (f'[library]\nname = "{"a" * 250}"\n', r"kernelpack.toml(:\d+)?: \[library\] name a+\.\.\. is 250 characters "
                                           r"long; at most 64"),
    ('[library]\nname = "../../x"\n', r"kernelpack.toml(:\d+)?: \[library\] name must be an identifier .*got "
                                      r"'../../x'"),
    ('[library]\nname = "a/b"\n', r"\[library\] name must be an identifier .*got 'a/b'"),
    ('[library]\nname = "a\\u0000b"\n', r"\[library\] name must be an identifier .*got 'a\\x00b'"),
    ('[library]\nname = "stdio"\n', r"\[library\] name 'stdio' is the name of a standard or CUDA header"),
    ('[library]\nname = "p"\narchs = [90]\n', r"\[library\] key 'archs': expected a list of CUDA archs .*got "
                                            r"list \[90\]"),
    ('[library]\nname = "p"\narchs = "sm_90a"\n', r"\[library\] key 'archs': expected a list .*got str 'sm_90a'"),
    (LIB + CUDA + "archs = [90]\n", r"\[\[cuda\]\] #1: key 'archs': expected a list of CUDA archs .*got list \[90\]"),
    (LIB + CUDA + 'archs = ["sm_9"]\n', r"\[\[cuda\]\] #1: key 'archs'.*got list \['sm_9'\]"),
    ('[library]\nname = "p"\nversion = 1\n', r"\[library\] key 'version': expected a string, got int 1"),
    ('[library]\nname = "p"\nversion = "1.0\\n; x"\n', r"\[library\] version must be a version such as 1.2.3"),
    ('[library]\nname = "p"\noutputs = "bundle"\n', r"\[library\] key 'outputs': expected a list of strings"),
    ('[library]\nname = "p"\noutputs = ["lib"]\n', r"\[library\] outputs: unknown \['lib'\]"),
    ('[library]\nname = "p"\ncflags = [1]\n', r"\[library\] key 'cflags': expected a list of strings, got list \[1\]"),
    ('[library]\nname = "p"\ninclude = "m.py"\n', r"\[library\] key 'include': expected a list of strings"),
    (LIB + '[cuda]\nsource = "k.cu"\n', r"cuda must be an array of tables \(\[\[cuda\]\] above each entry's keys\), "
                                        r"got dict"),
    ("cuda = 5\n" + LIB, r"cuda must be an array of tables .*got int 5"),
    (LIB + CUDA + "options = '-O3'\n", r"#1: key 'options': expected a list of strings, got str '-O3'"),
    (LIB + CUDA + "defines = { X = true }\n", r"key 'defines': expected a table of macro values"),
    (LIB + CUDA + "defines = ['X']\n", r"key 'defines': expected a table of macro values .*got list"),
    (LIB + CUDA + "include_dirs = 'inc'\n", r"key 'include_dirs': expected a list of paths"),
    (LIB + CUDA + "maxrregcount = '32'\n", r"key 'maxrregcount': expected an integer >= 1 .*got str '32'"),
    (LIB + CUDA + "maxrregcount = 0\n", r"key 'maxrregcount': expected an integer >= 1"),
    (LIB + CUDA + "lineinfo = 1\n", r"key 'lineinfo': expected true or false, got int 1"),
    (LIB + CUDA + "signatures = ['float a']\n", r"key 'signatures': expected a table of strings"),
    (LIB + CUDA + "compiler = 'gcc'\n", r"key 'compiler': expected one of 'nvrtc', 'nvcc'"),
    (LIB + CUDA + "depends = '*.h'\n", r"key 'depends': expected a list of strings"),
    (LIB + '[[triton]]\nkernel = 5\n', r"\[\[triton\]\] #1: key 'kernel': expected a reference"),
    (LIB + '[[triton]]\nkernel = "t.py:k"\nnum_warps = "4"\n', r"key 'num_warps': expected an integer >= 1"),
    (LIB + '[[triton]]\nkernel = "t.py:k"\nsignature = 5\n', r"key 'signature': expected a table"),
    (LIB + '[[triton]]\nkernel = "t.py:k"\nspecializations = [1]\n', r"key 'specializations': expected a list of "
                                                                   r"tables"),
    (LIB + '[[triton]]\nkernel = "t.py:k"\nconstexprs = [1]\n', r"key 'constexprs': expected a table"),
    (LIB + '[[cutile]]\nkernel = "t.py:k"\nsignatures = 5\n', r"\[\[cutile\]\] #1: key 'signatures'"),
    (LIB + '[[cute]]\nfunction = "c.py:f"\nexample_args = "c.py:a"\nmode = "jit"\n',
     r"\[\[cute\]\] #1: key 'mode': expected one of 'kernel', 'host', 'auto', got str 'jit'"),
    (LIB + '[[cute]]\nfunction = "c.py:f"\nexample_args = "c.py:a"\nvariants = [1]\n', r"key 'variants'"),
    (LIB + '[[cute]]\nfunction = "c.py:f"\nexample_args = "c.py:a"\nzero_extent = "ignore"\n', r"key 'zero_extent'"),
    (LIB + '[[cute]]\nfunction = "c.py:f"\nexample_args = "c.py:a"\noptions = ["-O3"]\n', r"key 'options': expected "
                                                                                         r"a string"),
]


@pytest.mark.parametrize("toml,match", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_malformed_project_values_name_file_table_key_expected_and_given(tmp_path: Path, toml: str, match: str,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "kernelpack.toml").write_text(toml)
    (tmp_path / "k.cu").write_text(KERNEL)
    with pytest.raises(ProjectError, match=match):
        load_project(tmp_path)
    assert cli.main(["build", "-q", str(tmp_path)]) == 1  # the CLI: one line on stderr, exit 1, even with -q
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("kernelpack: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_python_entries_and_modules_are_checked_too(tmp_path: Path) -> None:
    with pytest.raises(ProjectError, match=r"Cuda entry: key 'kernels': expected a non-empty list .*got int 5"):
        Cuda("k.cu", 5)  # type: ignore[arg-type]
    (tmp_path / "kernelpack_project.py").write_text(textwrap.dedent("""
        from kernelpack.project import Cuda
        LIBRARY = {"name": "p", "archs": ["sm_90a"]}
        KERNELS = [Cuda("k.cu", ["neg"], archs=[90])]
    """))
    with pytest.raises(ProjectError, match=r"kernelpack_project.py: Cuda entry: key 'archs': expected a list of CUDA "
                                           r"archs .*got list \[90\]"):
        load_project(tmp_path)
    (tmp_path / "kernelpack_project.py").write_text("LIBRARY = {'name': 'p'}\nKERNELS = [undefined]\n")
    with pytest.raises(ProjectError, match="importing it raised NameError: name 'undefined' is not defined") as e:
        load_project(tmp_path)
    assert "Traceback" in (e.value.log or "")
    (tmp_path / "kernelpack_project.py").write_text("LIBRARY = {'name': 'p', 'version': '1 0'}\nKERNELS = []\n")
    with pytest.raises(ProjectError, match=r"\[library\] version must be a version"):
        load_project(tmp_path)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "kernelpack.toml").write_text(LIB + CUDA)
    (tmp_path / "k.cu").write_text("this does not compile\n")  # any work done would end in a compile error
    return tmp_path


@pytest.mark.parametrize("form", ["project", "bundles", "demo"])
def test_out_pointing_at_a_file_or_a_device_is_refused_before_any_work(project: Path, form: str,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    afile = project / "afile"
    afile.write_text("keep\n")
    for out, what in ((afile, "is a file"), (Path("/dev/null"), "is not a directory"),
                      (afile / "sub", "lies under .*afile, which is a file")):
        args = {"project": ["build", str(project), "-o", str(out)],
                "bundles": ["build", "mylib", str(project / "missing.kpack"), "-o", str(out)],
                "demo": ["demo", "--out", str(out)]}[form]
        assert cli.main(args) == 1
        _, err = capsys.readouterr()
        assert err.startswith("kernelpack: error: ") and err.count("\n") == 1, err
        assert ("--out" if form == "demo" else "-o/--out") in err and "give a directory" in err, err
        assert re.search(what, err), err
    assert afile.read_text() == "keep\n"


def test_quiet_still_prints_errors_and_debug_adds_the_traceback(project: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpack.core import config

    with config.override(cache_dir=project / "cache"):
        assert cli.main(["build", "-q", "-j", "1", str(project)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("kernelpack: error: 1 of 1 build step(s) failed:\n  cuda:k.cu: ")
    assert "--- log ---" in err and "Traceback" not in err  # the compiler's log follows the message
    (project / "kernelpack.toml").write_text('[library]\nname = "a/b"\n')
    for argv in (["--debug", "build", str(project)], ["build", "--debug", str(project)]):
        assert cli.main(argv) == 1
        _, err = capsys.readouterr()
        assert err.startswith("Traceback") and err.splitlines()[-1].startswith("kernelpack: error: kernelpack.toml: "
                                                                              "[library] name must be")


@pytest.mark.parametrize("raised,code,line", [
    (KeyboardInterrupt(), 130, "kernelpack: interrupted"),
    (ValueError("oops"), 70, "kernelpack: internal error: ValueError: oops (a bug in kernelpack; rerun with --debug "
                            "for the traceback and report it)"),
    (OSError(28, "No space left on device", "/out/lib/libp.so"), 1,
     "kernelpack: error: No space left on device: /out/lib/libp.so"),
])
def test_interrupts_internal_errors_and_environment_errors(monkeypatch: pytest.MonkeyPatch, raised: BaseException,
                                                           code: int, line: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import kernelpack.project.ui as ui

    def fail(*a: object, **k: object) -> int:
        raise raised

    monkeypatch.setattr(ui, "run_build", fail)
    assert cli.main(["build"]) == code
    assert capsys.readouterr().err == line + "\n"


def test_sigint_in_a_real_process_prints_one_line(project: Path) -> None:
    """Ctrl-C while a (slow) project module is being imported: no traceback, exit 130."""
    (project / "kernelpack.toml").unlink()
    (project / "kernelpack_project.py").write_text(textwrap.dedent("""
        import sys, time
        sys.stderr.write("importing\\n"); sys.stderr.flush()
        time.sleep(60)
        LIBRARY = {"name": "p"}
        KERNELS = []
    """))
    env = dict(os.environ, PYTHONPATH=str(Path(cli.__file__).parents[2]), KERNELPACK_CACHE_DIR="off")
    proc = subprocess.Popen([sys.executable, "-m", "kernelpack.cli", "build", str(project)], stderr=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None and proc.stderr.readline() == "importing\n"
    proc.send_signal(2)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err == "kernelpack: interrupted\n", err
