"""On the H200: kernels that carry only compute_80 PTX (`scripts/gpu.py prepare ptx`: CUDA C++ via nvcc, Triton, CuTe
where it was installed at build time), JIT-compiled by the driver on first load, run correctly through the runtime's
C and Python paths; the C library built from the same bundle names that binary and JIT-loads it (preload). The first
launch (JIT) and a warm launch are timed in fresh processes and printed, not asserted: with the driver's JIT cache
off, with an empty cache, and with the cache the previous run filled."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kernelpack
from gpu import GPU_MARKS, cuda_torch, require_carried
from kernelpack.bundle.kpack import Bundle
from runtime_support import python_path

pytestmark = GPU_MARKS
HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def bundle_path() -> Path:
    return require_carried("ptx/ptx80.kpack", "ptx")


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    return cuda_torch()


def _mod(path: str, bundle_path: Path):  # type: ignore[no-untyped-def]
    if path == "runtime_python":
        with python_path():
            return kernelpack.load(str(bundle_path))
    return kernelpack.load(str(bundle_path))


@pytest.mark.parametrize("path", ["runtime_c", "runtime_python"])
def test_compute_80_ptx_runs_on_this_gpu_after_the_driver_jit(bundle_path, torch, path):
    bundle = Bundle.read(bundle_path)
    assert all(b.kind == "ptx" and str(b.target) == "compute_80" for a in bundle for b in a.binaries)
    mod = _mod(path, bundle_path)
    n = 100_003
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    want = 1.5 * x + y
    assert mod.ptx_axpy.binary_for(0) == "compute_80 PTX"
    mod.ptx_axpy(1.5, x, y, n, grid=(n + 255) // 256, block=256)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, want)
    labels = {a.label for a in bundle}
    if "ptx_tr_add" in labels:
        out = torch.full((n,), float("nan"), device="cuda")
        mod.ptx_tr_add(x, want, out, n, grid=(n + 1023) // 1024)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x + want)
    if "ptx_cute_add" in labels:
        a, b = torch.randn(300, 257, device="cuda"), torch.randn(300, 257, device="cuda")
        c = torch.full((300, 257), float("nan"), device="cuda")
        mod.ptx_cute_add(a, b, c)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + b)


def test_the_c_library_names_and_jit_loads_the_ptx(bundle_path, tmp_path):
    from kernelpack.clib import Library

    built = Library("kpptx", Bundle.read(bundle_path)).build(tmp_path / "kpptx")
    lib = ctypes.CDLL(str(built.shared))
    lib.kpptx_last_error.restype = ctypes.c_char_p
    buf = ctypes.create_string_buffer(64)
    assert lib.kpptx_binary_for_device(b"ptx_axpy", 9, 0, buf, 64) == 0, lib.kpptx_last_error()
    assert buf.value == b"compute_80 PTX"
    t0 = time.perf_counter()
    assert lib.kpptx_preload(0) == 0, lib.kpptx_last_error()
    print(f"C library preload of {len(Bundle.read(bundle_path).artifacts)} PTX kernels: "
          f"{(time.perf_counter() - t0) * 1e3:.1f} ms")


def test_first_launch_jit_time_against_a_warm_launch(bundle_path, tmp_path, capsys):
    cuda_torch()
    rows = []
    cache = tmp_path / "nv-cache"
    for what, env in (("JIT cache off", {"CUDA_CACHE_DISABLE": "1"}),
                      ("empty JIT cache", {"CUDA_CACHE_PATH": str(cache)}),
                      ("JIT cache filled", {"CUDA_CACHE_PATH": str(cache)})):
        proc = subprocess.run([sys.executable, str(HERE / "ptx_jit_timing.py"), str(bundle_path)],
                              capture_output=True, text=True, timeout=300, env={**os.environ, **env})
        assert proc.returncode == 0, proc.stderr[-3000:]
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        assert r["binary"] == "compute_80 PTX"
        rows.append(f"{what:>17}: first launch {r['first_launch_ms']:8.2f} ms, warm launch "
                    f"{r['warm_launch_us']:7.1f} us (launch + sync)")
    text = "compute_80 PTX on this GPU (ptx_axpy):\n" + "\n".join(rows)
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "ptx_jit.txt").write_text(text + "\n")
    with capsys.disabled():
        print("\n" + text)
