#!/usr/bin/env python3
"""FlashAttention-4 precompiled by kernelpack (libfa4: CuTe host launchers + kernelpack's driver shim, built on a
GPU-less machine) next to torch's SDPA (flash backend) in the same run: kernel time and TFLOP/s, forward and backward;
then a fresh process's first attention call (import kernelpack + load the library + first launch), beside what FA4's
own JIT took to compile the same kernel on the build machine (``fa4/manifest.json``, measured at prepare).

Run on the GPU machine after `scripts/gpu.py prepare fa4` built .gpu/fa4/ on the build machine:
    KERNELPACK_GPU_ARTIFACTS=$PWD/.gpu python3 bench/fa4_attention.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
TOKENS, WIDTH = 16384, 2048  # batch * seqlen and heads * head_dim, as FA's own benchmarks
SEQLENS = (1024, 4096, 8192)

FIRST_CALL = r"""
import sys, time, json, math
import torch
q, k, v = (torch.randn(2, 4096, 16, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
torch.cuda.synchronize()
t0 = time.perf_counter()
import kernelpack
t1 = time.perf_counter()
mod = kernelpack.load(sys.argv[1])
t2 = time.perf_counter()
out = torch.empty_like(q)
lse = torch.empty(2, 16, 4096, device="cuda", dtype=torch.float32)
major, minor = torch.cuda.get_device_capability()
if major == 10:
    mod.fwd_sm100_d128_causal(q, k, v, out, lse, 1.0 / math.sqrt(128), 4096)
else:
    mod.fwd_d128_causal(q, k, v, out, lse, 1.0 / math.sqrt(128))
torch.cuda.synchronize()
t3 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "load_ms": (t2 - t1) * 1e3, "first_call_ms": (t3 - t2) * 1e3,
                  "total_ms": (t3 - t0) * 1e3}))
"""


def timed(fn, iters: int = 20) -> float:  # type: ignore[no-untyped-def]
    """Median milliseconds per call over 5 batches of ``iters`` calls (after a warm-up)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / iters)
    return sorted(times)[2]


def flops(b: int, s: int, h: int, d: int, causal: bool) -> float:
    return 4 * b * h * s * s * d / (2 if causal else 1)


def measure(attn: Any, dtype: Any, d: int, causal: bool, s: int) -> dict[str, Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, h = TOKENS // s, WIDTH // d
    q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=dtype) for _ in range(4))
    out, lse = attn.forward(q, k, v, causal=causal)
    dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
    kp_f = timed(lambda: attn.forward(q, k, v, causal=causal, out=out, lse=lse))
    kp_b = timed(lambda: attn.backward(q, k, v, out, do, lse, causal=causal, dq=dq, dk=dk, dv=dv))
    qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
    dot = do.transpose(1, 2)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        th_f = timed(lambda: sdpa(qt, kt, vt, is_causal=causal))
        o = sdpa(qt, kt, vt, is_causal=causal)
        th_b = timed(lambda: torch.autograd.grad(o, (qt, kt, vt), dot, retain_graph=True))
    f = flops(b, s, h, d, causal)
    return {"dtype": str(dtype).split(".")[-1], "head_dim": d, "causal": causal, "seqlen": s, "batch": b, "heads": h,
            "fwd_ms": kp_f, "fwd_sdpa_ms": th_f, "bwd_ms": kp_b, "bwd_sdpa_ms": th_b,
            "fwd_tflops": f / kp_f / 1e9, "fwd_sdpa_tflops": f / th_f / 1e9,
            "bwd_tflops": 2.5 * f / kp_b / 1e9, "bwd_sdpa_tflops": 2.5 * f / th_b / 1e9}


def kernel_rows(attn: Any) -> list[dict[str, Any]]:
    return [measure(attn, dtype, d, causal, s) for dtype in (torch.bfloat16, torch.float16) for d in (64, 128)
            for causal in (False, True) for s in SEQLENS]


def first_call(lib: Path, runs: int = 9) -> list[dict[str, float]]:
    """A fresh process's first call, ``runs`` times after one discarded run. kernelpack's modules are compiled to
    bytecode first, as ``pip install`` leaves an installed package (without it every process compiles them from
    source: ~4x the import time)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src" / "kernelpack")], check=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    out = []
    for i in range(runs + 1):
        r = subprocess.run([sys.executable, "-c", FIRST_CALL, str(lib)], capture_output=True, text=True, env=env,
                           timeout=120, check=True)
        if i:
            out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--first-call", action="store_true", help="only the fresh process's first call (no kernel table)")
    args = ap.parse_args()
    root = Path(os.environ.get("KERNELPACK_GPU_ARTIFACTS", ROOT / ".gpu")) / "fa4"
    lib = root / "lib" / "libfa4.so"
    if not lib.is_file():
        print(f"no {lib}: run scripts/gpu.py prepare fa4 on the build machine first", file=sys.stderr)
        return 1
    sys.path.insert(0, str(ROOT / "corpus" / "fa4"))
    from attention import FA4

    torch.zeros(1, device="cuda")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; kernelpack libfa4 "
          f"({lib.stat().st_size / 2**20:.1f} MiB) vs torch SDPA (flash backend), same inputs; "
          f"batch*seqlen = {TOKENS}, heads*head_dim = {WIDTH}; ms per call: 20 calls issued back to back "
          f"between CUDA events, median of 5 batches (each call runs for >= 0.1 ms, so the queue hides the host "
          f"cost); TFLOP/s (backward = 2.5 x forward FLOPs)")
    rows = [] if args.first_call else kernel_rows(FA4(lib, root / "fa4_meta.json"))
    if rows:
        print(f"{'dtype':8} {'hd':>3} {'causal':>6} {'seqlen':>6} | {'fwd ms':>7} {'TFLOP/s':>7} {'SDPA ms':>7} "
              f"{'TFLOP/s':>7} {'ratio':>5} | {'bwd ms':>7} {'TFLOP/s':>7} {'SDPA ms':>7} {'TFLOP/s':>7} {'ratio':>5}")
    for r in rows:
        print(f"{r['dtype']:8} {r['head_dim']:3} {str(r['causal']):>6} {r['seqlen']:6} | {r['fwd_ms']:7.3f} "
              f"{r['fwd_tflops']:7.1f} {r['fwd_sdpa_ms']:7.3f} {r['fwd_sdpa_tflops']:7.1f} "
              f"{r['fwd_sdpa_ms'] / r['fwd_ms']:5.2f} | {r['bwd_ms']:7.3f} {r['bwd_tflops']:7.1f} "
              f"{r['bwd_sdpa_ms']:7.3f} {r['bwd_sdpa_tflops']:7.1f} {r['bwd_sdpa_ms'] / r['bwd_ms']:5.2f}")
    runs = first_call(lib)
    med = sorted(runs, key=lambda x: x["total_ms"])[len(runs) // 2]
    each = ", ".join(f"{x['total_ms']:.1f}" for x in runs)
    manifest = json.loads((root / "manifest.json").read_text()) if (root / "manifest.json").is_file() else {}
    jit = manifest.get("jit", {})
    print(f"\nfirst attention call in a fresh process (bf16, d128, causal; torch and its CUDA context already up; "
          f"kernelpack compiled to bytecode), "
          f"median of {len(runs)}: {med['total_ms']:.1f} ms = import kernelpack {med['import_ms']:.1f} + load "
          f"{med['load_ms']:.1f} + first call {med['first_call_ms']:.1f} (all: {each})")
    if jit:
        print(f"FA4's own JIT for the same kernel on the build machine ({jit.get('machine', '?')}): import "
              f"{jit['import_s']:.2f} s + compile {jit['compile_s']:.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "first_call": runs, "jit": jit}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
