"""Where loading a large bundle and the first launch spend their time, on the machine it runs on (GPU or fake).

    python scripts/gpu_steps/profile_load.py BUNDLE FAMILY > profile.txt

Prints three parts: ``-X importtime`` of ``import kernelpack`` + the runtime (a fresh child, the 25 slowest
modules), a cProfile of ``kernelpack.load`` (a fresh child), and a cProfile of the family's first use and its first
launch (same child), each sorted by cumulative time.
"""

from __future__ import annotations

import subprocess
import sys

CHILD = r"""
import cProfile, io, pstats, sys, time
prof = cProfile.Profile()
t0 = time.perf_counter()
prof.enable()
import kernelpack
from kernelpack.runtime import driver
mod = kernelpack.load(sys.argv[1])
prof.disable()
t1 = time.perf_counter()
d = driver.get()
d.set_current(d.device(0).context)
buf = d.mem_alloc_async(1 << 20, 0, "bench")
prof2 = cProfile.Profile()
t2 = time.perf_counter()
prof2.enable()
fam = mod[sys.argv[2]]
fam(buf, 1, grid=1, block=32)
prof2.disable()
t3 = time.perf_counter()
print(f"import + load {1e3 * (t1 - t0):.1f} ms (under cProfile); first use + first launch {1e3 * (t3 - t2):.2f} ms")
for title, p in (("import + load", prof), ("first use + first launch", prof2)):
    s = io.StringIO()
    pstats.Stats(p, stream=s).sort_stats("cumulative").print_stats(45)
    print(f"===== cProfile: {title}")
    print(s.getvalue())
"""


def main() -> int:
    bundle, family = sys.argv[1], sys.argv[2]
    imp = subprocess.run([sys.executable, "-X", "importtime", "-c",
                          "import kernelpack, kernelpack.runtime; kernelpack.load"],
                         capture_output=True, text=True, check=False)
    rows = []
    for line in imp.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0].strip().startswith("import time:") and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    rows.sort(reverse=True)
    print("===== -X importtime (cumulative us, 25 largest)")
    for us, name in rows[:25]:
        print(f"{us:>9} {name}")
    out = subprocess.run([sys.executable, "-c", CHILD, bundle, family], capture_output=True, text=True, check=False)
    print(out.stdout)
    print(out.stderr[-3000:])
    return out.returncode


if __name__ == "__main__":
    raise SystemExit(main())
