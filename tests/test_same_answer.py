"""Same answer everywhere: every bad launch both back ends can express, through the C library (the "demo" library
and tests/reliability_harness.c, as a program on the fake libcuda.so.1), the Python runtime's C launch path and its
pure-Python path (``kernelpack.load`` of the same library, on the same fake in this process). For each row the C
status and each Python exception's ``status`` (kernelpack.runtime.errors: the launch model's STATUS table) must be
the same, and nothing may be launched; the "ok" rows launch once everywhere.

``python tests/test_same_answer.py`` prints the table for docs/architecture.md.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Case:
    row: str  # reliability_harness row (C)
    what: str
    status: str  # the kp_status every back end must give
    call: Callable[[Any], Any]  # the same launch through kernelpack.load of the demo library
    cc: str = "9.0"
    fake: tuple[tuple[str, str], ...] = ()  # other settings of the fake driver (fake_cuda.settings)
    msg: str = ""  # a pattern every back end's message must hold
    loads: str = ""  # the kind of binary ("cubin", "ptx") every back end must have loaded


def _f32(ptr: int, n: int = 1024) -> Any:
    from runtime_support import CudaArray

    return CudaArray(ptr, (n,), "<f4")


def _t(ptr: int = 0x40000, shape: tuple[int, ...] = (3, 5), strides: tuple[int, ...] = (8, 1),
       typestr: str = "<f4") -> Any:
    from runtime_support import CudaArray

    size = int(typestr[2:])
    return CudaArray(ptr, shape, typestr, tuple(s * size for s in strides))


X, Y, OUT = 0x10000, 0x20000, 0x30000


def _glist(m: Any, **change: Any) -> Any:
    """glist over two lists of f32 tensors (the reliability harness's list rows); ``change``: element 0 or 1 of xs
    made otherwise (``x1={"typestr": "<f8"}``), or ``xs=`` the list itself."""
    xs = [dict(ptr=0x50000, shape=(8,), strides=(1,)), dict(ptr=0x50100, shape=(12,), strides=(1,))]
    for k in (0, 1):
        xs[k].update(change.pop(f"x{k}", {}))
    ys = [_t(0x60000, (8,), (1,)), _t(0x60100, (12,), (1,))]
    return m.glist(change.pop("xs", [_t(**x) for x in xs]), ys, 2.0, grid=(1, 2), block=128)


def _add(m: Any, **launch: Any) -> Any:
    return m.add(_f32(X), _f32(Y), _f32(OUT), 8, **{"grid": 2, "block": 128, **launch})


CASES = [
    Case("ok_add", "a valid family launch", "KP_SUCCESS", lambda m: _add(m)),
    Case("ok_tsum", "a valid tensor launch", "KP_SUCCESS", lambda m: m.tsum(_t(), _f32(OUT), grid=2, block=128)),
    Case("wrong_dtype", "wrong element type (f16 where f32/f64)", "KP_ERROR_NO_MATCHING_SPECIALIZATION",
         lambda m: m.add(*(_t(p, (1000,), (1,), "<f2") for p in (X, Y, OUT)), 1000, grid=2, block=128)),
    Case("wrong_dtype_tensor", "tensor of the wrong element type", "KP_ERROR_NO_MATCHING_SPECIALIZATION",
         lambda m: m.tsum(_t(typestr="<f8"), _f32(OUT), grid=2, block=128)),
    Case("wrong_rank", "tensor of the wrong rank", "KP_ERROR_NO_MATCHING_SPECIALIZATION",
         lambda m: m.tsum(_t(shape=(3, 5, 1), strides=(8, 1, 1)), _f32(OUT), grid=2, block=128)),
    Case("static_extent", "a static stride violated", "KP_ERROR_NO_MATCHING_SPECIALIZATION",
         lambda m: m.tsum(_t(strides=(8, 2)), _f32(OUT), grid=2, block=128)),
    Case("wrong_type", "a malformed tensor (element type not a kp_dtype / typestr)", "KP_ERROR_INVALID_ARGUMENT",
         lambda m: m.tsum(_t(typestr="<c8"), _f32(OUT), grid=2, block=128)),
    Case("negative_extent", "negative extent", "KP_ERROR_INVALID_ARGUMENT",
         lambda m: m.tsum(_t(shape=(-5, 5)), _f32(OUT), grid=2, block=128)),
    Case("null_tensor", "NULL / None for a tensor", "KP_ERROR_INVALID_ARGUMENT",
         lambda m: m.tsum(None, _f32(OUT), grid=2, block=128)),
    Case("null_struct_family", "NULL / None for a value passed by pointer", "KP_ERROR_INVALID_ARGUMENT",
         lambda m: m.tmap(None, 64, 64, 64, 1, 7, _f32(OUT), grid=2, block=128)),
    Case("non_contiguous", "TMA descriptor over a non-unit inner stride", "KP_ERROR_INVALID_ARGUMENT",
         lambda m: m.tma2d(_t(0x100000, (64, 64), (64, 2), "<f2"), 7, _f32(OUT), grid=2, block=128)),
    Case("grid_zero", "grid of 0", "KP_ERROR_INVALID_LAUNCH", lambda m: _add(m, grid=0)),
    Case("grid_beyond", "grid beyond the device limit", "KP_ERROR_INVALID_LAUNCH", lambda m: _add(m, grid=(2, 70000))),
    Case("block_beyond", "block beyond the device limit", "KP_ERROR_INVALID_LAUNCH", lambda m: _add(m, block=2048)),
    Case("block_reqntid", "block other than REQNTID", "KP_ERROR_INVALID_LAUNCH",
         lambda m: m.fixed_block(_f32(OUT), grid=2, block=64)),
    Case("partial_block", "block {0,5,0}", "KP_ERROR_INVALID_LAUNCH", lambda m: _add(m, block=(0, 5, 0))),
    Case("smem_limit", "dynamic smem beyond the device", "KP_ERROR_INVALID_LAUNCH",
         lambda m: m.big_smem(_f32(X), _f32(OUT), 76800, grid=2, block=128, smem=300 * 1024)),
    Case("cluster_grid", "grid not a multiple of the compile-time cluster", "KP_ERROR_INVALID_LAUNCH",
         lambda m: m.cluster2(_f32(OUT), grid=3, block=64)),
    Case("cluster_other", "cluster other than the compile-time one", "KP_ERROR_INVALID_LAUNCH",
         lambda m: m.cluster2(_f32(OUT), grid=4, block=64, cluster=4)),
    Case("cluster_too_big", "a cluster of 16 blocks (not portable)", "KP_ERROR_INVALID_LAUNCH",
         lambda m: _add(m, grid=16, cluster=16)),
    Case("cluster_pre90", "a cluster on a device before sm_90", "KP_ERROR_INVALID_LAUNCH",
         lambda m: m.spec_cluster(_f32(OUT), grid=4, block=64), cc="8.0"),
    Case("arch_not_carried", "no binary for the device (sm_100)", "KP_ERROR_NO_BINARY_FOR_ARCH",
         lambda m: m.add(*(_t(p, (100,), (1,), "<f8") for p in (X, Y, OUT)), 100, grid=2, block=128), cc="10.0"),
    Case("per_arch_block", "a block the sm_90a binary fixes, on sm_80 (whose binary fixes another)",
         "KP_ERROR_INVALID_LAUNCH", lambda m: m.arch_block(grid=2, block=128), cc="8.0"),
    Case("requires_unmet", "a specialization built for 108 SMs on a device of 132", "KP_ERROR_NO_BINARY_FOR_ARCH",
         lambda m: m.needs_108(_f32(X), _f32(Y), _f32(OUT), 8, grid=2, block=128)),
    Case("family_newer_minor", "sm_100f SASS on a 10.3 device (family: same major, newer minor)", "KP_SUCCESS",
         lambda m: m.on_family(grid=2), cc="10.3", loads="cubin"),
    Case("arch_specific_elsewhere", "sm_90a SASS only, on a 10.0 device (arch-specific: that arch only)",
         "KP_ERROR_NO_BINARY_FOR_ARCH", lambda m: m.cluster2(_f32(OUT), grid=4, block=64), cc="10.0",
         msg=r"sm_100\b.*carries sm_90a"),
    Case("ptx_newer_device", "compute_80 PTX on a 12.0 device that no SASS fits (the driver JITs it)", "KP_SUCCESS",
         lambda m: m.on_ptx(grid=2), cc="12.0", loads="ptx"),
    Case("nothing_fits", "sm_90a + sm_100f on a 12.0 device", "KP_ERROR_NO_BINARY_FOR_ARCH",
         lambda m: m.on_family(grid=2), cc="12.0", msg=r"sm_120\b.*carries sm_90a, sm_100f"),
    Case("ptx_too_new", "PTX ISA 9.5 on a CUDA 13.0 driver (it JITs up to 9.0)", "KP_ERROR_CUDA",
         lambda m: m.new_ptx(grid=2), msg=r"CUDA_ERROR_UNSUPPORTED_PTX_VERSION \(222\).*PTX ISA 9\.5"),
    Case("ok_pdl_cooperative", "PDL and a cooperative launch asked per call", "KP_SUCCESS",
         lambda m: _add(m, pdl=True, cooperative=True)),
    Case("pdl_pre90", "PDL on a device before sm_90", "KP_ERROR_INVALID_LAUNCH", lambda m: _add(m, pdl=True),
         cc="8.0", msg=r"kernel add\[f32_vec4\]: programmatic dependent launch \(PDL\) needs compute capability 9\.0 "
                       r"or newer; device 0 is sm_80$"),
    Case("cooperative_too_big", "a cooperative grid larger than the co-resident blocks", "KP_ERROR_INVALID_LAUNCH",
         lambda m: _add(m, grid=100000, cooperative=True),
         msg=r"kernel add\[f32_vec4\]: cooperative launch of grid \{100000,1,1\} \(100000 blocks of 128 threads, "
             r"0 bytes of dynamic shared memory\) exceeds the 2112 blocks that can be co-resident on device 0 "
             r"\(sm_90\): 16 per SM x 132 SMs$"),
    Case("cooperative_no_driver", "a cooperative launch on a driver without its occupancy query",
         "KP_ERROR_DRIVER_TOO_OLD", lambda m: _add(m, cooperative=True),
         fake=(("missing", "cuOccupancyMaxActiveBlocksPerMultiprocessor"),),
         msg=r"cooperative launch needs cuOccupancyMaxActiveBlocksPerMultiprocessor"),
    Case("ok_list", "a valid launch with lists of tensors (their descriptors copied to the device)", "KP_SUCCESS",
         lambda m: _glist(m)),
    Case("list_mixed_dtype", "a list of tensors of two dtypes", "KP_ERROR_NO_MATCHING_SPECIALIZATION",
         lambda m: _glist(m, x1={"typestr": "<f8"})),
    Case("list_empty", "an empty list of tensors", "KP_ERROR_INVALID_ARGUMENT", lambda m: _glist(m, xs=[])),
    Case("list_null", "NULL / None for a list of tensors", "KP_ERROR_INVALID_ARGUMENT", lambda m: _glist(m, xs=None)),
    Case("list_wrong_rank", "a tensor of the wrong rank in a list", "KP_ERROR_NO_MATCHING_SPECIALIZATION",
         lambda m: _glist(m, x1={"shape": (12, 1), "strides": (1, 1)})),
    Case("list_static_stride", "a list's static stride violated", "KP_ERROR_NO_MATCHING_SPECIALIZATION",
         lambda m: _glist(m, x1={"strides": (2,)})),
    Case("list_shape_divisor", "a list's extent not the multiple it must be", "KP_ERROR_NO_MATCHING_SPECIALIZATION",
         lambda m: _glist(m, x0={"shape": (6,)})),
    Case("list_misaligned", "a misaligned tensor in a list", "KP_ERROR_NO_MATCHING_SPECIALIZATION",
         lambda m: _glist(m, x1={"ptr": 0x50104})),
    Case("list_negative_extent", "a negative extent in a list", "KP_ERROR_INVALID_ARGUMENT",
         lambda m: _glist(m, x1={"shape": (-4,)}), msg=r"'xs'.? element 1: .*shape\[0\] = -4 is negative"),
    Case("list_index_range", "an extent beyond the list's int32 index type", "KP_ERROR_NO_MATCHING_SPECIALIZATION",
         lambda m: _glist(m, x1={"shape": (1 << 32,)})),
    Case("list_no_copy_driver", "a list launch on a driver without cuMemcpyHtoDAsync", "KP_ERROR_DRIVER_TOO_OLD",
         lambda m: _glist(m), fake=(("missing", "cuMemcpyHtoDAsync"),)),
    Case("mac_no_driver", "max_active_clusters on a driver without cuOccupancyMaxActiveClusters",
         "KP_ERROR_DRIVER_TOO_OLD", lambda m: m.mac(_f32(X), _f32(Y), _f32(OUT), grid=4, block=128),
         fake=(("missing", "cuOccupancyMaxActiveClusters"),)),
]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    from clib_support import reliability_harness, session_env

    env = session_env(tmp_path_factory)
    return env, reliability_harness(env)


@pytest.mark.parametrize("case", CASES, ids=[c.row for c in CASES])
def test_the_c_library_and_both_runtime_paths_give_the_same_answer(harness, fake, case):
    import kernelpack
    from clib_support import results
    from fake_cuda import environment, run
    from kernelpack.launch.codes import STATUS_BY_NAME
    from runtime_support import python_path

    env, exe = harness
    r = run(exe, env.root, env.fake, "row", case.row, **environment(cc=case.cc, **dict(case.fake)))
    assert r.returncode == 0 and r.stdout.rstrip().endswith("alive"), r.stdout + r.stderr
    c_status, c_msg = results(r)[case.row]
    assert c_status == case.status, c_msg
    assert re.search(case.msg, c_msg), c_msg
    if case.loads:
        assert [r.field(x, "kind") for x in r.calls("cuLibraryLoadData")] == [case.loads], r.calls("cuLibraryLoadData")
    assert len(r.launches()) == (case.status == "KP_SUCCESS"), r.launch_lines()
    want = STATUS_BY_NAME[case.status].value
    major, minor = (int(x) for x in case.cc.split("."))
    for path in ("c", "python"):
        fake.reset((major, minor), **dict(case.fake))
        with python_path() if path == "python" else _null():
            mod = kernelpack.load(env.demo.shared)
        before = len(fake.launches())
        try:
            case.call(mod)
        except kernelpack.core.errors.KernelpackError as e:
            got = getattr(e, "status", None)
            assert got == want, f"{path} path: {type(e).__name__} (status {got}) where C gave {c_status}: {e}"
            assert re.search(case.msg, str(e)), f"{path} path: {e}"
        else:
            assert want == 0, f"{path} path launched where C gave {c_status}: {c_msg}"
        assert len(fake.launches()) - before == (want == 0), path


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


def markdown() -> str:
    lines = ["| bad launch | C library, runtime C path, runtime Python path |", "|---|---|"]
    lines += [f"| {c.what} (`{c.row}`) | `{c.status}` |" for c in CASES]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    print(markdown())
