"""On the H200, from C++: a library generated from the carried Triton and cuTile bundles launches every kernel,
the TMA matmul through the library's own entry (kp_tensor views; it encodes the CUtensorMaps as
kernelpack.core.tma.encode_args says) and tr_scale_rows with the Triton global scratch the library allocates."""

from __future__ import annotations

import subprocess

from clib_support import HERE
from gpu import requires_gpu
from gpu_frontends import load_bundle
from kernelpack.bundle.kpack import Bundle
from kernelpack.clib import Library
from toolchain_support import CXX


@requires_gpu
def test_cpp_program_runs_triton_and_cutile_kernels(tmp_path):
    triton, cutile = load_bundle("triton.kpack"), load_bundle("cutile.kpack")
    lib = Library("kpfront", Bundle.of(triton, cutile)).build(tmp_path / "lib")
    exe = tmp_path / "frontends_gpu"
    subprocess.run([CXX, "-std=c++17", "-O2", "-Wall", "-Wextra", f"-I{lib.include_dir}",
                    str(HERE / "frontends_gpu_main.cpp"), "-o", str(exe), f"-L{lib.lib_dir}", "-lkpfront",
                    f"-Wl,-rpath,{lib.lib_dir}", "-ldl", "-lpthread"], check=True)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "ALL PASSED" in proc.stdout, proc.stdout + proc.stderr
    for check in ("tr_add_f32_aligned", "tr_add_f32_general", "tr_add_f16", "tr_axpy", "tr_matmul_aligned",
                  "tr_matmul_odd", "tr_tma_matmul", "tr_tma_matmul_384x128x64", "tr_tma_misaligned_refused",
                  "tr_scale_rows_scratch", "ct_vadd_f32", "ct_matmul"):
        assert f"PASS {check}\n" in proc.stdout or f"PASS {check} (" in proc.stdout
