#!/usr/bin/env python3
"""Launch cost and kernel time: kernelpack's launch of a Triton kernel vs Triton's own JIT launch of the same kernel.

Run on the GPU machine (Triton 3.6 there): both sides compile with that Triton, kernelpack through
``kernelpack.triton.compile`` into a bundle loaded with ``kernelpack.load``, Triton through its JIT. Reports
host time per launch of a launch-bound vector add and device time (CUDA events) of a large vector add and a
matmul, and whether the two cubins are identical. Target: kernelpack within 3% of Triton (or faster).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import torch  # noqa: E402
import triton  # noqa: E402

import kernelpack.frontends.triton.compile as kt  # noqa: E402
from kernelpack.bundle.kpack import Bundle  # noqa: E402
from kernelpack.core.cache import CompileCache  # noqa: E402
from triton_kernels import add_kernel, matmul_kernel  # noqa: E402

ADD = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
MM = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32",
      "stride_ak": "i32", "stride_bk": "i32", "stride_bn": "i32", "stride_cm": "i32", "stride_cn": "i32"}
MM_CFG = {"BM": 128, "BN": 128, "BK": 32}
MM_WARPS = 8


def build(tmp: Path) -> Bundle:
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    cache = CompileCache(tmp / "cache")
    add = kt.compile(add_kernel, ADD, constexprs={"BLOCK": 1024}, arch=arch, name="bench_add", cache=cache,
                     specializations=[{"divisibility": "all"}])
    # Triton's JIT treats an int argument equal to 1 as a constexpr: do the same for the unit strides
    mm = kt.compile(matmul_kernel, {k: v for k, v in MM.items() if k not in ("stride_ak", "stride_bn", "stride_cn")},
                    constexprs={**MM_CFG, "stride_ak": 1, "stride_bn": 1, "stride_cn": 1}, num_warps=MM_WARPS,
                    arch=arch, name="bench_mm", cache=cache,
                    specializations=[{"divisibility": ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am",
                                                       "stride_bk", "stride_cm"]}])
    return Bundle.of(add, mm)


def host_per_launch(fn, iters: int = 20000, reps: int = 5) -> float:  # type: ignore[no-untyped-def]
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(out)


def device_ms(fn, iters: int = 50) -> float:  # type: ignore[no-untyped-def]
    for _ in range(5):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def row(what: str, kp: float, tr: float, unit: str) -> bool:
    ratio = kp / tr
    ok = ratio <= 1.03
    print(f"{what:<34} kernelpack {kp:9.3f} {unit}   triton {tr:9.3f} {unit}   ratio {ratio:5.3f}  "
          f"{'OK (within 3% or faster)' if ok else 'SLOWER than 3%'}")
    return ok


def main() -> int:
    print(f"triton {triton.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    try:
        from kernelpack.runtime import fast_path, load
    except ImportError:
        print("kernelpack.runtime is not available: nothing to compare")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        bundle = build(Path(tmp))
        mod = load(bundle.write(Path(tmp) / "bench.kpack"))
        ok = True
        x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
        out = torch.empty_like(x)
        n = x.numel()
        compiled = add_kernel.warmup(x, y, out, n, BLOCK=1024, grid=(n // 1024,))
        if hasattr(compiled, "asm"):
            same = compiled.asm["cubin"] == bundle.families()["bench_add"][0].binaries[0].data
            print(f"bench_add cubin identical to the Triton JIT's: {same}")

        def kp_add() -> None:
            mod.bench_add(x, y, out, n, grid=n // 1024)

        def tr_add() -> None:
            add_kernel[(n // 1024,)](x, y, out, n, BLOCK=1024)

        kp_add()
        torch.cuda.synchronize()
        assert torch.equal(out, x + y)
        print("kernelpack fast path (after the first launch):", fast_path())
        ok &= row("vector add 4096 (host us/launch)", host_per_launch(kp_add), host_per_launch(tr_add), "us")

        bx, by = torch.randn(1 << 26, device="cuda"), torch.randn(1 << 26, device="cuda")
        bout, bn = torch.empty_like(bx), bx.numel()
        ok &= row("vector add 2^26 (device ms)", device_ms(lambda: mod.bench_add(bx, by, bout, bn, grid=bn // 1024)),
                  device_ms(lambda: add_kernel[(bn // 1024,)](bx, by, bout, bn, BLOCK=1024)), "ms")

        m = nn = k = 4096
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, nn, device="cuda", dtype=torch.float16)
        c = torch.empty(m, nn, device="cuda", dtype=torch.float16)
        grid = (m // 128, nn // 128)

        def kp_mm() -> None:
            mod.bench_mm(a, b, c, m, nn, k, k, nn, nn, grid=grid)

        def tr_mm() -> None:
            matmul_kernel[grid](a, b, c, m, nn, k, k, 1, nn, 1, nn, 1, num_warps=MM_WARPS, **MM_CFG)

        kp_mm()
        torch.cuda.synchronize()
        torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=0.5)
        ok &= row("matmul 4096^3 fp16 (device ms)", device_ms(kp_mm), device_ms(tr_mm), "ms")
    print("RESULT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
