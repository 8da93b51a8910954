"""The CUDA C++ example from Python: load the built library (no compiler, no JIT) and launch with torch tensors.

    python run.py [ARTIFACTS]            # ARTIFACTS: the build directory (default: ./build)
    python run.py [ARTIFACTS] --bind-only  # load and bind only (works without a GPU)
"""

from __future__ import annotations

import sys
from pathlib import Path

import kernelpack


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    out = Path(args[0]) if args else Path(__file__).parent / "build"
    lib = kernelpack.load(out / "lib" / "libex_cuda.so")
    print(lib)
    print(repr(lib.saxpy))
    print(repr(lib.relu))
    if "--bind-only" in argv:
        return 0
    import torch

    n = 100_003
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    expected = 2.0 * x + y
    lib.saxpy(2.0, x, y, n, grid=(n + 255) // 256, block=256)
    z = torch.randn(n, device="cuda", dtype=torch.float64)
    r = torch.empty_like(z)
    lib.relu(z, r, n, grid=(n + 255) // 256, block=256)  # dispatches to relu[double] from the tensor dtype
    torch.cuda.synchronize()
    torch.testing.assert_close(y, expected)
    torch.testing.assert_close(r, torch.relu(z), rtol=0, atol=0)
    print("ex_cuda from Python: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
