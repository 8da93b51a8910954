#!/usr/bin/env python3
"""On the GPU-less build machine: kernels that carry only compute_80 PTX, for the driver on the H200 to JIT
(tests/test_ptx_gpu.py), into .gpu/ptx/ptx80.kpack (git-ignored, carried): CUDA C++ through nvcc (nvcc 13.0 writes
PTX ISA 9.0, which the H200's CUDA 13.0 driver JITs; NVRTC 13.5 would write 9.5, which it cannot), Triton (PTX ISA
8.8 here) and, where the CuTe DSL is installed, a CuTe kernel (the GPU machine has no CuTe, so its PTX is carried)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from kernelpack.bundle import Bundle  # noqa: E402

ARCH = ["compute_80"]


def parts() -> list[Bundle]:
    import kernelpack.cuda as kcuda

    src = (ROOT / "src" / "kernelpack" / "examples" / "vector_ops.cu").read_text()
    out = [kcuda.compile(src, {"ptx_axpy": "axpy"}, arch=ARCH, compiler="nvcc")]
    try:
        import kernelpack.triton as kt
        from triton_kernels import add_kernel
    except ImportError as e:
        print(f"no Triton here ({e}): the Triton kernel is left out")
    else:
        out.append(kt.compile(add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                              constexprs={"BLOCK": 1024}, arch=ARCH, name="ptx_tr_add"))
    try:
        import cutlass

        import kernelpack.cute as kc
        from cute_support import example
    except ImportError as e:
        print(f"no CuTe DSL here ({e}): the CuTe kernel is left out")
    else:
        ea = example("elementwise_add")
        out.append(kc.compile(ea.elementwise_add, *ea.example_args(cutlass.Float32), arch=ARCH, name="ptx_cute_add"))
    return out


def main() -> None:
    out = ROOT / ".gpu" / "ptx"
    out.mkdir(parents=True, exist_ok=True)
    bundle = Bundle.of(*parts())
    assert all(b.kind == "ptx" for a in bundle for b in a.binaries), "compute_80 must give PTX only"
    path = bundle.write(out / "ptx80.kpack")
    labels = ", ".join(f"{a.label}({', '.join(repr(b) for b in a.binaries)})" for a in bundle)
    print(f"wrote {path} ({path.stat().st_size} bytes): {labels}")


if __name__ == "__main__":
    main()
