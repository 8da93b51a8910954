"""The compile cache under stress through a real frontend (kernelpack.cuda.compile with NVRTC): 4 processes compiling
the same keys at once, and writers SIGKILLed in the middle of writing. No corrupted entry is ever served: every
entry a reader gets is byte-identical to an uncached compile, and the cache recovers (later compiles hit or rewrite).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pytest

from kernelpack.core.cache import CompileCache
from toolchain_support import needs_nvrtc

pytestmark = needs_nvrtc

KEYS = 6  # distinct sources (distinct cache keys) per arch
SRC = 'extern "C" __global__ void k{i}(float* x, int n) {{ int j = threadIdx.x; if (j < n) x[j] = x[j] * {i}.5f; }}\n'


def _source(tmp: Path, i: int) -> Path:
    p = tmp / f"k{i}.cu"
    if not p.exists():
        p.write_text(SRC.format(i=i))
    return p


def _compile(root: str, src_dir: str, i: int) -> dict[str, bytes]:
    from kernelpack.frontends.cuda import compile as cuda

    arts = cuda.compile(_source(Path(src_dir), i), [f"k{i}"], arch=["sm_80", "sm_90a"], compiler="nvrtc",
                        cache=CompileCache(Path(root)))
    return {str(b.arch): b.data for a in arts for b in a.binaries}


def _compile_all(root: str, src_dir: str, rounds: int, out: multiprocessing.Queue) -> None:
    seen = {}
    for _ in range(rounds):
        for i in random.sample(range(KEYS), KEYS):
            seen[i] = _compile(root, src_dir, i)
    out.put({i: {a: d.hex() for a, d in v.items()} for i, v in seen.items()})


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Uncached compiles of every source: what any cache hit must equal byte for byte."""
    src = tmp_path_factory.mktemp("src")
    return src, {i: _compile_nocache(src, i) for i in range(KEYS)}


def _compile_nocache(src: Path, i: int) -> dict[str, bytes]:
    from kernelpack.frontends.cuda import compile as cuda

    arts = cuda.compile(_source(src, i), [f"k{i}"], arch=["sm_80", "sm_90a"], compiler="nvrtc",
                        cache=CompileCache(None))
    return {str(b.arch): b.data for a in arts for b in a.binaries}


def test_four_processes_compiling_the_same_keys_at_once(tmp_path, reference):
    src, want = reference
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_compile_all, args=(str(tmp_path), str(src), 3, q)) for _ in range(4)]
    for p in procs:
        p.start()
    results = [q.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    for got in results:
        assert {i: {a: bytes.fromhex(d) for a, d in v.items()} for i, v in got.items()} == want
    entries = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    for i in range(KEYS):  # the same keys as one process compiling alone, and no temp files left behind
        _compile(str(tmp_path / "alone"), str(src), i)
    alone = sorted(p.relative_to(tmp_path / "alone") for p in (tmp_path / "alone").rglob("*") if p.is_file())
    assert entries == alone and len(entries) >= 2 * KEYS


class _SlowFile:
    """A file whose writes stop halfway for a while: widens the window in which SIGKILL lands mid-write."""

    def __init__(self, f) -> None:  # type: ignore[no-untyped-def]
        self.f = f

    def write(self, data: bytes) -> int:
        half = len(data) // 2
        self.f.write(data[:half])
        self.f.flush()
        time.sleep(0.02)
        return half + self.f.write(data[half:])

    def __enter__(self):  # type: ignore[no-untyped-def]
        return self

    def __exit__(self, *exc) -> None:  # type: ignore[no-untyped-def]
        self.f.close()


def _hammer(root: str, src_dir: str) -> None:
    """Compile forever with the cache on (writes stalled halfway); wipe every fifth entry so writes keep happening."""
    from kernelpack.core import cache as cache_mod

    real_fdopen = os.fdopen
    cache_mod.os = type("os_slow", (), {**{k: getattr(os, k) for k in ("replace", "fdopen")},
                                        "fdopen": staticmethod(lambda *a, **k: _SlowFile(real_fdopen(*a, **k)))})
    cache_root = Path(root)
    while True:
        for i in range(KEYS):
            _compile(root, src_dir, i)
        for entry in list(cache_root.glob("*/*"))[::5]:
            entry.unlink(missing_ok=True)


def test_writers_killed_mid_write_never_leave_a_served_corrupt_entry(tmp_path, reference):
    src, want = reference
    golden_root = tmp_path.parent / f"{tmp_path.name}-golden"
    for i in range(KEYS):  # every entry the writers make, made once by one undisturbed process
        _compile(str(golden_root), str(src), i)
    golden = CompileCache(golden_root)
    ctx = multiprocessing.get_context("spawn")
    kills = served = torn = 0
    for delay in (0.9, 1.3, 1.7, 2.2, 2.6):
        procs = [ctx.Process(target=_hammer, args=(str(tmp_path), str(src))) for _ in range(2)]
        for p in procs:
            p.start()
        time.sleep(delay)
        for p in procs:
            os.kill(p.pid, signal.SIGKILL)
            p.join(10)
            kills += 1
        cache = CompileCache(tmp_path)
        for entry in tmp_path.glob("*/*"):
            if entry.name.startswith("."):  # a killed writer's temp file: never read as an entry
                torn += 1
                continue
            got = cache.get(entry.name)
            if got is not None:
                assert got.data == golden.get(entry.name).data, "a served entry differs from an undisturbed compile"
                served += 1
        # the cache recovers: compiling again returns exactly the uncached bytes
        for i in range(KEYS):
            assert _compile(str(tmp_path), str(src), i) == want[i]
    assert kills == 10 and served > 0
    print(f"cache stress: {kills} writers killed, {torn} torn temp files left, {served} entries served intact")
