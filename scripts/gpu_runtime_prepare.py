"""On the GPU-less machine: compile what the runtime's GPU run needs into .gpu/runtime/ (carried to the GPU)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from kernelpack import cuda  # noqa: E402
from runtime_support import build_test_bundle  # noqa: E402


def main() -> None:
    out = ROOT / ".gpu" / "runtime"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    build_test_bundle(out / "build", compiler="nvcc").write(out / "tests.kpack")
    cuda.compile(ROOT / "tests/fake_runtime/kernels.cu", ["spin"], arch=["sm_90a"], compiler="nvcc").write(
        out / "bench.kpack")
    cuda.compile(ROOT / "bench/many_kernels.cu", [f"k{i}" for i in range(100)], arch=["sm_90a"],
                 compiler="nvcc").write(out / "many.kpack")
    for p in sorted(out.glob("*.kpack")):
        print(f"{p.relative_to(ROOT)}: {p.stat().st_size} bytes")
    print(f"prepared in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
