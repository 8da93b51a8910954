"""Shared directories are trust boundaries (issue 25 item 4): the compile cache and the Ray workers' directories.

Each attack of the issue, reproduced: a poisoned cache entry with a recomputed header in a directory others can write
or another user owns (served by ``cuda.compile`` before), a FIFO and a link to ``/dev/zero`` at an entry's path (a
hang, and a read until memory ran out), a world-writable ``kernelpack-ray-<uid>`` with planted sources (compiled),
that directory as a link elsewhere (its numeric folders deleted), and a worker's output built from other files than
the driver's (accepted). Plus the team cache's keyed entries. GPU-less, a few seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

import pytest

from kernelpack.core import trust
from kernelpack.core.cache import CompileCache, cache_key
from kernelpack.project import distributed
from kernelpack.project.jobs import Outcome
from toolchain_support import needs_nvrtc

UNSAFE = pytest.mark.filterwarnings("ignore::UserWarning")  # the unsafe cases warn; tests that count them catch them


def poison(path: Path, payload: bytes, meta: dict | None = None) -> None:
    """What someone who can write the cache puts at ``path``: another payload under a header recomputed to match."""
    header = json.dumps({"sha256": hashlib.sha256(payload).hexdigest(), "size": len(payload), "meta": meta or {}},
                        sort_keys=True, separators=(",", ":")).encode()
    tmp = path.with_name(path.name + ".evil")
    tmp.write_bytes(b"KPCACHE1\n" + header + b"\n" + payload)
    os.replace(tmp, path)


def act_as_another_user(monkeypatch: pytest.MonkeyPatch, *paths: Path) -> None:
    """Make ``paths`` owned by a user other than this process's: chown them where we are root, else have kernelpack
    take this process for another user (its one place that asks, :func:`kernelpack.core.trust.uid`)."""
    if os.getuid() == 0:
        for p in paths:
            os.chown(p, 4242, -1, follow_symlinks=False)
    else:
        me = os.getuid()
        monkeypatch.setattr(trust, "uid", lambda: me + 1)


def entry_path(root: Path, key: str) -> Path:
    return root / key[:2] / key


@pytest.fixture
def cache_root(tmp_path: Path) -> Path:
    return tmp_path / "cache"


# ------------------------------------------------------------------------------------------------ the compile cache


@pytest.mark.parametrize("where,mode", [("root", 0o777), ("root", 0o775), ("shard", 0o777), ("shard", 0o775),
                                        ("entry", 0o666)])
def test_a_poisoned_entry_in_a_directory_others_can_write_is_not_served(cache_root, monkeypatch, where, mode):
    monkeypatch.setattr(trust, "private_group", lambda gid, me: False)  # the group has other members
    cache = CompileCache(cache_root)
    key = cache_key(source="k1")
    cache.put(key, {"lowered": "k"}, b"cubin of k1")
    path = entry_path(cache_root, key)
    poison(path, b"cubin of k2", {"lowered": "k"})
    os.chmod({"root": cache_root, "shard": path.parent, "entry": path}[where], mode)
    with pytest.warns(trust.UnsafeDirectoryWarning, match="writable by (every user|group)"):
        assert CompileCache(cache_root).get(key) is None


def test_a_cache_owned_by_another_user_is_bypassed_with_one_warning(cache_root, monkeypatch):
    cache = CompileCache(cache_root)
    key, other = cache_key(source="k1"), cache_key(source="k2")
    cache.put(key, {}, b"cubin of k1")
    poison(entry_path(cache_root, key), b"cubin of k2")
    act_as_another_user(monkeypatch, cache_root)
    theirs = CompileCache(cache_root)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert theirs.get(key) is None
        theirs.put(other, {}, b"mine")
        assert theirs.get(other) is None and CompileCache(cache_root).get(key) is None
    assert not entry_path(cache_root, other).exists()  # nothing written into it either
    msgs = [str(w.message) for w in seen if issubclass(w.category, trust.UnsafeDirectoryWarning)]
    assert len(msgs) == 1, msgs
    assert str(cache_root) in msgs[0] and "owned by uid" in msgs[0] and "compiling without it" in msgs[0]


def test_the_users_private_group_may_write_the_cache(cache_root, monkeypatch):
    """With user-private groups and umask 002 every directory a user makes is group-writable: harmless, accepted."""
    monkeypatch.setattr(trust, "private_group", lambda gid, me: True)
    cache = CompileCache(cache_root)
    key = cache_key(source="k1")
    cache.put(key, {}, b"cubin of k1")
    os.chmod(cache_root, 0o775)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.get(key).data == b"cubin of k1"


def test_a_link_at_an_entrys_path_is_not_followed(cache_root):
    cache = CompileCache(cache_root)
    key, other = cache_key(source="k1"), cache_key(source="k2")
    cache.put(other, {}, b"cubin of k2")
    path = entry_path(cache_root, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(entry_path(cache_root, other))
    with pytest.warns(trust.UnsafeDirectoryWarning, match="symbolic link"):
        assert cache.get(key) is None
    assert not path.is_symlink()  # removed: the next put writes a real entry
    cache.put(key, {}, b"cubin of k1")
    assert cache.get(key).data == b"cubin of k1" and cache.get(other).data == b"cubin of k2"


_READER = textwrap.dedent("""
    import resource, sys, warnings
    from pathlib import Path
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    warnings.simplefilter("ignore")
    from kernelpack.core.cache import CompileCache
    entry = CompileCache(Path(sys.argv[1])).get(sys.argv[2])
    print("served" if entry is not None else "missed")
""")


@pytest.mark.parametrize("hostile", ["fifo", "dev-zero-link"])
def test_a_fifo_or_a_link_to_dev_zero_at_an_entrys_path_is_refused_not_read(cache_root, hostile):
    """In a subprocess with 1 GiB of address space and a hang guard: before, the FIFO blocked open() forever and the
    link to /dev/zero was read until memory ran out."""
    key = cache_key(source=hostile)
    path = entry_path(cache_root, key)
    path.parent.mkdir(parents=True, mode=0o700)
    os.chmod(cache_root, 0o700)
    if hostile == "fifo":
        os.mkfifo(path, 0o600)
    else:
        path.symlink_to("/dev/zero")
    try:
        r = subprocess.run([sys.executable, "-c", _READER, str(cache_root), key], capture_output=True, text=True,
                           timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading the cache entry {path} ({hostile}) hung")
    assert (r.returncode, r.stdout.strip()) == (0, "missed"), r.stderr[-2000:]
    assert not os.path.lexists(path)  # removed, so a put writes a real entry there
    CompileCache(cache_root).put(key, {}, b"real")
    assert CompileCache(cache_root).get(key).data == b"real"


K_SRC = 'extern "C" __global__ void k(float* x, int n) {{ int j = threadIdx.x; if (j < n) x[j] = x[j] * {f}f; }}\n'


@needs_nvrtc
@UNSAFE
def test_cuda_compile_does_not_serve_a_cubin_swapped_in_a_world_writable_cache(tmp_path, cache_root):
    """The issue's attack end to end: kernel ``k`` of source 2 placed (with its header) at the cache entry of ``k`` of
    source 1, in a cache others can write; ``cuda.compile`` of source 1 served source 2's cubin."""
    from kernelpack.frontends.cuda import compile as cuda

    def compile_k(src: Path, cache: CompileCache) -> bytes:
        (art,) = cuda.compile(src, ["k"], arch=["sm_80"], compiler="nvrtc", cache=cache)
        return art.binaries[0].data

    def cubin_entries() -> dict[Path, bytes]:
        found = {p: p.read_bytes() for p in cache_root.glob("*/*")}
        return {p: b for p, b in found.items() if b'"lowered":{"k":"k"}' in b.split(b"\n", 2)[1]}

    one, two = tmp_path / "one.cu", tmp_path / "two.cu"
    one.write_text(K_SRC.format(f="1.5"))
    two.write_text(K_SRC.format(f="666.0"))
    clean = compile_k(one, CompileCache(None))
    compile_k(one, CompileCache(cache_root))
    (mine,) = cubin_entries()
    compile_k(two, CompileCache(cache_root))
    (theirs,) = set(cubin_entries()) - {mine}
    mine.write_bytes(theirs.read_bytes())
    os.chmod(cache_root, 0o777)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = compile_k(one, CompileCache(cache_root))
    assert got == clean and got != compile_k(two, CompileCache(None))
    assert [w for w in seen if re.search(f"{re.escape(str(cache_root))}.*writable by every user", str(w.message))]


@needs_nvrtc
def test_a_build_with_an_unsafe_cache_warns_once_and_its_workers_get_no_cache(tmp_path, cache_root, capfd):
    """``kernelpack build -j 2``: the driver checks the cache once and gives its worker processes none (before, each
    spawned worker found the cache unsafe and warned again on stderr)."""
    from kernelpack.core import config
    from kernelpack.project import build
    from test_project_build import write_project

    proj = tmp_path / "proj"
    proj.mkdir()
    write_project(proj)
    cache_root.mkdir(mode=0o700)
    os.chmod(cache_root, 0o777)
    with config.override(cache_dir=cache_root), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        build(proj, jobs=2, executor="local")
    ours = [w for w in seen if issubclass(w.category, trust.UnsafeDirectoryWarning)]
    assert len(ours) == 1 and str(cache_root) in str(ours[0].message)
    assert "not using the compile cache" not in capfd.readouterr().err
    assert list(cache_root.iterdir()) == []


# ------------------------------------------------------------------------------------------------ the team cache


KEY = b"0123456789abcdef0123456789abcdef"


def team_cache(root: Path, monkeypatch: pytest.MonkeyPatch, key: bytes = KEY) -> CompileCache:
    keyfile = root.parent / f"key-{hashlib.sha256(key).hexdigest()[:8]}"
    keyfile.write_bytes(key + b"\n")
    os.chmod(keyfile, 0o640)
    monkeypatch.setenv("KERNELPACK_CACHE_KEY_FILE", str(keyfile))
    return CompileCache(root)


def test_a_team_cache_with_a_key_may_be_group_writable_and_other_users(cache_root, monkeypatch):
    monkeypatch.setattr(trust, "private_group", lambda gid, me: False)
    cache_root.mkdir(mode=0o700)
    os.chmod(cache_root, 0o2770)
    key = cache_key(source="k1")
    team_cache(cache_root, monkeypatch).put(key, {"lowered": "k"}, b"cubin of k1")
    path = entry_path(cache_root, key)
    assert oct(os.stat(path.parent).st_mode & 0o2770) == oct(0o2770)  # team members can add entries beside it
    assert os.stat(path).st_mode & 0o040  # and read this one
    act_as_another_user(monkeypatch, cache_root, path.parent, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert team_cache(cache_root, monkeypatch).get(key).data == b"cubin of k1"


@pytest.mark.parametrize("tamper", ["header recomputed", "another key's entry", "another team key", "no key"])
def test_a_team_cache_serves_only_entries_whose_mac_checks_out(cache_root, monkeypatch, tamper):
    cache = team_cache(cache_root, monkeypatch)
    key, other = cache_key(source="k1"), cache_key(source="k2")
    cache.put(key, {}, b"cubin of k1")
    cache.put(other, {}, b"cubin of k2")
    path = entry_path(cache_root, key)
    if tamper == "header recomputed":
        poison(path, b"cubin of k2")
    elif tamper == "another key's entry":  # a valid entry, MAC and all, copied to another key's path
        path.write_bytes(entry_path(cache_root, other).read_bytes())
    else:
        forger = CompileCache(cache_root, key=b"x" * 32) if tamper == "another team key" else None
        if forger is None:
            monkeypatch.delenv("KERNELPACK_CACHE_KEY_FILE")
            forger = CompileCache(cache_root)
        forger.put(key, {}, b"cubin of k2")
        assert forger.get(key).data == b"cubin of k2"
    assert team_cache(cache_root, monkeypatch).get(key) is None
    assert team_cache(cache_root, monkeypatch).get(other).data == b"cubin of k2"


@UNSAFE
def test_a_team_cache_is_still_refused_when_every_user_can_write_it(cache_root, monkeypatch):
    cache_root.mkdir(mode=0o700)
    cache = team_cache(cache_root, monkeypatch)
    key = cache_key(source="k1")
    cache.put(key, {}, b"cubin of k1")
    os.chmod(cache_root, 0o777)
    assert team_cache(cache_root, monkeypatch).get(key) is None


@pytest.mark.parametrize("bad", ["readable by every user", "too short", "missing"])
def test_an_unusable_key_file_bypasses_the_cache_with_a_warning_naming_it(cache_root, monkeypatch, bad):
    keyfile = cache_root.parent / "team.key"
    if bad != "missing":
        keyfile.write_bytes(KEY if bad != "too short" else b"short")
        os.chmod(keyfile, 0o644 if bad == "readable by every user" else 0o600)
    monkeypatch.setenv("KERNELPACK_CACHE_KEY_FILE", str(keyfile))
    with pytest.warns(trust.UnsafeDirectoryWarning, match=f"KERNELPACK_CACHE_KEY_FILE.*{re.escape(str(keyfile))}"):
        CompileCache(cache_root).put(cache_key(source="k1"), {}, b"x")
    assert not cache_root.exists()


# ------------------------------------------------------------------------------------------------ Ray workers


def make_snapshot(origin: Path) -> distributed.Snapshot:
    files = (("kernelpack.toml", b"[library]\nname = 'real'\n"), ("k.cu", b"// the driver's kernel\n"))
    h = hashlib.sha256()
    for name, data in files:  # the recipe distributed.snapshot uses
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return distributed.Snapshot("kernelpack.toml", files, h.hexdigest(), str(origin))


@pytest.fixture
def worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh worker process's state with ``tmp_path/tmp`` as the temp directory; a step "compiles" by returning the
    bytes of the project file it was given."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    os.chmod(tmp, 0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(distributed, "_OWN", {}, raising=False)
    monkeypatch.setattr(distributed, "rename_code", lambda root, origin: None)

    def execute(project_file: str, job_id: str, cache_dir: str | None) -> Outcome:
        return Outcome(job_id, True, data=Path(project_file).read_bytes() + Path(project_file).with_name("k.cu")
                       .read_bytes())

    monkeypatch.setattr(distributed, "execute", execute)
    return tmp


def compiled(snap: distributed.Snapshot) -> bytes:
    return dict(snap.files)["kernelpack.toml"] + dict(snap.files)["k.cu"]


@UNSAFE
@pytest.mark.parametrize("how", ["world-writable", "another user's"])
def test_a_planted_kernelpack_ray_directory_is_not_compiled_from(worker, tmp_path, monkeypatch, how):
    snap = make_snapshot(tmp_path / "driver")
    if how == "another user's":
        act_as_another_user(monkeypatch)  # as root: chowned below
    home = worker / f"kernelpack-ray-{trust.uid()}"
    planted = home / str(os.getpid()) / snap.digest
    planted.mkdir(parents=True)
    (planted / "kernelpack.toml").write_bytes(b"[library]\nname = 'evil'\n")
    (planted / "k.cu").write_bytes(b"// planted\n")
    (planted / ".complete").write_bytes(b"")
    if how == "world-writable":
        os.chmod(home, 0o777)
    elif os.getuid() == 0:
        os.chown(home, 4242, -1)
    o = distributed.remote_step(snap, "cuda:k.cu", None)
    assert o.ok and o.data == compiled(snap)
    assert (planted / "k.cu").read_bytes() == b"// planted\n"  # and nothing in another's directory touched


def test_a_kernelpack_ray_directory_that_is_a_link_is_not_followed_nor_cleaned(worker, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "999999999").mkdir(parents=True)  # a "dead worker's" folder, by its name
    (elsewhere / "999999999" / "precious").write_bytes(b"keep")
    home = worker / f"kernelpack-ray-{trust.uid()}"
    home.symlink_to(elsewhere)
    snap = make_snapshot(tmp_path / "driver")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        o = distributed.remote_step(snap, "cuda:k.cu", None)
    assert (elsewhere / "999999999" / "precious").read_bytes() == b"keep"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["999999999"]
    assert o.ok and o.data == compiled(snap)
    assert [w for w in seen if f"{home}: it is a symbolic link" in str(w.message)]


def test_the_private_home_sweeps_dead_workers_directories_but_never_through_a_link(worker, tmp_path):
    home = worker / f"kernelpack-ray-{trust.uid()}"
    home.mkdir(mode=0o700)
    (home / "999999998-abc").mkdir()
    (home / "999999997").mkdir()
    alive = home / f"{os.getppid()}-xyz"
    alive.mkdir()
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "x").mkdir(parents=True)
    (home / "999999996").symlink_to(elsewhere)
    o = distributed.remote_step(make_snapshot(tmp_path / "driver"), "cuda:k.cu", None)
    assert o.ok
    left = sorted(p.name for p in home.iterdir())
    assert "999999998-abc" not in left and "999999997" not in left
    assert alive.name in left and "999999996" in left and (elsewhere / "x").is_dir()


def test_the_worker_reports_what_it_compiled_and_the_driver_refuses_other_files(worker, tmp_path):
    snap = make_snapshot(tmp_path / "driver")
    first = distributed.remote_step(snap, "cuda:k.cu", None)
    assert first.inputs == snap.digest and distributed.verified(first, snap) is first
    (copy,) = Path(tempfile.gettempdir()).glob(f"kernelpack-ray-{trust.uid()}/*/{snap.digest}/k.cu")
    copy.write_bytes(b"// changed on the worker\n")  # the worker's copy, reused by its next step
    second = distributed.remote_step(snap, "cuda:k.cu", None)
    assert second.ok and second.inputs != snap.digest
    refused = distributed.verified(second, snap)
    assert not refused.ok and refused.data == b""
    assert "cuda:k.cu" in refused.error and snap.digest in refused.error and second.inputs in refused.error


def test_the_driver_refuses_an_outcome_without_a_digest_and_passes_failures_through(tmp_path):
    snap = make_snapshot(tmp_path)
    refused = distributed.verified(Outcome("triton:add[f32]", True, data=b"kpack"), snap)
    assert not refused.ok and "triton:add[f32]" in refused.error and "(none given)" in refused.error
    failed = Outcome("triton:add[f32]", False, error="compile error")
    assert distributed.verified(failed, snap) is failed
