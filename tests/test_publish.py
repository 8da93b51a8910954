"""Nothing half-written (issue 12, item 8): outputs are staged and published as one set. A failed link, a folder that
cannot be written, an interrupt or a SIGKILL at any moment leaves the previous complete set or the new complete set,
never new headers beside an old library; the next build removes what a killed one left. GPU-less."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelpack.bundle.kpack import Bundle
from kernelpack.clib import read_embedded_bundle
from kernelpack.core import config, publish
from kernelpack.core.publish import JOURNAL, STAGING_PREFIX, PublishError, Stage, check_out_dir, output_dir, recover
from kernelpack.frontends.cuda.toolkit import find_nvcc, nvrtc_available

needs_compiler = pytest.mark.skipif(not nvrtc_available() and find_nvcc() is None, reason="no CUDA C++ compiler")
SRC = Path(__file__).resolve().parents[1] / "src"

FILES = ["include/x.h", "include/x.hpp", "lib/libx.so", "lib/libx.a", "lib/cmake/x/xConfig.cmake", "x.kpack"]


def write_set(out: Path, tag: str) -> None:
    with output_dir(out) as d, Stage(d) as stage:
        for rel in FILES:
            stage.write(rel, f"{tag} {rel}\n")


def tags(out: Path) -> set[str]:
    """The set each output file belongs to ({"A"} = all of set A)."""
    return {(out / rel).read_text().split()[0] if (out / rel).exists() else "missing" for rel in FILES}


def leftovers(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*")
                  if p.name.startswith(STAGING_PREFIX) or p.name.startswith(JOURNAL) or p.name.endswith(".tmp"))


# ------------------------------------------------------------------------------------------------ the mechanism


def test_a_stage_publishes_everything_or_nothing(tmp_path: Path) -> None:
    write_set(tmp_path, "A")
    assert tags(tmp_path) == {"A"} and leftovers(tmp_path) == []
    with pytest.raises(RuntimeError), output_dir(tmp_path) as d, Stage(d) as stage:
        for rel in FILES[:3]:
            stage.write(rel, f"B {rel}\n")
        raise RuntimeError("the link failed")
    assert tags(tmp_path) == {"A"} and leftovers(tmp_path) == []
    write_set(tmp_path, "B")
    assert tags(tmp_path) == {"B"} and leftovers(tmp_path) == []


def test_a_rename_that_fails_midway_rolls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's case: include/ was replaced, then lib/ cannot be written (full disk, permissions)."""
    write_set(tmp_path, "A")
    real = os.replace

    def replace(src, dst):  # type: ignore[no-untyped-def]
        if "/lib/" in str(dst) and "new" in str(src):
            raise PermissionError(13, "Permission denied", str(dst))
        return real(src, dst)

    monkeypatch.setattr(publish.os, "replace", replace)
    with pytest.raises(PublishError, match=r"cannot publish .*lib.*Permission denied; the previous outputs were "
                                           r"restored"):
        write_set(tmp_path, "B")
    monkeypatch.undo()
    assert tags(tmp_path) == {"A"} and leftovers(tmp_path) == []


def test_a_folder_that_cannot_be_written_is_found_before_anything_is_replaced(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    write_set(tmp_path, "A")
    lib = tmp_path / "lib"
    if os.geteuid() == 0:  # root writes anywhere: make the check see what a user would
        real = os.access
        monkeypatch.setattr(publish.os, "access", lambda p, m: False if Path(p) == lib else real(p, m))
    else:
        lib.chmod(0o555)
    try:
        with pytest.raises(PublishError, match=f"cannot write into {lib}: permission denied; the previous outputs are "
                                               f"untouched"):
            write_set(tmp_path, "B")
    finally:
        lib.chmod(0o755)
    assert tags(tmp_path) == {"A"} and leftovers(tmp_path) == []


KILLER = """
import os, signal, sys
sys.path.insert(0, {src!r})
from kernelpack import publish
from kernelpack.core.publish import Stage, output_dir
n, real = 0, os.replace
def replace(src, dst):
    global n
    if "/new/" in str(src):
        if n == {after}:
            os.kill(os.getpid(), signal.SIGKILL)
        n += 1
    return real(src, dst)
publish.os.replace = replace
with output_dir({out!r}) as d, Stage(d) as stage:
    for rel in {files!r}:
        stage.write(rel, "B " + rel + "\\n")
"""


@pytest.mark.parametrize("after", range(len(FILES)))
def test_sigkill_between_two_renames_is_rolled_forward_by_the_next_build(tmp_path: Path, after: int) -> None:
    write_set(tmp_path, "A")
    code = KILLER.format(src=str(SRC), after=after, out=str(tmp_path), files=FILES)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (tmp_path / JOURNAL).is_file()  # killed after the commit point
    assert tags(tmp_path) == ({"A", "B"} if after else {"A"})  # what a reader sees before the next build...
    with output_dir(tmp_path):  # ...which finishes the publish first
        pass
    assert tags(tmp_path) == {"B"} and leftovers(tmp_path) == []


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_during_the_publish_is_held_until_the_set_is_complete(tmp_path: Path, sig: str) -> None:
    write_set(tmp_path, "A")
    code = KILLER.replace("signal.SIGKILL", f"signal.{sig}").format(
        src=str(SRC), after=2, out=str(tmp_path), files=FILES) + "print('not reached')\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    if sig == "SIGINT":
        assert proc.returncode != 0 and "KeyboardInterrupt" in proc.stderr and "not reached" not in proc.stdout
    else:
        assert proc.returncode == -signal.SIGTERM and proc.stdout == ""
    assert tags(tmp_path) == {"B"} and leftovers(tmp_path) == []  # published, and the stage cleared first


def test_a_rollback_killed_midway_is_finished_backwards(tmp_path: Path) -> None:
    """The journal a failed rename leaves while it restores the previous files says "back"."""
    write_set(tmp_path, "A")
    stage = tmp_path / f"{STAGING_PREFIX}rollback"
    for rel in FILES[:3]:  # 3 files were replaced by set B, then the 4th rename failed; killed while restoring
        (stage / "old" / rel).parent.mkdir(parents=True, exist_ok=True)
        os.link(tmp_path / rel, stage / "old" / rel)
        (tmp_path / rel).unlink()
        (tmp_path / rel).write_text(f"B {rel}\n")
    (tmp_path / "include/new_only.h").write_text("B\n")  # a file set A did not have
    done = [*FILES[:3], "include/new_only.h"]
    (tmp_path / JOURNAL).write_text(json.dumps({"staging": stage.name, "direction": "back", "files": done,
                                                "had": FILES[:3]}))
    os.replace(stage / "old" / FILES[2], tmp_path / FILES[2])  # the rollback had restored one file already
    assert tags(tmp_path) == {"A", "B"}
    recover(tmp_path)
    assert tags(tmp_path) == {"A"} and not (tmp_path / "include/new_only.h").exists() and leftovers(tmp_path) == []


def test_leftovers_of_killed_builds_are_removed_and_hostile_journals_ignored(tmp_path: Path) -> None:
    write_set(tmp_path, "A")
    (tmp_path / f"{STAGING_PREFIX}dead1/new/include").mkdir(parents=True)
    (tmp_path / f"{STAGING_PREFIX}dead1/new/include/x.h").write_text("B half\n")
    (tmp_path / f"{STAGING_PREFIX}dead2").write_text("")
    (tmp_path / (JOURNAL + ".tmp")).write_text("{")
    victim = tmp_path.parent / f"{tmp_path.name}-victim"
    victim.write_text("keep me\n")
    for doc in ({"staging": "../..", "direction": "forward", "files": [f"../{victim.name}"]},
                {"staging": f"{STAGING_PREFIX}dead1", "direction": "forward", "files": ["../x"]},
                {"staging": f"{STAGING_PREFIX}dead1", "direction": "forward", "files": 5},
                {"staging": f"{STAGING_PREFIX}dead1", "direction": "sideways", "files": ["include/x.h"]},
                {"staging": f"{STAGING_PREFIX}dead1", "direction": "back", "files": [], "had": ["include/x.h"]},
                [1], "x"):
        (tmp_path / JOURNAL).write_text(json.dumps(doc))
        recover(tmp_path)
        assert leftovers(tmp_path) == [] and tags(tmp_path) == {"A"} and victim.read_text() == "keep me\n"
        (tmp_path / f"{STAGING_PREFIX}dead1/new/include").mkdir(parents=True)
    link = tmp_path / f"{STAGING_PREFIX}link"
    link.symlink_to(victim.parent, target_is_directory=True)
    (tmp_path / JOURNAL).write_text(json.dumps({"staging": link.name, "direction": "forward", "files": [victim.name]}))
    recover(tmp_path)
    assert victim.read_text() == "keep me\n" and not os.path.lexists(link) and victim.parent.is_dir()


def test_output_directory_checks(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("")
    cases = [(f, "is a file"), ("/dev/null", "not a directory"), (f / "sub", "lies under .*file, which is a file"),
             (5, "must be a path"), ("a\0b", "not a valid path")]
    for bad, match in cases:
        with pytest.raises(PublishError, match=match):
            check_out_dir(bad, "-o")  # type: ignore[arg-type]
    assert check_out_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"


# ------------------------------------------------------------------------------------------------ real builds

KERNEL = """
extern "C" __global__ void axpy(float a, const float* x, float* y, {n_type} n) {{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}}
"""
SETS = {"A": "int", "B": "long long"}  # the signature changes: int32_t n -> int64_t n
TOML = '[library]\nname = "kill"\narchs = ["sm_90a"]\n[[cuda]]\nsource = "k.cu"\nkernels = ["axpy"]\n'


def which_set(out: Path) -> str:
    """"A" or "B" when every output (and the build state) belongs to that set; else a description of the mix."""
    found = {}
    for rel in ("include/kill.h", "include/kill.hpp"):
        text = (out / rel).read_text() if (out / rel).exists() else ""
        found[rel] = "A" if "int32_t n)" in text else "B" if "int64_t n)" in text else "missing"
    for rel, read in (("kill.kpack", Bundle.read), ("lib/libkill.so", read_embedded_bundle),
                      ("lib/libkill.a", read_embedded_bundle)):
        try:
            sig = read(out / rel).artifacts[0].abi.describe()
        except Exception:
            found[rel] = "missing"
            continue
        found[rel] = "A" if sig.endswith("int32_t n") else "B" if sig.endswith("int64_t n") else sig
    for rel in ("lib/cmake/kill/killConfig.cmake", "lib/cmake/kill/killConfigVersion.cmake", "lib/pkgconfig/kill.pc"):
        found[rel] = "ok" if (out / rel).is_file() else "missing"
    state = json.loads((out / ".kernelpack-build/state.json").read_text())
    stats = {p: [os.stat(p).st_size, os.stat(p).st_mtime_ns] if os.path.exists(p) else None for p in state["outputs"]}
    found["state"] = "ok" if stats == state["outputs"] and len(stats) == 7 else "stale"
    sets = {v for k, v in found.items() if v in SETS}
    if len(sets) == 1 and all(v in SETS or v == "ok" for v in found.values()):
        return sets.pop()
    return "mixed: " + ", ".join(f"{k}={v}" for k, v in sorted(found.items()))


@pytest.fixture
def cache(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    d = tmp_path_factory.mktemp("kpcache")
    with config.override(cache_dir=d):
        yield d


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    (tmp_path / "kernelpack.toml").write_text(TOML)
    return tmp_path


def use(proj: Path, which: str) -> None:
    (proj / "k.cu").write_text(KERNEL.format(n_type=SETS[which]))


@needs_compiler
def test_a_link_that_fails_leaves_the_previous_set_untouched(proj: Path, cache: Path, tmp_path: Path) -> None:
    from kernelpack.project import build

    use(proj, "A")
    build(proj, jobs=1)
    out = proj / "build"
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and ".kernelpack-build" not in p.parts}
    fake = tmp_path / "cc-that-cannot-link"
    fake.write_text(f'#!/bin/sh\ncase " $* " in *" -shared "*) echo "ld: no space left" >&2; exit 1;; esac\n'
                    f'exec {config.knobs().cc} "$@"\n')
    fake.chmod(0o755)
    use(proj, "B")
    with config.override(cc=str(fake)), pytest.raises(Exception, match="linking libkill.so failed") as e:
        build(proj, jobs=1)
    assert "no space left" in (e.value.log or "")  # type: ignore[attr-defined]
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and ".kernelpack-build" not in p.parts}
    assert after == before  # headers, libraries, .kpack: all of set A
    assert which_set(out) == "A" and leftovers(out) == []  # and the state still describes them
    r = build(proj, jobs=1)  # the job's output was kept: only the link runs again
    assert r.jobs == {"cuda:k.cu": "reused"} and r.linked and which_set(out) == "B" and leftovers(out) == []


@needs_compiler
def test_library_build_with_a_failing_compiler_keeps_the_previous_library(tmp_path: Path, cache: Path) -> None:
    from kernelpack.clib import Library
    from kernelpack.frontends.cuda import compile as cuda

    src = tmp_path / "k.cu"
    outs = {}
    for which in SETS:
        src.write_text(KERNEL.format(n_type=SETS[which]))
        outs[which] = cuda.compile(src, ["axpy"], arch="sm_90a")
    out = tmp_path / "out"
    Library("kill", outs["A"]).build(out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(Exception, match="failed"):
        Library("kill", outs["B"], cc="false").build(out)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before and leftovers(out) == []


@needs_compiler
def test_an_interrupt_arriving_as_the_publish_ends_keeps_the_new_state(proj: Path, cache: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C held during the publish is raised right after it: the state published with the outputs stays."""
    from kernelpack.project import build

    use(proj, "A")
    build(proj, jobs=1)
    real = Stage.commit

    def commit_then_interrupt(self: Stage) -> None:
        real(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(Stage, "commit", commit_then_interrupt)
    use(proj, "B")
    with pytest.raises(KeyboardInterrupt):
        build(proj, jobs=1)
    monkeypatch.undo()
    assert which_set(proj / "build") == "B"  # state.json included
    assert build(proj, jobs=1).up_to_date


HARNESS = """
import sys
sys.path.insert(0, {src!r})
import kernelpack.cli
sys.stderr.write("ready\\n")
sys.stderr.flush()
sys.exit(kernelpack.cli.main(sys.argv[1:]))
"""


def _start(proj: Path, cache: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, KERNELPACK_CACHE_DIR=str(cache))
    proc = subprocess.Popen([sys.executable, "-c", HARNESS.format(src=str(SRC)), "build", "-q", "-j", "1"],
                            cwd=proj, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None and proc.stderr.readline() == "ready\n"
    return proc


@needs_compiler
@pytest.mark.slow
def test_builds_killed_at_random_moments_leave_the_old_or_the_new_set(proj: Path, cache: Path) -> None:
    from kernelpack.project import build

    rng = random.Random(12)
    out = proj / "build"
    for which in ("B", "A"):  # both compiles cached; set A in place
        use(proj, which)
        build(proj, jobs=1)
    spans = []
    for which in ("B", "A"):  # how long a build whose signature changed takes, from "ready" to exit
        use(proj, which)
        proc = _start(proj, cache)
        t0 = time.perf_counter()
        assert proc.wait(timeout=120) == 0, proc.stderr.read()  # type: ignore[union-attr]
        spans.append(time.perf_counter() - t0)
    span = min(spans)
    current = which_set(out)
    assert current == "A"
    counts = {"old": 0, "new": 0, "journal": 0, "sigint": 0, "sigint_done": 0}
    runs = 50
    for i in range(runs):
        target = "A" if current == "B" else "B"
        use(proj, target)
        sig = signal.SIGINT if i % 5 == 4 else signal.SIGKILL
        proc = _start(proj, cache)
        time.sleep(rng.uniform(0, span * 1.1) if i % 2 else rng.uniform(span * 0.6, span * 1.05))  # odd: near the end
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        if sig == signal.SIGINT:  # -2: it came while the interpreter was exiting (Python's handler is gone then)
            assert proc.returncode in (0, 130, -signal.SIGINT), err
            assert err == ("kernelpack: interrupted\n" if proc.returncode == 130 else ""), err
            counts["sigint" if proc.returncode == 130 else "sigint_done"] += 1
        journal = (out / JOURNAL).exists()
        if journal:  # killed inside the publish: only SIGKILL can do that, and the next build rolls it forward
            assert sig == signal.SIGKILL
            counts["journal"] += 1
            with output_dir(out):
                pass
        now = which_set(out)
        assert now in (current, target), f"run {i} ({sig.name}): {now}"
        assert proc.returncode != -signal.SIGINT or now == target  # ...after the build had finished
        counts["new" if now == target else "old"] += 1
        if sig == signal.SIGINT:  # the state published with the outputs tells the truth: "up to date" only if so
            r = build(proj, jobs=1)
            assert which_set(out) == target and (r.up_to_date if now == target else r.linked), r
            now = target
        current = now
    use(proj, "A" if current == "B" else "B")
    r = build(proj, jobs=1)  # removes what the killed builds left
    assert r.linked and leftovers(out) == [] and which_set(out) != current
    print(f"\n{runs} interrupted builds ({runs - runs // 5} SIGKILL, {runs // 5} SIGINT; build span {span:.2f} s): "
          f"{counts['old'] + counts['new']} old-or-new ({counts['old']} old, {counts['new']} new), 0 mixed; "
          f"{counts['journal']} killed inside the publish and rolled forward by the next build; SIGINT: "
          f"{counts['sigint']} interrupted (one line, exit 130), {counts['sigint_done']} had finished")
