"""Run on a GPU by tests/test_wheel_gpu.py, with the example wheels installed (``--target``) on ``sys.path``: import
ex_cuda and ex_triton, bind every kernel (which loads them; still no torch, no Triton imported), then launch each on
fresh random inputs and compare with torch. Prints one JSON object; exits 1 when a result differs.

    python wheel_gpu_check.py
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any

HEAVY = ("torch", "triton", "cutlass", "cuda.tile", "numpy", "cupy")


def heavy_loaded() -> list[str]:
    return sorted(m for m in HEAVY if m in sys.modules)


def check_cuda(pkg: Any, torch: Any, n: int) -> list[str]:
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    a = float(torch.randn(()).item())
    expected = a * x + y
    pkg.saxpy(a, x, y, n, grid=(n + 255) // 256, block=256)
    z64 = torch.randn(n, device="cuda", dtype=torch.float64)
    r64 = torch.empty_like(z64)
    pkg.relu(z64, r64, n, grid=(n + 255) // 256, block=256)  # relu[double], from the dtype
    z32 = torch.randn(n, device="cuda")
    r32 = torch.full_like(z32, float("nan"))
    pkg.relu(z32, r32, n, grid=(n + 255) // 256, block=256)  # relu[float]
    torch.cuda.synchronize()
    torch.testing.assert_close(y, expected)
    torch.testing.assert_close(r64, torch.relu(z64), rtol=0, atol=0)
    torch.testing.assert_close(r32, torch.relu(z32), rtol=0, atol=0)
    return ["saxpy", "relu[double]", "relu[float]"]


def check_triton(pkg: Any, torch: Any, n: int) -> list[str]:
    done = []
    for size in (n, (n // 16 + 1) * 16):  # any n; a multiple of 16 with aligned tensors picks "aligned"
        x, y = torch.randn(size, device="cuda"), torch.randn(size, device="cuda")
        out = torch.full_like(x, float("nan"))
        pkg.add(x, y, out, size, grid=(size + 1023) // 1024)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x + y, rtol=0, atol=0)
        done.append(f"add(n={size})")
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    alpha = float(torch.randn(()).item())
    expected = alpha * x.double() + y.double()
    pkg.axpy(alpha, x, y, n, grid=(n + 1023) // 1024)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.double(), expected, rtol=1e-5, atol=1e-5)
    return [*done, "axpy"]


CHECKS = {"ex_cuda": check_cuda, "ex_triton": check_triton}


def main(names: list[str]) -> int:
    out: dict[str, Any] = {"before_import": heavy_loaded(), "packages": {}}
    packages = {}
    for name in names:
        pkg = importlib.import_module(name)
        for attr in pkg.__all__:
            getattr(pkg, attr)  # loads the package's bundle (kernelpack.load), binds the kernel
        packages[name] = pkg
        out["packages"][name] = {"file": pkg.__file__, "all": list(pkg.__all__), "version": pkg.__version__,
                                 "heavy_after_bind": heavy_loaded()}
    import torch

    seed = int.from_bytes(os.urandom(4), "little")  # fresh inputs every run; the seed is printed to replay one
    torch.manual_seed(seed)
    n = 1000 + int(torch.randint(0, 200_000, ()).item())
    out.update(seed=seed, n=n)
    status = 0
    for name, pkg in packages.items():
        try:
            out["packages"][name]["checked"] = CHECKS[name](pkg, torch, n)
        except AssertionError as e:
            out["packages"][name]["error"] = str(e)
            status = 1
    print(json.dumps(out))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
