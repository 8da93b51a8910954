"""The kernels of the per-arch tests (tests/test_per_arch.py on the fake driver, tests/test_per_arch_gpu.py on the
H200): built on the GPU-less machine (`scripts/gpu.py prepare per_arch` writes .gpu/per_arch/per_arch.kpack), since the
GPU machine has no cuTile and an older Triton.

* ``ct_mm``: a cuTile fp16 matmul, tiles 128x256x64, for sm_80 and sm_90a: tileiras picks 128 threads on sm_80 and
  256 on sm_90a (per-arch REQNTID, one artifact);
* ``tma``: a Triton matmul over tensor descriptors for sm_80 and sm_90a: pointer/shape/strides on sm_80, a
  CUtensorMap on sm_90a (per-arch parameters, one caller-visible signature);
* ``persist``/``tr_persist``: persistent loops whose SM count is filled from the device (``sm_count``) and whose
  grid is that many blocks;
* ``rows``/``tr_rows``: built for 132 and 108 SMs (``requires``), with a fallback built for any device;
* ``clustered``: a persistent cluster loop whose ``max_active_clusters:2`` is asked of the driver.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.launchspec import LaunchSpec

HERE = Path(__file__).parent
ARCHS = ["sm_80", "sm_90a"]
TMA = {"a_desc": "tensordesc<fp16[64, 64]>", "b_desc": "tensordesc<fp16[64, 64]>",
       "c_desc": "tensordesc<fp16[64, 64]>", "K": "i32"}
CT_TILES = (128, 256, 64)  # tileiras: 128 threads on sm_80, 256 on sm_90a
SM_COUNTS = (132, 108)  # H100/H200 SXM, A100
NUM_SMS = ("arg", "num_sms", None)


def cuda_kernels(cache: Any = None) -> list[KernelArtifact]:
    from kernelpack.frontends.cuda import compile as cuda

    arts = {a.label: a for a in cuda.compile(HERE / "perarch_kernels.cu", ["persist", "rows<132>", "rows<108>",
                                                                           "clustered"], arch=ARCHS, cache=cache)}
    max_clusters = ("arg", "max_clusters", None)
    persist = dataclasses.replace(arts["persist"].with_roles({"num_sms": "sm_count"}),
                                  launch=LaunchSpec(block=(128, 1, 1), grid=(NUM_SMS, 1, 1)))
    clustered = dataclasses.replace(arts["clustered"].with_roles({"max_clusters": "max_active_clusters:2"}),
                                    launch=LaunchSpec(block=(128, 1, 1), cluster=(2, 1, 1),
                                                      grid=(("mul", max_clusters, 2), 1, 1)))
    return [persist, clustered,
            dataclasses.replace(arts["rows[132]"], requires={"sm_count": 132}),
            dataclasses.replace(arts["rows[108]"], requires={"sm_count": 108}),
            dataclasses.replace(arts["rows[132]"], variant="any")]  # no requirement: the fallback


def triton_tma(cache: Any = None) -> Bundle:
    import kernelpack.frontends.triton.compile as kt
    from triton_kernels import tma_matmul_kernel

    return kt.compile(tma_matmul_kernel, TMA, constexprs={"BM": 64, "BN": 64, "BK": 64}, arch=ARCHS, name="tma",
                      cache=cache)


def triton_device(cache: Any = None) -> Bundle:
    """tr_persist (NUM_SMS from the device, grid NUM_SMS) and tr_rows (NUM_SMS a constexpr: 132, 108, and 1 for any
    other device)."""
    import kernelpack.frontends.triton.compile as kt
    from triton_kernels import persistent_double_kernel, rows_per_sm_kernel

    persist = kt.compile(persistent_double_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "NUM_SMS": "i32"},
                         constexprs={"BLOCK": 1024}, arch=ARCHS, name="tr_persist", cache=cache,
                         device_args={"NUM_SMS": "sm_count"}, grid=(("arg", "NUM_SMS", None), 1, 1))
    specs = [{"variant": f"sm{n}", "constexprs": {"NUM_SMS": n}, "requires": {"sm_count": n}} for n in SM_COUNTS]
    rows = kt.compile(rows_per_sm_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32"},
                      constexprs={"BLOCK": 256}, arch=ARCHS, name="tr_rows", cache=cache,
                      specializations=[*specs, {"variant": "any", "constexprs": {"NUM_SMS": 1}}])
    return Bundle.of(persist, rows)


def cutile_matmul(cache: Any = None) -> Bundle:
    import cuda.tile as ct
    from cuda.tile.compilation import ScalarConstraint

    import kernelpack.frontends.cutile.compile as kc
    from cutile_kernels import array, matmul

    sig = [array(ct.float16, 2), array(ct.float16, 2), array(ct.float32, 2), ScalarConstraint(ct.float32), *CT_TILES]
    return kc.compile(matmul, [sig], arch=ARCHS, name="ct_mm", cache=cache)


def bundle(cache: Any = None) -> Bundle:
    return Bundle.of(cuda_kernels(cache), triton_tma(cache), triton_device(cache), cutile_matmul(cache))
