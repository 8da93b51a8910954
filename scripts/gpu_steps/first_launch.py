"""Where a process's first kernelpack launch with torch tensors spends its time (bench/launch_overhead.py's
fresh-process line: ~10 ms on the H200 against 0.33 ms for a second kernel's first launch), phase by phase.

    python3 scripts/gpu_steps/first_launch.py .gpu/runtime/many.kpack [--runs 3]
    python3 scripts/gpu_steps/first_launch.py .gpu/loadscale/synth-100-10-sm_90a.kpack --synth k5:2

Each run is a fresh process: torch and CUDA initialised and the tensors made before the clock (as the bench does),
then ``import kernelpack``, ``kernelpack.load`` and the first launch of ``k7`` with every phase of that launch timed
by wrapping the functions it goes through (inclusive times: a phase's time contains the phases it calls), then the
first launch of ``k8``. Prints a markdown table of medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

# each child's phases: a function wrapped adds its inclusive time to T[label]
WRAP = r"""
import json, sys, time
T = {}
def wrap(owner, name, label):
    f = getattr(owner, name)
    def w(*args, **kw):
        t = time.perf_counter()
        try:
            return f(*args, **kw)
        finally:
            T[label] = T.get(label, 0.0) + time.perf_counter() - t
    setattr(owner, name, w)
"""

CHILD = WRAP + r"""
import torch
torch.cuda.init()
a = torch.randn(4096, device="cuda"); b = torch.randn(4096, device="cuda"); c = torch.empty(4096, device="cuda")
torch.cuda.synchronize()
t0 = time.perf_counter()
import kernelpack
from kernelpack.runtime import driver, fast, family, loader, module
t1 = time.perf_counter()
wrap(driver, "get", "driver.get (open libcuda, entry points)")
wrap(fast, "sync_driver", "sync_driver (C path's entry points)")
wrap(fast, "install_torch_bridge", "install_torch_bridge (bridge + stream getter)")
wrap(module.KernelModule, "_family", "family build (first use)")
wrap(family.KernelFamily, "_load_device", "device table (_load_device)")
wrap(family.KernelFamily, "_publish", "publish to the C path")
wrap(family.KernelFamily, "load_entry", "load_entry (blob, verify, module load, facts)")
from kernelpack import bundle_index
wrap(bundle_index.BundleIndex, "family_record", "  dispatch record read (format 2)")
wrap(bundle_index.BundleIndex, "record_binary", "  blob check + expand (from the record)")
wrap(family.SpecSource, "binary", "  blob check + expand")
wrap(family.SpecSource, "verify_binary", "  cubin parse + ABI check")
wrap(loader.Loader, "kernel", "  cuLibraryLoadData + get kernel + context load")
m = kernelpack.load(sys.argv[1])
t2 = time.perf_counter()
m.k7(a, b, c, 4096, grid=16, block=256)
t3 = time.perf_counter()
torch.cuda.synchronize()
m.k8(a, b, c, 4096, grid=16, block=256)
torch.cuda.synchronize()
t4 = time.perf_counter()
assert torch.allclose(c, a + 8 * b)
T = {k: v * 1e3 for k, v in T.items()}
T.update({"import kernelpack": (t1 - t0) * 1e3, "kernelpack.load": (t2 - t1) * 1e3,
          "first launch k7 (no sync)": (t3 - t2) * 1e3, "k8 first launch + sync": (t4 - t3) * 1e3})
print(json.dumps(T))
"""


SYNTH_CHILD = WRAP + r"""
import kernelpack
from kernelpack import bundle_index
from kernelpack.runtime import driver, fast, family, loader, module
m = kernelpack.load(sys.argv[1])
d = driver.get()
d.set_current(d.device(0).context)
buf = d.mem_alloc_async(1 << 20, 0, "bench")
wrap(bundle_index.BundleIndex, "family_record", "  dispatch record read")
wrap(fast, "make_launcher", "  C launcher made")
wrap(module.KernelModule, "_family", "family on first use")
wrap(family, "prepare_fast_path", "prepare_fast_path (each publish)")
wrap(family.KernelFamily, "_load_device", "device table (_load_device)")
wrap(family.KernelFamily, "_publish", "publish to the C path")
wrap(family.KernelFamily, "load_entry", "load_entry")
wrap(bundle_index.BundleIndex, "record_binary", "  blob check + expand")
wrap(loader.Loader, "kernel", "  cuLibraryLoadData + get kernel + context load")
args = (buf, 1) if sys.argv[3] == "2" else (*[buf] * 8, 1, *[16] * 7, 1.0, 2.0, 3)
t0 = time.perf_counter()
fn = m[sys.argv[2]]
fn(*args, grid=1, block=32)
t1 = time.perf_counter()
warm = []
for _ in range(200):
    s = time.perf_counter(); fn(*args, grid=1, block=32); warm.append(time.perf_counter() - s)
warm.sort()
T = {k: v * 1e3 for k, v in T.items()}
T.update({"first use + first launch": (t1 - t0) * 1e3, "warm launch": warm[100] * 1e3})
print(json.dumps(T))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--synth", metavar="FAMILY:PARAMS", help="a bench/load_scale.py bundle: time family FAMILY's "
                    "first use and launch with integer pointers (PARAMS: its kernel's, 2 or 19), no torch")
    args = ap.parse_args()
    runs = []
    child, extra = (CHILD, []) if args.synth is None else (SYNTH_CHILD, args.synth.split(":"))
    for i in range(args.runs + 1):  # run 0 discarded: it writes the .pyc files
        out = subprocess.run([sys.executable, "-c", child, args.bundle, *extra], capture_output=True, text=True,
                             check=False)
        if out.returncode:
            print(out.stderr[-3000:])
            return 1
        if i:
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    keys = list(dict.fromkeys(k for r in runs for k in r))
    what = "with torch tensors" if args.synth is None else f"of {args.synth} (integer pointers)"
    print(f"# First launch {what}, phase by phase (median of {len(runs)} fresh processes, ms, inclusive)\n")
    print("| phase | ms |\n|---|---:|")
    for k in keys:
        print(f"| {k} | {statistics.median(r.get(k, 0.0) for r in runs):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
