"""On a real GPU: 32 threads making the first launches of many kernels at once, repeated 100 times, results checked,
through the C library (tests/concurrency_gpu_main.c, a fresh process per repetition) and the Python runtime (a fresh
``kernelpack.load`` per repetition). The bundle is ``$KERNELPACK_GPU_ARTIFACTS/demo.kpack`` when carried, else
compiled here. Skipped cleanly without a GPU.
"""

from __future__ import annotations

import os
import struct
import subprocess
import threading
from pathlib import Path

import pytest

from gpu import demo_kernels, requires_gpu
from kernelpack.bundle.kpack import Bundle
from toolchain_support import CC

HERE = Path(__file__).parent
THREADS, REPS = 32, int(os.environ.get("KERNELPACK_CONCURRENCY_REPS", "100"))


@pytest.fixture(scope="module")
def demo_bundle() -> Bundle:
    return demo_kernels()


@requires_gpu
def test_c_library_32_threads_first_launches_100_fresh_processes(demo_bundle, tmp_path):
    from kernelpack.clib import Library

    lib = Library("kpconc", *demo_bundle.artifacts).build(tmp_path / "kpconc")
    exe = tmp_path / "concurrency_gpu_main"
    cc = CC
    subprocess.run([cc, "-std=c99", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", f"-I{lib.include_dir}",
                    str(HERE / "concurrency_gpu_main.c"), "-o", str(exe), f"-L{lib.lib_dir}", "-lkpconc",
                    f"-Wl,-rpath,{lib.lib_dir}", "-ldl", "-lpthread", "-lm"], check=True)
    proc = subprocess.run([str(exe), str(REPS)], capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0 and "ALL PASSED" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count(f"ok={THREADS * 6} bad=0") == REPS


@requires_gpu
def test_python_runtime_32_threads_first_launches_100_fresh_loads(demo_bundle):
    torch = pytest.importorskip("torch")
    import kernelpack

    n, rows, cols = 4096, 64, 64
    dev = torch.device("cuda")
    x = [torch.randn(n, device=dev) for _ in range(THREADS)]
    m = [torch.randn(rows, cols, device=dev) for _ in range(THREADS)]
    affine = struct.pack("<ffi", 0.5, 0.25, 0)
    for rep in range(REPS):
        mod = kernelpack.load(demo_bundle)
        y0 = [torch.randn(n, device=dev) for _ in range(THREADS)]
        y = [v.clone() for v in y0]
        out_f = [torch.empty(n, device=dev) for _ in range(THREADS)]
        out_h = [torch.empty(n, device=dev, dtype=torch.float16) for _ in range(THREADS)]
        out_a = [torch.empty(n, device=dev) for _ in range(THREADS)]
        sums = [torch.empty(rows, device=dev) for _ in range(THREADS)]
        xh = [v.half() for v in x]
        torch.cuda.synchronize()
        barrier, errors = threading.Barrier(THREADS), []

        def worker(t: int, mod=mod, barrier=barrier, errors=errors, y=y, out_f=out_f, out_h=out_h, out_a=out_a,
                   sums=sums, xh=xh) -> None:  # type: ignore[no-untyped-def]
            try:
                barrier.wait()
                mod.axpy(0.5 + t, x[t], y[t], n, grid=n // 256, block=256)
                mod.scale(x[t], out_f[t], 2.0 + t, n, grid=n // 256, block=256)
                mod.scale(xh[t], out_h[t], 3.0, n, grid=n // 256, block=256)
                mod.affine(x[t], out_a[t], affine, n, grid=n // 256, block=256)
                mod.row_sum(m[t], sums[t], rows, cols, grid=rows, block=256)
                torch.cuda.current_stream().synchronize()
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        torch.cuda.synchronize()
        assert not errors, (rep, errors[:3])
        for t in range(THREADS):
            torch.testing.assert_close(y[t], (0.5 + t) * x[t] + y0[t], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(out_f[t], x[t] * (2.0 + t), rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(out_h[t].float(), (xh[t].float() * 3.0).half().float(), rtol=1e-3, atol=1e-3)
            torch.testing.assert_close(out_a[t], x[t] * 0.5 + 0.25, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(sums[t], m[t].sum(dim=1), rtol=1e-4, atol=1e-4)
