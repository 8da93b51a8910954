"""Run where the example wheel ex_cuda (examples/cuda: saxpy, relu<float|double>) is installed and kernelpack is not:
its kernels as torch custom ops through the kernelpack.torch the wheel carries (``ex_cuda._kernelpack.torch``), called
eagerly, under ``torch.compile(fullgraph=True)`` and (``--gpu``) replayed from a CUDA graph. Prints one JSON object.

    python wheel_torch_check.py [--gpu] [--seed N]

Without --gpu it runs on the fake driver with CPU tensors read as device tensors (the runtime's test hook): what is
checked is the op's registration, the trace (no graph break) and the launches, not the numbers. With --gpu the outputs
are compared with a float64 torch reference on fresh random inputs (tests/test_wheel_torch_gpu.py).
"""

from __future__ import annotations

import functools
import importlib
import json
import operator
import random
import sys

import torch

NAME = "ex_cuda"
N = 3000  # not a multiple of the block: the last block's guard is exercised


def ops(dev: str) -> tuple:  # type: ignore[type-arg]
    pkg = importlib.import_module(NAME)
    kt = importlib.import_module(f"{NAME}._kernelpack.torch")
    relu = kt.custom_op(pkg.relu, f"{NAME}::relu", grid=lambda x, y, n: (n + 255) // 256, block=256,
                        outputs={"y": lambda x, n: torch.empty_like(x)}, device_types=dev)
    saxpy = kt.custom_op(pkg.saxpy, f"{NAME}::saxpy", grid=lambda a, x, y, n: (n + 255) // 256, block=256,
                         mutates_args=("y",), device_types=dev)
    return relu, saxpy


def main(argv: list[str]) -> int:
    gpu = "--gpu" in argv
    seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else random.randrange(2**31)
    torch.manual_seed(seed)
    dev = "cuda" if gpu else "cpu"
    if not gpu:  # CPU tensors stand for device tensors on the fake driver (the carried runtime's own test hook)
        importlib.import_module(f"{NAME}._kernelpack.runtime.adapters").testing.cpu_as_cuda = True
        streams = importlib.import_module(f"{NAME}._kernelpack.runtime.streams")
        streams.set_current_torch_stream(functools.partial(operator.add, 0x5000))
    relu, saxpy = ops(dev)

    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = relu(x * 2, x.numel())
        saxpy(3.0, z, y, y.numel())
        return z + y

    def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = torch.relu(x.double() * 2)
        return z + (3.0 * z + y.double())

    dynamo = importlib.import_module("torch._dynamo")
    dynamo.reset()
    dynamo.utils.counters.clear()
    out: dict = {"seed": seed, "n": N}
    x, y = torch.randn(N, device=dev), torch.randn(N, device=dev)
    want = reference(x, y)
    got = f(x, y.clone())
    compiled = torch.compile(f, fullgraph=True, backend="inductor" if gpu else "aot_eager")
    got_c = compiled(x, y.clone())
    out["graph_breaks"] = sum(dynamo.utils.counters["graph_break"].values())
    out["shape"] = list(got_c.shape)
    if gpu:
        out["eager_err"] = (got.double() - want).abs().max().item()
        out["compiled_err"] = (got_c.double() - want).abs().max().item()
        # a CUDA graph: captured once on static inputs, replayed on fresh ones
        sx, sy = torch.randn(N, device=dev), torch.randn(N, device=dev)
        f(sx, sy.clone())  # warm: the kernels are loaded before the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            sout = f(sx, sy)
        errs = []
        for _ in range(3):
            x, y = torch.randn(N, device=dev), torch.randn(N, device=dev)
            want = reference(x, y)
            sx.copy_(x)
            sy.copy_(y)
            graph.replay()
            torch.cuda.synchronize()
            errs.append((sout.double() - want).abs().max().item())
        out["graph_errs"] = errs
        out["nan"] = bool(torch.isnan(sout).any())
    out["kernelpack_modules"] = sorted(m for m in sys.modules if m.split(".")[0] == "kernelpack")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
