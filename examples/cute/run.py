"""The CuTe DSL example from Python, without the CuTe DSL installed: load the built library, launch with torch.
A tensor argument fills the kernel's tensor struct {data, shape0, shape1, stride0}.

    python run.py [ARTIFACTS] [--bind-only]     # ARTIFACTS: the build directory (default: ./build)
"""

from __future__ import annotations

import sys
from pathlib import Path

import kernelpack


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    out = Path(args[0]) if args else Path(__file__).parent / "build"
    lib = kernelpack.load(out / "lib" / "libex_cute.so")
    print(repr(lib.ew_add))
    if "--bind-only" in argv:
        return 0
    import torch

    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(300, 257, device="cuda", dtype=dtype)
        b = torch.randn(300, 257, device="cuda", dtype=dtype)
        c = torch.empty_like(a)
        lib.ew_add(a, b, c, grid=((257 + 31) // 32, (300 + 7) // 8))  # the block (32x8) is the kernel's
        torch.cuda.synchronize()
        torch.testing.assert_close(c, (a.float() + b.float()).to(dtype), rtol=0, atol=0)
    print("ex_cute from Python: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
