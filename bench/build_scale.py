#!/usr/bin/env python3
"""A wide Triton sweep built locally (``-j 2``) and on Ray on this machine (``--executor ray -j 2``): total wall,
per-step compile time, Ray's overhead per step, and the wall time projected on 8 and 64 workers.

The project: one small Triton kernel, specialized over BLOCK x num_warps x dtype, each specialization built for
sm_80 and sm_90a (one build step per specialization, compiling both archs): ``--n`` specializations counted per arch
(default 1,000 = 500 steps x 2 archs). Each build is a fresh CLI process with empty compiler caches (kernelpack's and
Triton's), ``--force``, ``--json`` (the per-step times are measured in the workers).

Ray's overhead per step, two ways:
- round trip: a no-op task with the same shape as a build step (takes the project snapshot by reference, returns
  4 KiB of bytes), 2 in flight on the same 2-CPU Ray instance, (wall / tasks) x 2;
- in the build: (Ray build wall - Ray start/stop - local build wall) / steps x workers.
Projection on W workers: the measured step times (plus the round-trip overhead on Ray) scheduled longest first onto W
workers, plus the driver's fixed time (the local build's wall minus its compile makespan on 2 workers).

Prints a Markdown table (the docs/benchmarks.md section).   python3 bench/build_scale.py [--n 1000] [-j 2]
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNEL = '''import triton
import triton.language as tl


@triton.jit
def scale_shift(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 3 + 1, mask=mask)
'''
BLOCKS = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
WARPS = (1, 2, 4, 8, 16)
DTYPES = ("fp32", "fp16", "bf16", "fp64", "i32", "i16", "i8", "i64", "u8", "u32")
ARCHS = ("sm_80", "sm_90a")


def make_project(d: Path, n: int) -> int:
    """The sweep's first ``n // 2`` (dtype, BLOCK, num_warps) configs; returns the number of steps."""
    configs = [(t, b, w) for t in DTYPES for b in BLOCKS for w in WARPS][: max(1, n // len(ARCHS))]
    specs = [f'{{ variant = "{t}_b{b}_w{w}", num_warps = {w}, constexprs = {{ BLOCK = {b} }}, '
             f'signature = {{ x_ptr = "*{t}", out_ptr = "*{t}", n = "i32" }} }}' for t, b, w in configs]
    (d / "sweep.py").write_text(KERNEL)
    (d / "kernelpack.toml").write_text(
        f'[library]\nname = "sweep"\narchs = {json.dumps(list(ARCHS))}\noutputs = ["bundle", "library"]\n\n'
        '[[triton]]\nkernel = "sweep.py:scale_shift"\nname = "scale_shift"\n'
        'signature = { x_ptr = "*fp32", out_ptr = "*fp32", n = "i32" }\n'
        f'specializations = [\n  {("," + chr(10) + "  ").join(specs)}\n]\n')
    return len(configs)


def kp_build(d: Path, cache: Path, args: list[str]) -> tuple[float, dict]:
    env = dict(os.environ, KERNELPACK_CACHE_DIR=str(cache / "kernelpack"), TRITON_CACHE_DIR=str(cache / "triton"),
               RAY_USAGE_STATS_ENABLED="0")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "kernelpack.cli", "build", "--force", "--json", *args], cwd=d, env=env,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"kernelpack build {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}")
    return wall, json.loads(r.stdout)


def ray_costs(d: Path, workers: int, tasks: int) -> tuple[float, float]:
    """(ray start + stop seconds, round-trip seconds per no-op step at ``workers`` in flight)."""
    code = f"""
import json, logging, sys, time
import ray
from kernelpack.project import load_project
from kernelpack.project.distributed import snapshot
from kernelpack.project.jobs import Outcome
t0 = time.perf_counter()
ray.init(address="local", num_cpus={workers}, include_dashboard=False, logging_level=logging.WARNING,
         log_to_driver=False)
@ray.remote(num_cpus=1, max_retries=3, retry_exceptions=False)
def noop(snap, job):
    return Outcome(job, True, "bundle", bytes(4096))
ref = ray.put(snapshot(load_project({str(d)!r})))
ray.get([noop.remote(ref, str(i)) for i in range({workers} * 4)])  # workers up, snapshot shipped (as in a build)
t1 = time.perf_counter()
running = []
for i in range({tasks}):
    if len(running) >= {workers}:
        done, running = ray.wait(running, num_returns=1)
        ray.get(done)
    running.append(noop.remote(ref, str(i)))
ray.get(running)
t2 = time.perf_counter()
ray.shutdown()
t3 = time.perf_counter()
print(json.dumps([(t1 - t0) + (t3 - t2), (t2 - t1) / {tasks} * {workers}]))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0"))
    if r.returncode != 0:
        raise SystemExit(f"the Ray round-trip measurement failed:\n{r.stderr}")
    start_stop, per_step = json.loads(r.stdout.strip().splitlines()[-1])
    return start_stop, per_step


def makespan(times: list[float], workers: int) -> float:
    """Longest-first list scheduling of ``times`` onto ``workers``."""
    loads = [0.0] * workers
    for t in sorted(times, reverse=True):
        heapq.heapreplace(loads, loads[0] + t)
    return max(loads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="specializations, counted per arch (default 1000)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--keep", default=None, help="keep the generated project here")
    a = ap.parse_args()
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="kp-build-scale-"))
    proj = work / "project"
    proj.mkdir(parents=True, exist_ok=True)
    steps = make_project(proj, a.n)
    local_wall, local = kp_build(proj, work / "cache-local", ["-j", str(a.jobs), "-o", str(work / "out-local")])
    ray_wall, on_ray = kp_build(proj, work / "cache-ray", ["--executor", "ray", "-j", str(a.jobs), "-o",
                                                           str(work / "out-ray")])
    same = all((work / "out-local" / f).read_bytes() == (work / "out-ray" / f).read_bytes()
               for f in ("sweep.kpack", "lib/libsweep.so"))
    start_stop, rt = ray_costs(proj, a.jobs, min(2000, 4 * steps))
    lt = list(local["job_seconds"].values())
    rt_steps = list(on_ray["job_seconds"].values())
    mean_l, mean_r = sum(lt) / len(lt), sum(rt_steps) / len(rt_steps)
    in_build = (ray_wall - start_stop - local_wall) / steps * a.jobs
    fixed = max(0.0, local_wall - makespan(lt, a.jobs))
    rows = [
        ("specializations (steps x archs)", f"{steps * len(ARCHS)} ({steps} steps x {len(ARCHS)} archs)"),
        (f"local -j {a.jobs}: wall", f"{local_wall:.1f} s"),
        (f"Ray -j {a.jobs} (local instance): wall", f"{ray_wall:.1f} s (of which Ray start + stop {start_stop:.1f} s)"),
        ("bundle and library byte-identical", "yes" if same else "NO"),
        ("per-step compile time, local (mean / max)", f"{mean_l * 1000:.0f} / {max(lt) * 1000:.0f} ms"),
        ("per-step compile time, on Ray (mean / max)", f"{mean_r * 1000:.0f} / {max(rt_steps) * 1000:.0f} ms"),
        ("Ray overhead per step: no-op round trip", f"{rt * 1000:.1f} ms (target <= 50 ms)"),
        ("Ray overhead per step: in the build", f"{in_build * 1000:.1f} ms"),
        ("link + driver (fixed)", f"{fixed:.1f} s"),
    ]
    for w in (8, 64):
        local_proj = fixed + makespan(lt, w)
        ray_proj = fixed + start_stop + makespan([t + rt for t in lt], w)
        rows.append((f"projected wall on {w} workers", f"{ray_proj:.1f} s on Ray ({local_proj:.1f} s without "
                                                       f"Ray's overheads)"))
    print(f"{platform.node()}: Python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"{time.strftime('%Y-%m-%d', time.gmtime())}")
    print("\n| measure | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
