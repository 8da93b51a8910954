"""The Triton example from Python, without Triton's JIT: load the built library and launch with torch tensors.

    python run.py [ARTIFACTS] [--bind-only]     # ARTIFACTS: the build directory (default: ./build)
"""

from __future__ import annotations

import sys
from pathlib import Path

import kernelpack


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    out = Path(args[0]) if args else Path(__file__).parent / "build"
    lib = kernelpack.load(out / "lib" / "libex_triton.so")
    print(repr(lib.add))
    print(repr(lib.axpy))
    if "--bind-only" in argv:
        return 0
    import torch

    n = 100_003  # not a multiple of 16: the general specialization runs
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out_, expected_sum = torch.empty_like(x), x + y
    lib.add(x, y, out_, n, grid=(n + 1023) // 1024)
    expected = 0.731 * x.double() + y.double()
    lib.axpy(0.731, x, y, n, grid=(n + 1023) // 1024)
    torch.cuda.synchronize()
    torch.testing.assert_close(out_, expected_sum, rtol=0, atol=0)
    torch.testing.assert_close(y.double(), expected, rtol=1e-6, atol=1e-6)
    print("ex_triton from Python: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
