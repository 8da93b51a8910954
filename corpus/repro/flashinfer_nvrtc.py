#!/usr/bin/env python3
"""Repro, NVRTC alone (no kernelpack): FlashInfer's kernel headers do not compile under NVRTC.

    PYTHONPATH=DIR python corpus/repro/flashinfer_nvrtc.py   # DIR: pip install --no-deps --target DIR flashinfer-python

norm.cuh, activation.cuh (through math.cuh), pos_enc.cuh and sampling.cuh include host C++ standard headers
(<cstdint>, <cmath>, <sstream>, <iostream>) and define host launchers next to their kernels; NVRTC ships no host C++
standard library, so the first of those includes is a catastrophic error. The corpus compiles these headers with
nvcc (kernelpack.cuda.compile(..., compiler="nvcc")) instead. Prints each header's first NVRTC error; exits 0 when
every header failed as described (the limit still holds), 1 when one compiled (the corpus could use NVRTC).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from cuda.bindings import nvrtc


def main() -> int:
    spec = importlib.util.find_spec("flashinfer")
    if spec is None or spec.origin is None:
        print("flashinfer-python is not importable")
        return 2
    data = Path(spec.origin).parent / "data"
    toolkit = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"  # cuda.h, cuda_fp16.h
    includes = [data / "include", data / "cccl" / "cub", data / "cccl" / "libcudacxx" / "include", toolkit]
    opts = [b"--gpu-architecture=sm_80", b"-std=c++17", *[f"-I{d}".encode() for d in includes]]
    compiled = 0
    for header in ("norm.cuh", "activation.cuh", "pos_enc.cuh", "sampling.cuh"):
        src = f"#include <flashinfer/{header}>\n".encode()
        err, prog = nvrtc.nvrtcCreateProgram(src, b"repro.cu", 0, [], [])
        (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        first = next((ln for ln in log.decode(errors="replace").splitlines() if "error" in ln), "")
        ok = res == nvrtc.nvrtcResult.NVRTC_SUCCESS
        compiled += ok
        print(f"{header}: {'compiled' if ok else 'NVRTC error: ' + first.strip()}")
        nvrtc.nvrtcDestroyProgram(prog)
    return 1 if compiled else 0


if __name__ == "__main__":
    sys.exit(main())
