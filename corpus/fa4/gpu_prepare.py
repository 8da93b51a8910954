"""The build-machine half of the GPU step ``fa4`` (scripts/gpu.py prepare fa4): build corpus/fa4 (no GPU) and copy
what the GPU run reads into ``.gpu/fa4/``.

    lib/libfa4.so, include/fa4.h, include/fa4.hpp   the library (tests/test_fa4_gpu.py: Python and C++)
    wheel/fa4-*.whl                                 `kernelpack wheel --with-library` of the same project
    fa4_meta.json                                   the backward's buffer padding per arch (fa4_calls.meta)
    manifest.json                                   entries, sizes, build time, FA4's own JIT time here

The static archive and the linked object stay in corpus/fa4/build (the carry to the GPU machine is limited).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def jit_time(runs: int = 3) -> dict[str, Any]:
    """FA4's own first-call cost here (corpus/fa4/jit_time.py in fresh processes), the median run."""
    out = []
    for _ in range(runs):
        r = subprocess.run([sys.executable, str(HERE / "jit_time.py"), "sm_90a", "128", "1"], capture_output=True,
                           text=True, check=True, timeout=600)
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    med = sorted(out, key=lambda x: x["compile_s"])[len(out) // 2]
    return {**med, "runs": [(x["import_s"], x["compile_s"]) for x in out],
            "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores, no GPU"}


def gpu_prepare(out: Path, jobs: int = 2) -> dict[str, Any]:
    import kernelpack
    from kernelpack.wheel import build_wheel

    sys.path.insert(0, str(HERE))
    import fa4_calls

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    t0 = time.perf_counter()
    wheel = build_wheel(HERE, out / "wheel", with_library=True, jobs=jobs)
    build_s = time.perf_counter() - t0
    built = HERE / "build"
    (out / "lib").mkdir()
    shutil.copy2(built / "lib" / "libfa4.so", out / "lib" / "libfa4.so")
    shutil.copytree(built / "include", out / "include")
    (out / "fa4_meta.json").write_text(json.dumps(fa4_calls.meta(), indent=1))
    mod = kernelpack.load(str(out / "lib" / "libfa4.so"))
    manifest = {
        "library": "lib/libfa4.so", "entries": list(mod.__all__),
        "sizes": {"libfa4.so": (built / "lib" / "libfa4.so").stat().st_size,
                  "libfa4.a": (built / "lib" / "libfa4.a").stat().st_size,
                  "wheel": wheel.path.stat().st_size},
        "wheel": f"wheel/{wheel.path.name}", "build_s": round(build_s, 1), "jit": jit_time(),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest
