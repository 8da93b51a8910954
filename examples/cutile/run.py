"""The cuTile example from Python, without cuTile installed: load the built library, launch with torch tensors.

    python run.py [ARTIFACTS] [--bind-only]     # ARTIFACTS: the build directory (default: ./build)
"""

from __future__ import annotations

import sys
from pathlib import Path

import kernelpack


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    out = Path(args[0]) if args else Path(__file__).parent / "build"
    lib = kernelpack.load(out / "lib" / "libex_cutile.so")
    print(repr(lib.vadd))
    print(repr(lib.scale))
    if "--bind-only" in argv:
        return 0
    import torch

    n = 70_001
    grid = (n + 1023) // 1024
    for dtype in (torch.float32, torch.float16):  # vadd[f32] / vadd[f16], picked from the tensors' dtype
        a, b = torch.randn(n, device="cuda", dtype=dtype), torch.randn(n, device="cuda", dtype=dtype)
        c = torch.empty_like(a)
        lib.vadd(a, n, 1, b, n, 1, c, n, 1, grid=grid)  # each array: tensor, shape, stride (in elements)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + b, rtol=0, atol=0)
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    lib.scale(x, n, 1, y, n, 1, 1.5, grid=grid)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 1.5 * x, rtol=0, atol=0)
    print("ex_cutile from Python: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
