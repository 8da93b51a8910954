"""The bad-input matrix, one row per way a caller can get a launch wrong, in C (generated library + fake
libcuda.so.1, tests/reliability_harness.c) and in Python (kernelpack.load + the in-process fake driver). Every row:
its own status or exception, a message naming the kernel (and the parameter where there is one), nothing launched
(the fakes record launches), and the process still running.

``python tests/test_reliability_matrix.py`` prints the matrix as the markdown table of docs/reliability.md.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Row:
    id: str
    what: str
    c: str  # how C refuses it ("" = not checked in C, see c_note)
    python: str  # how Python refuses it
    c_note: str = ""


MATRIX = [
    Row("wrong_arg_count", "wrong argument count", "compile error (prototype)", "ArgumentTypeError"),
    Row("wrong_type", "wrong argument type", "compile error (prototype); KP_ERROR_INVALID_ARGUMENT for an invalid "
        "kp_dtype", "ArgumentTypeError"),
    Row("wrong_dtype", "wrong dtype", "KP_ERROR_NO_MATCHING_SPECIALIZATION", "ArgumentValueError"),
    Row("wrong_rank", "wrong rank (also 2^30, -1)",
        "KP_ERROR_NO_MATCHING_SPECIALIZATION / KP_ERROR_INVALID_ARGUMENT (not a rank)",
        "ArgumentValueError"),
    Row("static_extent", "static extent/stride violated", "KP_ERROR_NO_MATCHING_SPECIALIZATION",
        "ArgumentValueError"),
    Row("misaligned", "misaligned pointer, aligned specialization", "KP_ERROR_INVALID_ARGUMENT", "ArgumentValueError"),
    Row("null_tensor", "NULL where a tensor is required", "KP_ERROR_INVALID_ARGUMENT", "ArgumentTypeError"),
    Row("cpu_tensor", "CPU (host) tensor", "", "ArgumentValueError",
        "not checked: the C API takes raw device pointers (a per-launch cuPointerGetAttribute would double the cost)"),
    Row("other_device", "tensor on another device", "", "ArgumentValueError", "not checked: as for host pointers"),
    Row("non_contiguous", "non-contiguous where contiguity is required", "KP_ERROR_INVALID_ARGUMENT",
        "ArgumentValueError"),
    Row("grid_zero", "grid of 0", "KP_ERROR_INVALID_LAUNCH", "LaunchError"),
    Row("grid_beyond", "grid beyond device limits", "KP_ERROR_INVALID_LAUNCH", "LaunchError"),
    Row("block_beyond", "block beyond device limits", "KP_ERROR_INVALID_LAUNCH", "LaunchError"),
    Row("block_reqntid", "block contradicting REQNTID", "KP_ERROR_INVALID_LAUNCH", "LaunchError"),
    Row("smem_limit", "dynamic smem above the device limit", "KP_ERROR_INVALID_LAUNCH", "LaunchError"),
    Row("cluster", "invalid cluster (grid not a multiple; other shape)", "KP_ERROR_INVALID_LAUNCH", "LaunchError"),
    Row("unknown_kernel", "unknown kernel name", "compile error (undeclared function)", "AttributeError"),
    Row("arch_not_carried", "arch not carried", "KP_ERROR_NO_BINARY_FOR_ARCH", "LaunchError"),
    Row("no_driver", "no driver (libcuda.so.1 missing)", "KP_ERROR_NO_DRIVER", "DriverError"),
    Row("driver_too_old", "driver too old", "KP_ERROR_DRIVER_TOO_OLD", "DriverError"),
    Row("null_launch", "NULL launch configuration (C) / bad keyword (Python)", "KP_ERROR_INVALID_ARGUMENT",
        "ArgumentTypeError"),
    Row("null_struct", "NULL for a value passed by pointer (C: a 128-byte CUtensorMap; typed and family entries) / "
        "None for a by-value struct (Python)", "KP_ERROR_INVALID_ARGUMENT", "ArgumentTypeError"),
    Row("negative_extent", "negative tensor extent (-5)", "KP_ERROR_INVALID_ARGUMENT", "ArgumentValueError"),
    Row("non_int_field", "float or bool where an array's pointer or extent is an int (1.5, 1.9, True)", "",
        "ArgumentTypeError", "not applicable: kp_tensor's fields and pointers are C integers"),
    Row("short_strides", "fewer strides than modes", "", "ArgumentValueError",
        "not applicable: a kp_tensor has one stride per mode by construction"),
    Row("byte_order", "big-endian or impossible element type (`>f4`, `<f0`, `\\|f4`)", "", "ArgumentValueError",
        "not applicable: kp_dtype names little-endian types only (an invalid kp_dtype is row 2)"),
    Row("malformed_array", "malformed array description (`data=()`, pointer -1 or 2^70, no shape, DLPack ndim 100)",
        "", "ArgumentTypeError / ArgumentValueError", "not applicable: the C API takes typed pointers and kp_tensor"),
    Row("partial_block", "block (or cluster) with x = 0 but y or z set (`{0,5,0}`)", "KP_ERROR_INVALID_LAUNCH",
        "LaunchError"),
]


# ------------------------------------------------------------------ C

# row id -> [(harness row, env, status, message parts)]; "{fn}" parts are checked as regexes
C_CASES: dict[str, list[tuple[str, dict[str, str], str, tuple[str, ...]]]] = {
    "wrong_type": [("wrong_type", {}, "KP_ERROR_INVALID_ARGUMENT", ("demo_tsum", "argument 't'",
                                                                    "dtype 999 is not a kp_dtype"))],
    "wrong_dtype": [
        ("wrong_dtype", {}, "KP_ERROR_NO_MATCHING_SPECIALIZATION", ("demo_add", "x: f16 pointer", "add[f32]")),
        ("wrong_dtype_tensor", {}, "KP_ERROR_NO_MATCHING_SPECIALIZATION", ("demo_tsum", "t: f64 tensor")),
    ],
    "wrong_rank": [
        ("wrong_rank", {}, "KP_ERROR_NO_MATCHING_SPECIALIZATION", ("demo_tsum", "t: f32 tensor rank 3")),
        ("wrong_rank_huge", {}, "KP_ERROR_INVALID_ARGUMENT", ("demo_tsum", "rank 1073741824 is outside [0, 8]")),
        ("wrong_rank_negative", {}, "KP_ERROR_INVALID_ARGUMENT", ("demo_tma2d", "argument 'm'",
                                                                  "rank -1 is outside")),
    ],
    "static_extent": [("static_extent", {}, "KP_ERROR_NO_MATCHING_SPECIALIZATION",
                       ("demo_tsum", "stride [8, 2]", "stride [?, 1]"))],
    "misaligned": [("misaligned", {}, "KP_ERROR_INVALID_ARGUMENT",
                    ("demo_add_f32_vec4", "kernel add[f32_vec4]", "parameter 0 'x'", "16-byte aligned"))],
    "null_tensor": [
        ("null_tensor", {}, "KP_ERROR_INVALID_ARGUMENT", ("demo_tsum", "'t'", "NULL")),
        ("null_tensor_tma", {}, "KP_ERROR_INVALID_ARGUMENT", ("demo_tma2d", "argument 'm'", "NULL")),
    ],
    "non_contiguous": [("non_contiguous", {}, "KP_ERROR_INVALID_ARGUMENT",
                        ("demo_tma2d", "kernel tma2d", "descriptor m", "innermost stride must be 1"))],
    "grid_zero": [("grid_zero", {}, "KP_ERROR_INVALID_LAUNCH", ("demo_add_f32", "kernel add[f32]", "grid[0] is 0"))],
    "grid_beyond": [("grid_beyond", {}, "KP_ERROR_INVALID_LAUNCH",
                     ("demo_add_f32", "kernel add[f32]", "grid {2,70000,1} exceeds the device limits"))],
    "block_beyond": [("block_beyond", {}, "KP_ERROR_INVALID_LAUNCH",
                      ("demo_add_f32", "kernel add[f32]", "block {2048,1,1} exceeds the device limits"))],
    "block_reqntid": [("block_reqntid", {}, "KP_ERROR_INVALID_LAUNCH",
                       ("demo_fixed_block", "kernel fixed_block", "REQNTID) {128,1,1}"))],
    "smem_limit": [("smem_limit", {}, "KP_ERROR_INVALID_LAUNCH", ("demo_big_smem", "kernel big_smem", "232448"))],
    "cluster": [
        ("cluster_grid", {}, "KP_ERROR_INVALID_LAUNCH", ("demo_cluster2", "kernel cluster2", "not a multiple")),
        ("cluster_other", {}, "KP_ERROR_INVALID_LAUNCH", ("demo_cluster2", "kernel cluster2", "compile-time cluster")),
    ],
    "arch_not_carried": [
        ("arch_not_carried", {"FAKECUDA_CC": "10.0"}, "KP_ERROR_NO_BINARY_FOR_ARCH",
         ("demo_add_f64", "kernel add[f64]", "sm_100", "carries sm_80, sm_90a")),
        ("arch_not_carried", {"FAKECUDA_CC": "7.5"}, "KP_ERROR_NO_BINARY_FOR_ARCH", ("demo_add_f64", "sm_75")),
    ],
    "no_driver": [("no_driver", {"NO_DRIVER": "1"}, "KP_ERROR_NO_DRIVER", ("demo", "libcuda.so.1"))],
    "driver_too_old": [
        ("driver_too_old", {"FAKECUDA_VERSION": "11080"}, "KP_ERROR_DRIVER_TOO_OLD", ("demo", "CUDA 11.8")),
        ("driver_too_old", {"FAKECUDA_MISSING": "cuLibraryLoadData"}, "KP_ERROR_DRIVER_TOO_OLD",
         ("demo", "cuLibraryLoadData")),
    ],
    "null_launch": [("null_launch", {}, "KP_ERROR_INVALID_ARGUMENT", ("demo_add_f32", "launch", "NULL"))],
    "null_struct": [
        ("null_struct", {}, "KP_ERROR_INVALID_ARGUMENT", ("demo_tmap_f32", "kernel tmap[f32]", "parameter 0 'm'",
                                                          "NULL")),
        ("null_struct_family", {}, "KP_ERROR_INVALID_ARGUMENT", ("demo_tmap", "argument 'm'", "NULL")),
    ],
    "negative_extent": [
        ("negative_extent", {}, "KP_ERROR_INVALID_ARGUMENT",
         ("demo_tsum", "argument 't'", "shape[0] = -5 is negative: extents must be >= 0")),
        ("negative_extent_grid", {}, "KP_ERROR_INVALID_ARGUMENT", ("demo_gsum", "shape[0] = -5 is negative")),
        ("negative_extent_desc", {}, "KP_ERROR_INVALID_ARGUMENT",
         ("demo_desc_dec", "argument 'p'", "shape[1] = -5 is negative")),
    ],
    "partial_block": [
        ("partial_block", {}, "KP_ERROR_INVALID_LAUNCH",
         ("demo_add_f32", "kernel add[f32]", "launch.block {0,5,0} has x = 0 but y or z set", "{0,0,0}")),
        ("partial_block_fixed", {}, "KP_ERROR_INVALID_LAUNCH",
         ("demo_fixed_block", "kernel fixed_block", "launch.block {0,0,1} has x = 0")),
        ("partial_cluster", {}, "KP_ERROR_INVALID_LAUNCH",
         ("demo_add_f32", "kernel add[f32]", "launch.cluster {0,2,0} has x = 0")),
    ],
}

# rows C refuses at compile time: (program body, diagnostic) compiled against demo.h with the usual -Werror
C_COMPILE = {
    "wrong_arg_count": ("kp_launch l = {{0}}; return (int)demo_add_f32(&l, 0, 0, 0);", "too few arguments"),
    "wrong_type": ("kp_launch l = {{0}}; double* p = 0; return (int)demo_add_f32(&l, p, p, 0, 1);",
                   "incompatible pointer type"),
    "unknown_kernel": ("kp_launch l = {{0}}; return (int)demo_nope(&l, 0);", "implicit declaration of function"),
}


@pytest.fixture(scope="module")
def clib(tmp_path_factory):
    from clib_support import reliability_harness, session_env

    env = session_env(tmp_path_factory)
    return env, reliability_harness(env)


@pytest.mark.parametrize("row", [r.id for r in MATRIX])
def test_c(clib, tmp_path, row):
    from clib_support import results
    from fake_cuda import run
    from toolchain_support import CC

    env, exe = clib
    checked = 0
    for case, extra, status, parts in C_CASES.get(row, []):
        extra = dict(extra)
        fake = None if extra.pop("NO_DRIVER", None) else env.fake
        r = run(exe, env.root, fake, "row", case, **{"FAKECUDA_CC": "9.0", **extra})
        assert r.returncode == 0 and r.stdout.rstrip().endswith("alive"), (r.stdout, r.stderr)
        got, msg = results(r)[case]
        assert got == status, msg
        for part in parts:
            assert part in msg, (part, msg)
        assert r.launch_lines() == [], "nothing may be launched"
        checked += 1
    if row in C_COMPILE:
        body, diagnostic = C_COMPILE[row]
        src = tmp_path / "bad.c"
        src.write_text(f'#include "demo.h"\nint main(void) {{ {body.format()} }}\n')
        proc = subprocess.run([CC, "-std=c99", "-Wall", "-Werror", f"-I{env.demo.include_dir}", "-c", str(src), "-o",
                               str(tmp_path / "bad.o")], capture_output=True, text=True)
        assert proc.returncode != 0 and diagnostic in proc.stderr, proc.stderr
        checked += 1
    row_spec = next(r for r in MATRIX if r.id == row)
    if not row_spec.c:
        pytest.skip(f"C: {row_spec.c_note}")
    assert checked, f"row {row} has no C case"


# ------------------------------------------------------------------ Python

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def rt(tmp_path_factory, runtime_bundle, fake_cuda):
    old = _old_driver(tmp_path_factory.mktemp("relrt"))
    with fake_cuda.in_process().installed() as fake:
        yield runtime_bundle, fake, old


def _old_driver(root: Path) -> Path:
    """A libcuda stand-in from before CUDA 12.0: cuInit and friends, no cuGetProcAddress_v2."""
    from toolchain_support import CC

    src = root / "old.c"
    src.write_text("int cuInit(unsigned f) { (void)f; return 0; }\n"
                   "int cuDriverGetVersion(int* v) { *v = 11080; return 0; }\n")
    out = root / "libcuda_old.so.1"
    subprocess.run([CC, "-shared", "-fPIC", str(src), "-o", str(out)], check=True)
    return out


def _x(ptr: int, n: int, device: int = 0):  # type: ignore[no-untyped-def]
    from runtime_support import CudaArray

    return CudaArray(ptr, (n,), device=device)


# row id -> [(setup, call, exception, message regexes)]; setup: "1gpu" | "2gpu" | "sm100" | "nodriver" | "old"
PY_CASES = {
    "wrong_arg_count": [("1gpu", lambda m, a, b, c: m.add(a, b, c, grid=1, block=32), "ArgumentTypeError",
                         (r"kernel add: takes 4 arguments", "missing n"))],
    "wrong_type": [("1gpu", lambda m, a, b, c: m.add(a, "b", c, 8, grid=1, block=32), "ArgumentTypeError",
                    (r"kernel add", r"parameter 1 'b'")),
                   ("1gpu", lambda m, a, b, c: m.add(a, b, c, 8.0, grid=1, block=32), "ArgumentTypeError",
                    (r"kernel add", r"parameter 3 'n'"))],
    "wrong_dtype": [("1gpu", lambda m, a, b, c: m.add(a.double(), b, c, 8, grid=1, block=32), "ArgumentValueError",
                     (r"kernel add", r"parameter 0 'a': expected a f32 tensor, got a float64"))],
    "wrong_rank": [("1gpu", lambda m, a, b, c: m.row_sums(a, c, grid=1, block=32), "ArgumentValueError",
                    (r"kernel row_sums", r"parameter 0 't'", "rank 2, got rank 1"))],
    "static_extent": [("1gpu", lambda m, a, b, c: m.row_sums(a.reshape(10, 100), c, grid=1, block=32),
                       "ArgumentValueError", (r"kernel row_sums", r"shape\[1\] must be 64"))],
    "misaligned": [("1gpu", lambda m, a, b, c: m.vadd_aligned(a[1:], b[1:], c[1:], 60, grid=1, block=64),
                    "ArgumentValueError", (r"kernel vadd", r"parameter 0 'a'", "16-byte aligned"))],
    "null_tensor": [("1gpu", lambda m, a, b, c: m.row_sums(None, c, grid=1, block=32), "ArgumentTypeError",
                     (r"kernel row_sums", r"parameter 0 't'", "NoneType"))],
    "cpu_tensor": [("cpu", lambda m, a, b, c: m.add(a, b, c, 8, grid=1, block=32), "ArgumentValueError",
                    (r"parameter 0 'a' is a float32 tensor .* on cpu",))],
    "other_device": [("2gpu", lambda m, a, b, c: m.add(_x(0x1000, 8), _x(0x2000, 8, 1), _x(0x1000, 8), 8, grid=1,
                                                       block=32), "ArgumentValueError",
                      ("parameter 0 'a' is on cuda:0 but parameter 1 'b' is on cuda:1",))],
    "non_contiguous": [("1gpu", lambda m, a, b, c: m.add(a, b, c[::2], 8, grid=1, block=32), "ArgumentValueError",
                        (r"kernel add", r"parameter 2 'out'", "contiguous"))],
    "grid_zero": [("1gpu", lambda m, a, b, c: m.add(a, b, c, 8, grid=0, block=32), "LaunchError",
                   (r"kernel add", r"grid\[0\] is 0"))],
    "grid_beyond": [("1gpu", lambda m, a, b, c: m.add(a, b, c, 8, grid=(1, 70000), block=32), "LaunchError",
                     (r"kernel add", r"grid\[1\] = 70000 exceeds")),
                    ("1gpu", lambda m, a, b, c: m.add(a, b, c, 8, grid=2**31, block=32), "LaunchError",
                     (r"kernel add", r"grid\[0\]"))],
    "block_beyond": [("1gpu", lambda m, a, b, c: m.add(a, b, c, 8, grid=1, block=2048), "LaunchError",
                      (r"kernel add", r"block\[0\] = 2048 exceeds")),
                     ("1gpu", lambda m, a, b, c: m.add(a, b, c, 8, grid=1, block=(32, 32, 2)), "LaunchError",
                      (r"kernel add", "2048 threads"))],
    "block_reqntid": [("1gpu", lambda m, a, b, c: m.reqntid(a, b, c, 8, grid=1, block=64), "LaunchError",
                       (r"kernel reqntid", r"REQNTID\) \(128, 1, 1\)"))],
    "smem_limit": [("1gpu", lambda m, a, b, c: m.add(a, b, c, 8, grid=1, block=32, smem=300_000), "LaunchError",
                    (r"kernel add", "exceed the 232448 bytes per block"))],
    "cluster": [("1gpu", lambda m, a, b, c: m.clustered(a, 8, grid=3, block=32), "LaunchError",
                 (r"kernel clustered", r"not a multiple of the cluster \(2, 1, 1\)")),
                ("1gpu", lambda m, a, b, c: m.clustered(a, 8, grid=4, block=32, cluster=4), "LaunchError",
                 (r"kernel clustered", "compile-time cluster")),
                ("1gpu", lambda m, a, b, c: m.add(a, b, c, 8, grid=4, block=32, cluster=16), "LaunchError",
                 (r"kernel add", "portable"))],
    "unknown_kernel": [("1gpu", lambda m, a, b, c: m.nope, "AttributeError", ("has no kernel 'nope'; kernels: add",))],
    "arch_not_carried": [("sm100", lambda m, a, b, c: m.add(a, b, c, 8, grid=1, block=32), "LaunchError",
                          (r"kernel add", r"no binary runs on device 0 \(sm_100\)", "carries sm_80, sm_90a$"))],
    "no_driver": [("nodriver", lambda m, a, b, c: m.add(a, b, c, 8, grid=1, block=32), "DriverError",
                   ("cannot load the CUDA driver", "libcuda"))],
    "driver_too_old": [("old", lambda m, a, b, c: m.add(a, b, c, 8, grid=1, block=32), "DriverError",
                        ("predates CUDA 12.0",))],
    "null_launch": [("1gpu", lambda m, a, b, c: m.add(a, b, c, 8, grid=1, block=32, bogus=1), "ArgumentTypeError",
                     (r"kernel add", "unknown keyword argument 'bogus'"))],
    "null_struct": [("1gpu", lambda m, a, b, c: m.affine(a, b, None, 8, grid=1, block=32), "ArgumentTypeError",
                     (r"kernel affine", r"parameter 2 'p'"))],
    "negative_extent": [
        ("1gpu", lambda m, a, b, c: m.row_sums(_cai(shape=(-5, 64)), c, grid=1, block=32), "ArgumentValueError",
         (r"kernel row_sums: parameter 0 't'", r"shape\[0\] = -5 is negative", r"\[0, 2\*\*63\)")),
        ("1gpu", lambda m, a, b, c: m.add(_cai(shape=(-5,)), b, c, 8, grid=1, block=32), "ArgumentValueError",
         (r"kernel add: parameter 0 'a'", r"shape\[0\] = -5 is negative")),
        ("1gpu", lambda m, a, b, c: m.row_sums(_dlpack(0x1000, (-5, 64)), c, grid=1, block=32), "ArgumentValueError",
         (r"kernel row_sums: parameter 0 't'", r"DLPack tensor: shape\[0\] = -5 is negative")),
    ],
    "non_int_field": [
        ("1gpu", lambda m, a, b, c: m.add(_cai(data=(1.5, False)), b, c, 8, grid=1, block=32), "ArgumentTypeError",
         (r"kernel add: parameter 0 'a'", r"device pointer, must be an int, got float 1.5")),
        ("1gpu", lambda m, a, b, c: m.row_sums(_cai(shape=(1.9, 64)), c, grid=1, block=32), "ArgumentTypeError",
         (r"kernel row_sums: parameter 0 't'", r"\['shape'\]\[0\] must be an int, got float 1.9")),
        ("1gpu", lambda m, a, b, c: m.add(a, _cai(data=(True, False)), c, 8, grid=1, block=32), "ArgumentTypeError",
         (r"kernel add: parameter 1 'b'", r"must be an int, got bool True")),
    ],
    "short_strides": [
        ("1gpu", lambda m, a, b, c: m.row_sums(_cai(shape=(10, 64), strides=(4,)), c, grid=1, block=32),
         "ArgumentValueError", (r"kernel row_sums: parameter 0 't'", r"1 entry \[4\] for the 2 modes")),
        ("1gpu", lambda m, a, b, c: m.add(_cai(shape=(2, 4), strides=(4,)), b, c, 8, grid=1, block=32),
         "ArgumentValueError", (r"kernel add: parameter 0 'a'", r"1 entry \[4\] for the 2 modes")),
    ],
    "byte_order": [
        ("1gpu", lambda m, a, b, c: m.add(_cai(typestr=">f4"), b, c, 8, grid=1, block=32), "ArgumentValueError",
         (r"kernel add: parameter 0 'a'", r"'>f4': big-endian", "expected '<f4'")),
        ("1gpu", lambda m, a, b, c: m.add(_cai(typestr="<f0"), b, c, 8, grid=1, block=32), "ArgumentValueError",
         (r"kernel add: parameter 0 'a'", r"'<f0': element size 0 bytes", "size of at least 1 byte")),
        ("1gpu", lambda m, a, b, c: m.add(_cai(typestr="|f4"), b, c, 8, grid=1, block=32), "ArgumentValueError",
         (r"kernel add: parameter 0 'a'", r"'\|f4': of no byte order")),
    ],
    "malformed_array": [
        ("1gpu", lambda m, a, b, c: m.add(_cai(data=()), b, c, 8, grid=1, block=32), "ArgumentTypeError",
         (r"kernel add: parameter 0 'a'", r"\['data'\] must be a tuple \(pointer: int, read_only: bool\), got tuple")),
        ("1gpu", lambda m, a, b, c: m.add(_cai(data=(-1, False)), b, c, 8, grid=1, block=32), "ArgumentValueError",
         (r"kernel add: parameter 0 'a'", r"device pointer, is -1: outside \[0, 2\*\*64\)")),
        ("1gpu", lambda m, a, b, c: m.add(_cai(data=(2**70, False)), b, c, 8, grid=1, block=32),
         "ArgumentValueError", (r"kernel add: parameter 0 'a'", r"is 1180591620717411303424: outside")),
        ("1gpu", lambda m, a, b, c: m.add(_cai(shape=None), b, c, 8, grid=1, block=32), "ArgumentTypeError",
         (r"kernel add: parameter 0 'a'", r"\['shape'\] must be a tuple of ints, got NoneType")),
        ("1gpu", lambda m, a, b, c: m.row_sums(_dlpack(0x1000, (4, 64), ndim=100), c, grid=1, block=32),
         "ArgumentValueError", (r"kernel row_sums: parameter 0 't'", r"ndim 100; expected 0 to 64")),
    ],
    "partial_block": [
        ("1gpu", lambda m, a, b, c: m.add(a, b, c, 8, grid=1, block=(0, 5)), "LaunchError",
         (r"kernel add", r"block \(0, 5, 1\) has a dimension < 1")),
        ("1gpu", lambda m, a, b, c: m.add(a, b, c, 8, grid=4, block=32, cluster=(0, 2)), "LaunchError",
         (r"kernel add", r"cluster \(0, 2, 1\) has a dimension < 1")),
    ],
}


def _cai(**entries):  # type: ignore[no-untyped-def]
    from runtime_support import CaiArray

    return CaiArray(**entries)


def _dlpack(ptr: int, shape: tuple[int, ...], ndim: int | None = None):  # type: ignore[no-untyped-def]
    from runtime_support import DLPackArray

    return DLPackArray(ptr, shape, ndim=ndim)


@pytest.fixture(params=["c", "python"])
def launch_path(request):
    return request.param


@pytest.mark.parametrize("row", [r.id for r in MATRIX])
def test_python(rt, launch_path, row):
    import kernelpack
    from kernelpack import runtime
    from kernelpack.runtime import driver
    from runtime_support import cpu_tensors_as_cuda, python_path

    bundle, fake, old = rt
    errors = {"AttributeError": AttributeError, "LaunchError": kernelpack.core.errors.LaunchError,
              **{n: getattr(runtime, n) for n in ("ArgumentTypeError", "ArgumentValueError", "DriverError")}}
    for setup, call, exc, parts in PY_CASES[row]:
        fake.reset(*{"2gpu": ((9, 0), (9, 0)), "sm100": ((10, 0),)}.get(setup, ((9, 0),)))
        path = {"nodriver": "/nonexistent/kp-test/libcuda.so.1", "old": str(old)}.get(setup, str(fake.path))
        driver.use_library(path)
        with python_path() if launch_path == "python" else _Null():
            m = kernelpack.load(bundle)
        m.vadd_aligned = kernelpack.load(type(bundle)(tuple(a for a in bundle if a.label == "vadd[aligned]"))).vadd
        a, b, c = (torch.zeros(1000) for _ in range(3))
        with cpu_tensors_as_cuda() if setup != "cpu" else _Null():
            with pytest.raises(errors[exc]) as e:
                call(m, a, b, c)
        for part in parts:
            assert re.search(part, str(e.value)), (part, str(e.value))
        assert fake.count() == 0, "nothing may be launched"
    fake.reset((9, 0))
    driver.use_library(str(fake.path))
    m = kernelpack.load(bundle)  # the process and the runtime still work
    m.add(_x(0x1000, 8), _x(0x2000, 8), _x(0x3000, 8), 8, grid=1, block=32)
    assert fake.count() == 1


class _Null:
    def __enter__(self):  # type: ignore[no-untyped-def]
        return self

    def __exit__(self, *exc):  # type: ignore[no-untyped-def]
        return False


@pytest.mark.parametrize("setup", ["nodriver", "old"])
def test_python_driver_refusals_name_the_kernel(rt, setup):
    import kernelpack
    from kernelpack.runtime import DriverError, driver

    bundle, fake, old = rt
    driver.use_library({"nodriver": "/nonexistent/kp-test/libcuda.so.1", "old": str(old)}[setup])
    m = kernelpack.load(bundle)
    try:
        with pytest.raises(DriverError, match="kernel add"):
            m.add(_x(0x1000, 8), _x(0x2000, 8), _x(0x3000, 8), 8, grid=1, block=32)
    finally:
        driver.use_library(str(fake.path))


# ------------------------------------------------------------------ the report's table


def markdown() -> str:
    lines = ["| # | bad input | C library (refusal) | C cases | Python runtime (refusal) | Python cases |",
             "|---|---|---|---|---|---|"]
    for i, r in enumerate(MATRIX, 1):
        nc = len(C_CASES.get(r.id, [])) + (r.id in C_COMPILE)
        c = r.c or f"— ({r.c_note})"
        lines.append(f"| {i} | {r.what} (`{r.id}`) | {c} | {nc} | {r.python} | {len(PY_CASES[r.id])} × 2 paths |")
    total_c = sum(len(v) for v in C_CASES.values()) + len(C_COMPILE)
    total_py = 2 * sum(len(v) for v in PY_CASES.values())
    lines.append(f"| | **total** | | **{total_c}** | | **{total_py}** |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    print(markdown())


def test_c_rows_and_a_storm_under_address_and_ub_sanitizers(clib, tmp_path):
    """Every C row (hostile ranks and dtypes included) and 3 storm repetitions, with ASan + UBSan aborting on error."""
    from clib_support import results
    from fake_cuda import run
    from toolchain_support import CC

    env, _ = clib
    src = env.demo.sources
    exe = tmp_path / "reliability_harness_asan"
    subprocess.run([CC, "-std=c99", "-D_POSIX_C_SOURCE=200809L", "-g", "-O1", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{env.demo.include_dir}", f"-Wa,-I{src}",
                    *[str(p) for p in sorted(src.glob("*.[cs]"))], str(HERE / "reliability_harness.c"), "-o",
                    str(exe), "-ldl", "-lpthread"], check=True)
    for row_id, cases in C_CASES.items():
        for case, extra, status, _ in cases:
            extra = dict(extra)
            fake = None if extra.pop("NO_DRIVER", None) else env.fake
            r = run(exe, env.root, fake, "row", case, **{"FAKECUDA_CC": "9.0", **extra})
            assert r.returncode == 0 and "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr
            assert results(r)[case][0] == status, row_id
    r = run(exe, env.root, env.fake, "storm", "3", FAKECUDA_CC="9.0")
    assert r.returncode == 0 and "storm done" in r.stdout and "Sanitizer" not in r.stderr, r.stderr[-3000:]
