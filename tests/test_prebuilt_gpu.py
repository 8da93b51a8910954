"""On a real GPU: a team's own nvcc output (tests/prebuilt_kernels.cu as fatbins: SASS for sm_80 and sm_90a, PTX for
compute_90; stored as is, zstd- and LZ4-compressed) shipped through the prebuilt frontend computes what torch computes,
from Python (the C path and the pure-Python path), from PTX alone (the driver JIT-compiles it), and through the
generated C library called in-process.

Run where the GPU is: ``python3 -m pytest -m gpu tests/test_prebuilt_gpu.py`` (the binaries are compiled there with
its nvcc, as tests/prebuilt_support.py does here; needs torch). Skipped cleanly without a GPU.
"""

from __future__ import annotations

import ctypes
import struct

import pytest

import kernelpack
from gpu import requires_gpu
from kernelpack import prebuilt
from kernelpack.bundle.kpack import Bundle
from kernelpack.runtime.cstructs import KpLaunch
from prebuilt_support import FILL_F32, FILL_I32, PARAMS, Built, session_binaries
from runtime_support import python_path

ALL = {**PARAMS, FILL_F32: None, FILL_I32: None}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return session_binaries(tmp_path_factory)


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    torch = pytest.importorskip("torch")
    torch.cuda.init()
    return torch


def _load(bundle: Bundle, path: str):  # type: ignore[no-untyped-def]
    if path == "python":
        with python_path():
            return kernelpack.load(bundle)
    return kernelpack.load(bundle)


def _check_every_kernel(mod, torch) -> None:  # type: ignore[no-untyped-def]
    n = 10_000
    grid = (n + 127) // 128
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    mod.add(x, y, out, n, grid=grid, block=128)
    torch.testing.assert_close(out, x + y)

    y2 = y.clone()
    mod.axpy(2.5, x, y2, n, grid=grid, block=128)
    torch.testing.assert_close(y2, 2.5 * x + y)

    h = torch.randn(n, device="cuda", dtype=torch.float16)
    h2 = h.clone()
    mod.scale_half(0.5, h2, n, grid=grid, block=128)
    torch.testing.assert_close(h2, h * 0.5)

    p = torch.zeros(64, device="cuda")
    mod.pair(struct.pack("<fi", 1.5, -3), p, grid=1, block=64)  # struct Pair { float a; int b; } by value
    torch.testing.assert_close(p, 1.5 * torch.arange(1, 65, device="cuda", dtype=torch.float32) - 3)

    m = torch.zeros(n, device="cuda")
    mod.mixed(True, 200, -7, 0.25, n, m, grid=grid, block=128)
    torch.testing.assert_close(m, torch.full((n,), 193.25, device="cuda"))

    fi = torch.zeros(n, device="cuda", dtype=torch.int32)
    ff = torch.zeros(n, device="cuda")
    mod.fill(fi, 7, n, grid=grid, block=128)  # the family picks fill[int] / fill[float] by the dtype
    mod.fill(ff, -2, n, grid=grid, block=128)
    torch.cuda.synchronize()
    assert bool((fi == 7).all()) and bool((ff == -2.0).all())


@requires_gpu
@pytest.mark.parametrize("mode", ["default", "size", "speed"])
@pytest.mark.parametrize("path", ["c", "python"])
def test_every_kernel_of_every_fatbin_matches_torch(built: Built, torch, mode: str, path: str) -> None:  # type: ignore[no-untyped-def]
    bundle = prebuilt.compile(built.fatbin(mode), ALL)
    _check_every_kernel(_load(bundle, path), torch)


@requires_gpu
def test_ptx_alone_is_jit_compiled_by_the_driver(built: Built, torch) -> None:  # type: ignore[no-untyped-def]
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("compute_90 PTX needs a device of compute capability 9.0 or newer")
    bundle = prebuilt.compile(built.fatbin(), ALL, arch=["compute_90"])
    assert {b.kind for a in bundle for b in a.binaries} == {"ptx"}
    _check_every_kernel(_load(bundle, "c"), torch)


@requires_gpu
def test_the_generated_c_library_launches_them(built: Built, torch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kernelpack.clib import Library

    bundle = prebuilt.compile(built.fatbin("size"), {"add": PARAMS["add"], FILL_F32: prebuilt.Kernel(name="fill")})
    lib = Library("pregpu", bundle).build(tmp_path / "pregpu")
    so = ctypes.CDLL(str(lib.lib_dir / "libpregpu.so"))
    so.pregpu_last_error.restype = ctypes.c_char_p
    n = 100_000
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.zeros(n, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    cfg = KpLaunch((ctypes.c_uint32 * 3)((n + 255) // 256, 1, 1), (ctypes.c_uint32 * 3)(256, 1, 1), 0,
                   (ctypes.c_uint32 * 3)(0, 0, 0), ctypes.c_void_p(stream))
    ptr = ctypes.c_void_p
    status = so.pregpu_add(ctypes.byref(cfg), ptr(x.data_ptr()), ptr(y.data_ptr()), ptr(out.data_ptr()),
                           ctypes.c_int32(n))
    assert status == 0, so.pregpu_last_error()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y)
    status = so.pregpu_fill(ctypes.byref(cfg), ptr(out.data_ptr()), ctypes.c_int32(3), ctypes.c_int32(n))
    assert status == 0, so.pregpu_last_error()
    torch.cuda.synchronize()
    assert bool((out == 3.0).all())
