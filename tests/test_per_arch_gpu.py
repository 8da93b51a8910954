"""On the H200: per-arch launch facts, per-arch parameter layouts and device-derived values with real kernels
compiled here (no GPU) by `scripts/gpu.py prepare per_arch` (tests/per_arch_builds.py) and carried over -- through the
runtime's C path, its Python path and a C library built from the same bundle (called with ctypes) -- computing what
torch computes.

* ``ct_mm`` (cuTile, 128x256x64 tiles): the sm_90a binary's 256-thread block, not sm_80's 128;
* ``tma`` (Triton, tensor descriptors): the CUtensorMap lowering of sm_90a, from the same caller-visible signature
  that sm_80 takes as pointer/shape/strides;
* ``persist``, ``tr_persist``: the SM count filled from the device, grid = that many blocks;
* ``rows``, ``tr_rows``: the build for this device's SM count chosen (132 on an H200);
* ``clustered``: max_active_clusters:2 asked of the driver, grid = 2 x that.
Inputs are random, outputs start as NaN so an unwritten element fails.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

import kernelpack
from gpu import GPU_MARKS, cuda_torch, require_carried
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.abi import DType
from kernelpack.launch.codes import DTYPE_CODE
from kernelpack.runtime.cstructs import KpLaunch as Launch
from kernelpack.runtime.cstructs import KpTensor as Tensor
from runtime_support import python_path

pytestmark = GPU_MARKS
PATHS = ["runtime_c", "runtime_python", "c_library"]


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    return Bundle.read(require_carried("per_arch/per_arch.kpack", "per_arch"))


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    return cuda_torch()


@pytest.fixture(scope="module")
def clib(bundle, tmp_path_factory):  # type: ignore[no-untyped-def]
    from kernelpack.clib import Library

    built = Library("pa", bundle).build(tmp_path_factory.mktemp("pa_gpu") / "pa")
    return CLib(ctypes.CDLL(str(built.shared)))


class CLib:
    """The generated library's entries, called like the runtime's kernels: ``lib.name(*args, grid=...)`` with torch
    tensors (pointers, or kp_tensor for descriptor arguments), ints and floats."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        lib.pa_last_error.restype = ctypes.c_char_p

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.lib, f"pa_{name}")

        def call(*args: Any, grid: Any = (0, 0, 0), block: Any = (0, 0, 0)) -> None:
            launch = Launch((ctypes.c_uint32 * 3)(*_dim3(grid)), (ctypes.c_uint32 * 3)(*_dim3(block)))
            keep = []
            cargs: list[Any] = [ctypes.byref(launch)]
            for a in args:
                if hasattr(a, "data_ptr"):
                    cargs.append(ctypes.c_void_p(a.data_ptr()))
                elif isinstance(a, Tensor):
                    keep.append(a)
                    cargs.append(ctypes.byref(a))
                elif isinstance(a, float):
                    cargs.append(ctypes.c_float(a))
                else:
                    cargs.append(ctypes.c_int32(a))
            status = fn(*cargs)
            assert status == 0, f"pa_{name}: status {status}: {self.lib.pa_last_error().decode()}"

        return call


def _dim3(d: Any) -> tuple[int, int, int]:
    t = tuple(d) if isinstance(d, (tuple, list)) else (d,)
    return (t + (1, 1))[:3] if t and t[0] else (0, 0, 0)


def kp_tensor(t: Any) -> Tensor:
    out = Tensor(t.data_ptr(), DTYPE_CODE[DType.f16], t.dim())
    for i, (s, st) in enumerate(zip(t.shape, t.stride())):
        out.shape[i], out.stride[i] = s, st
    return out


def kernels(path: str, bundle: Bundle, clib: Any) -> Any:
    if path == "c_library":
        return clib
    if path == "runtime_python":
        with python_path():
            return kernelpack.load(bundle)
    return kernelpack.load(bundle)


def sm_count(torch) -> int:  # type: ignore[no-untyped-def]
    return int(torch.cuda.get_device_properties(0).multi_processor_count)


@pytest.mark.parametrize("path", PATHS)
def test_cutile_matmul_runs_with_the_block_of_the_devices_binary(bundle, clib, torch, path):
    m, n, k = 384, 512, 256
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda")
    mod = kernels(path, bundle, clib)
    mod.ct_mm(a, m, k, k, 1, b, k, n, n, 1, c, m, n, n, 1, 0.5, grid=((m + 127) // 128, (n + 255) // 256))
    torch.cuda.synchronize()
    torch.testing.assert_close(c, 0.5 * (a.float() @ b.float()), rtol=1e-3, atol=1e-2)
    if path != "c_library":
        (entry,) = mod.ct_mm.family.device_state(0).entries
        assert entry.facts.block == entry.binary.cubin.kernel(entry.spec.artifact.entry).reqntid
        assert torch.cuda.get_device_capability() != (9, 0) or entry.facts.block == (256, 1, 1)


@pytest.mark.parametrize("path", PATHS)
def test_triton_descriptors_lowered_for_this_device_from_one_signature(bundle, clib, torch, path):
    m, n, k = 256, 192, 320
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    mod = kernels(path, bundle, clib)
    if path == "c_library":
        mod.tma(kp_tensor(a), kp_tensor(b), kp_tensor(c), k, grid=(m // 64, n // 64))
    else:
        mod.tma(a, b, c, k, grid=(m // 64, n // 64))
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-1)


@pytest.mark.parametrize("path", PATHS)
def test_persistent_kernels_read_the_sm_count(bundle, clib, torch, path):
    mod = kernels(path, bundle, clib)
    n = 1_000_003
    x = torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    mod.tr_persist(x, out, n)  # grid = NUM_SMS programs, NUM_SMS from the device
    idx = torch.full((n,), float("nan"), device="cuda")
    mod.persist(idx, n)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 2 * x, rtol=0, atol=0)
    torch.testing.assert_close(idx, torch.arange(n, device="cuda", dtype=torch.float32), rtol=0, atol=0)
    if path != "c_library":
        (entry,) = mod.tr_persist.family.device_state(0).entries
        assert entry.values == {"sm_count": sm_count(torch)}


@pytest.mark.parametrize("path", PATHS)
def test_the_build_for_this_devices_sm_count_is_chosen(bundle, clib, torch, path):
    mod = kernels(path, bundle, clib)
    sms = sm_count(torch)
    variant = f"sm{sms}" if sms in (132, 108) else "any"
    rows, cols = 1000, 200
    x = torch.randn(rows, cols, device="cuda")
    out = torch.full_like(x, float("nan"))
    mod.tr_rows(x, out, rows, cols, grid=sms if variant != "any" else 1)
    marks = torch.full((4096,), float("nan"), device="cuda")
    mod.rows(marks, 4096, grid=4096 // 128, block=128)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + 1, rtol=0, atol=0)
    want = float(sms) if sms in (132, 108) else 132.0  # rows[any] is the 132 build
    assert bool((marks == want).all())
    if path != "c_library":
        assert mod.tr_rows.family.device_state(0).entries[0].spec.label == f"tr_rows[{variant}]"


@pytest.mark.parametrize("path", PATHS)
def test_max_active_clusters_sizes_a_persistent_cluster_launch(bundle, clib, torch, path):
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("thread block clusters need sm_90")
    mod = kernels(path, bundle, clib)
    n = 1 << 20
    out = torch.full((n,), float("nan"), device="cuda")
    mod.clustered(out, n)
    torch.cuda.synchronize()
    v = out[0].item()
    assert 1 <= v <= sm_count(torch) // 2 and bool((out == v).all())
    if path != "c_library":
        (entry,) = mod.clustered.family.device_state(0).entries
        assert entry.values == {"max_active_clusters:2": int(v)}
