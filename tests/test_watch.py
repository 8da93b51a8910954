"""``kernelpack build --watch`` (issue 30, item 6): an edit rebuilds the changed step on warm workers that keep what the
kernel modules import (a stand-in for torch: imported once, never again), and a changed module is executed again --
one the kernel module imports included, even rewritten within the second at the same size: no stale kernel (the
rebuilt bundle is byte for byte what a fresh build gives). GPU-less; the timings are bench/build_times.py's."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelpack.project.warm import refresh, remember

KERNEL = '''import heavy  # noqa: F401 - imported once per process: the stand-in for torch
import triton
import triton.language as tl
from helper import SCALE


@triton.jit
def scaled(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * SCALE, mask=offs < n)
'''
HELPER = "import triton.language as tl\n\nSCALE = tl.constexpr({})\n"
TOML = '''[library]
name = "w"
archs = ["sm_90a"]
outputs = ["bundle"]

[[triton]]
kernel = "k.py:scaled"
name = "scaled"
signature = { x_ptr = "*fp32", n = "i32" }
constexprs = { BLOCK = 256 }
'''


def _age(path: Path, seconds: int = 10) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 1_000_000_000))


def test_a_changed_module_is_forgotten_with_its_bytecode(tmp_path: Path) -> None:
    """refresh(): every module under the project is imported again once one of them changed, and a rewrite within
    the same clock tick at the same size is not served from its cached bytecode."""
    (tmp_path / "kp_watch_helper.py").write_text("VALUE = 1\n")
    (tmp_path / "kp_watch_user.py").write_text("from kp_watch_helper import VALUE\n")
    _age(tmp_path / "kp_watch_helper.py"), _age(tmp_path / "kp_watch_user.py")
    sys.path.insert(0, str(tmp_path))
    try:
        kp_watch_user = importlib.import_module("kp_watch_user")

        assert kp_watch_user.VALUE == 1
        remember(tmp_path, time.time_ns())
        assert not refresh(tmp_path)  # nothing changed: nothing forgotten
        stat = (tmp_path / "kp_watch_helper.py").stat()
        (tmp_path / "kp_watch_helper.py").write_text("VALUE = 2\n")  # same size
        os.utime(tmp_path / "kp_watch_helper.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
        assert refresh(tmp_path) and "kp_watch_user" not in sys.modules and "kp_watch_helper" not in sys.modules
        kp_watch_user = importlib.import_module("kp_watch_user")

        assert kp_watch_user.VALUE == 2
        assert "json" in sys.modules  # third-party modules stay
    finally:
        sys.path.remove(str(tmp_path))
        for m in ("kp_watch_user", "kp_watch_helper"):
            sys.modules.pop(m, None)


def test_an_edit_made_while_a_step_read_the_module_is_not_taken_for_what_it_read(tmp_path: Path) -> None:
    """A module edited after the step that imported it began (or just before: within the clock's reach) counts as
    changed at the next step, even though its file did not change again since the step ended."""
    (tmp_path / "kp_watch_racy.py").write_text("VALUE = 1\n")
    _age(tmp_path / "kp_watch_racy.py")
    sys.path.insert(0, str(tmp_path))
    try:
        began = time.time_ns()
        kp_watch_racy = importlib.import_module("kp_watch_racy")

        assert kp_watch_racy.VALUE == 1
        (tmp_path / "kp_watch_racy.py").write_text("VALUE = 2\n")  # the user saves while the step runs
        remember(tmp_path, began)  # the step ends after the save
        assert refresh(tmp_path) and "kp_watch_racy" not in sys.modules  # the next step imports the new text
        kp_watch_racy = importlib.import_module("kp_watch_racy")

        assert kp_watch_racy.VALUE == 2
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("kp_watch_racy", None)


def _reports(proc: subprocess.Popen[str], n: int) -> list[dict]:
    assert proc.stdout is not None
    out = []
    while len(out) < n:
        line = proc.stdout.readline()
        assert line, f"--watch ended early: {proc.stderr.read() if proc.stderr else ''}"
        out.append(json.loads(line))
    return out


def test_watch_rebuilds_an_edit_on_warm_workers_and_never_stale(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    proj, site = tmp_path / "proj", tmp_path / "site"
    proj.mkdir(), site.mkdir()
    count = tmp_path / "heavy_imports.txt"
    (site / "heavy.py").write_text(f"open({str(count)!r}, 'a').write('imported\\n')\n")
    (proj / "helper.py").write_text(HELPER.format(2.0))
    (proj / "k.py").write_text(KERNEL)
    (proj / "kernelpack.toml").write_text(TOML)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path]),
           "KERNELPACK_CACHE_DIR": str(tmp_path / "cache"), "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    proc = subprocess.Popen([sys.executable, "-m", "kernelpack.cli", "build", "--watch", "--json", "-j", "1",
                             str(proj)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        (first,) = _reports(proc, 1)
        assert first["jobs"] == {"triton:scaled": "compiled"}
        before = (proj / "build" / "w.kpack").read_bytes()
        (proj / "helper.py").write_text(HELPER.format(3.0))  # the module the kernel's module imports; same size
        (second,) = _reports(proc, 1)
        assert second["jobs"] == {"triton:scaled": "compiled"}
        middle = (proj / "build" / "w.kpack").read_bytes()
        (proj / "k.py").write_text(KERNEL.replace("* SCALE", "* SCALE + 1.0"))  # the kernel's own source
        (third,) = _reports(proc, 1)
        assert third["jobs"] == {"triton:scaled": "compiled"}
        after = (proj / "build" / "w.kpack").read_bytes()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert count.read_text() == "imported\n"  # the worker imported it once, for all three builds
    assert len({before, middle, after}) == 3
    fresh = tmp_path / "fresh"
    r = subprocess.run([sys.executable, "-m", "kernelpack.cli", "build", "-q", "-o", str(fresh), str(proj)],
                       env={**env, "KERNELPACK_CACHE_DIR": "off"}, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (fresh / "w.kpack").read_bytes() == after  # the rebuilt kernel is the edited source's, not a stale one


def test_watch_refuses_what_it_cannot_watch(capsys: pytest.CaptureFixture[str]) -> None:
    """--watch builds a project here: with bundles to link, or on Ray, it is a usage error (exit status 2)."""
    from kernelpack.cli import commands

    for argv in (["build", "--watch", "lib", "a.kpack", "b.kpack", "-o", "out"],
                 ["build", "--watch", "--executor", "ray"], ["build", "--watch", "--address", "h:1"]):
        assert commands.main(argv) == commands.EXIT_USAGE
        assert "--watch" in capsys.readouterr().err


def test_a_ctrl_c_while_a_worker_starts_does_not_kill_it() -> None:
    """Ctrl-C reaches the whole process group; a warm worker still starting (importing kernelpack) neither dies nor
    prints a traceback: it ignores SIGINT from its first instruction (the parent stops the workers)."""
    from kernelpack.project.warm import WarmWorkers

    with WarmWorkers(1) as warm:
        proc = warm.procs[0]
        os.kill(proc.pid, signal.SIGINT)  # at once: the worker is still starting
        proc.join(timeout=2)
        assert proc.is_alive()
        warm.conns[0].send(None)
        proc.join(timeout=30)
        assert proc.exitcode == 0
