"""Compile cache: round trip, corrupt entries never served, concurrent writers, the off switch."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

from kernelpack.core import config
from kernelpack.core.cache import CompileCache, cache_key


def test_round_trip_and_key_depends_on_every_part(tmp_path):
    cache = CompileCache(tmp_path)
    k1 = cache_key(source="a", arch="sm_90a", options=["-O3"])
    assert k1 != cache_key(source="a", arch="sm_80", options=["-O3"])
    assert k1 != cache_key(source="b", arch="sm_90a", options=["-O3"])
    assert cache.get(k1) is None
    cache.put(k1, {"log": "ok"}, b"\x7fELF-bytes")
    entry = cache.get(k1)
    assert entry is not None and entry.data == b"\x7fELF-bytes" and entry.meta == {"log": "ok"}


def test_a_corrupt_entry_is_deleted_not_served(tmp_path):
    cache = CompileCache(tmp_path)
    key = cache_key(x=1)
    cache.put(key, {}, b"payload-bytes")
    path = tmp_path / key[:2] / key
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert cache.get(key) is None
    assert not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"KPCACHE1\n{not json")
    assert cache.get(key) is None


def test_cache_dir_knob_and_off_switch(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPACK_CACHE_DIR", str(tmp_path / "c"))
    assert CompileCache.default().root == tmp_path / "c"
    monkeypatch.setenv("KERNELPACK_CACHE_DIR", "off")
    off = CompileCache.default()
    assert not off.enabled
    off.put("ab" * 32, {}, b"x")
    assert off.get("ab" * 32) is None
    with config.override(cache_dir=tmp_path / "o"):
        assert CompileCache.default().root == tmp_path / "o"


def _writer(root: str, key: str, n: int) -> None:
    cache = CompileCache(__import__("pathlib").Path(root))
    for _ in range(n):
        cache.put(key, {"i": 0}, b"same-content" * 1000)
        assert cache.get(key) is not None


def test_four_processes_writing_one_key_never_expose_a_partial_entry(tmp_path):
    key = cache_key(race=True)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), key, 50)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    assert CompileCache(tmp_path).get(key).data == b"same-content" * 1000


def _slow_writer(root: str, key: str) -> None:
    cache = CompileCache(__import__("pathlib").Path(root))
    while True:
        cache.put(key, {}, os.urandom(4 << 20))


def test_a_writer_killed_mid_write_leaves_no_corrupt_entry(tmp_path):
    key = cache_key(kill=True)
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=_slow_writer, args=(str(tmp_path), key))
    p.start()
    time.sleep(1.5)
    os.kill(p.pid, signal.SIGKILL)
    p.join(10)
    entry = CompileCache(tmp_path).get(key)
    assert entry is None or len(entry.data) == 4 << 20


def test_cache_keys_change_with_kernelpacks_own_code(monkeypatch):
    """An entry made by other kernelpack code (same version number, other ABI derivation) is never served."""
    import kernelpack.core.cache as cache

    before = cache_key(source="a", arch="sm_90a")
    assert len(cache.code_digest()) == 64 and cache.code_digest() == cache.code_digest()
    monkeypatch.setattr(cache, "code_digest", lambda: "0" * 64)
    assert cache_key(source="a", arch="sm_90a") != before
