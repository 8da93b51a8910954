"""The fake CUDA driver itself (kernelpack's dry-run driver, src/kernelpack/runtime/_dryrun.c, as tests/fake_cuda.py
builds it): its driver rules, and one answer whether a program reads it through the call log or this process through
``fk_*``."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

from clib_support import session_env
from fake_cuda import FakeCuda, InProcessFake, environment, run
from kernelpack.bundle.kpack import Bundle

ROOT = Path(__file__).resolve().parents[1]
c_int, c_uint, c_void_p = ctypes.c_int, ctypes.c_uint, ctypes.c_void_p
SIGNATURES = {
    "cuInit": (c_uint,),
    "cuDeviceGet": (ctypes.POINTER(c_int), c_int),
    "cuGetErrorName": (c_int, ctypes.POINTER(ctypes.c_char_p)),
    "cuDevicePrimaryCtxRetain": (ctypes.POINTER(c_void_p), c_int),
    "cuCtxSetCurrent": (c_void_p,),
    "cuLibraryLoadData": (ctypes.POINTER(c_void_p), ctypes.c_char_p, c_void_p, c_void_p, c_uint, c_void_p, c_void_p,
                          c_uint),
    "cuLibraryGetKernel": (ctypes.POINTER(c_void_p), c_void_p, ctypes.c_char_p),
    "cuKernelSetAttribute": (c_int, c_int, c_void_p, c_int),
    "cuLaunchKernel": (c_void_p, *(c_uint,) * 7, c_void_p, ctypes.POINTER(c_void_p), c_void_p),
}


class Entries:
    """The fake's entry points, reached as both back ends reach them (cuGetProcAddress_v2)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.fns = {}
        for name, args in SIGNATURES.items():
            pfn = c_void_p()
            found = lib.cuGetProcAddress_v2(name.encode(), ctypes.byref(pfn), 12000, 0, None)
            assert found == 0 and pfn.value is not None, name
            self.fns[name] = ctypes.CFUNCTYPE(c_int, *args)(pfn.value)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return self.fns[name]


@pytest.fixture(scope="module")
def cubin(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The C library tests' kernels for sm_90a: fixed_block (REQNTID 128), cluster2 (an explicit 2x1x1 cluster),
    big_smem (dynamic shared memory), noargs."""
    return session_env(tmp_path_factory).kernels.cubins["90a"]


def _launch(cu: Entries, kernel: ctypes.c_void_p, nparams: int, grid: tuple[int, int, int],
            block: tuple[int, int, int], smem: int = 0) -> int:
    arg = ctypes.c_uint64(0x1000)
    params = (c_void_p * max(nparams, 1))(*[ctypes.addressof(arg)] * nparams)
    return cu.cuLaunchKernel(kernel, *grid, *block, smem, None, params if nparams else None, None)


def test_launch_rules(fake: InProcessFake, cubin: bytes) -> None:
    cu = Entries(fake.lib)
    assert cu.cuInit(0) == 0
    lib, ctx = c_void_p(), c_void_p()
    assert cu.cuLibraryLoadData(ctypes.byref(lib), cubin, None, None, 0, None, None, 0) == 0
    k = {}
    for name in ("fixed_block", "cluster2", "big_smem", "noargs"):
        k[name] = c_void_p()
        assert cu.cuLibraryGetKernel(ctypes.byref(k[name]), lib, name.encode()) == 0
    missing = c_void_p()
    assert cu.cuLibraryGetKernel(ctypes.byref(missing), lib, b"nope") == 500
    assert _launch(cu, k["fixed_block"], 1, (1, 1, 1), (128, 1, 1)) == 201, "no current context"
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0 and cu.cuCtxSetCurrent(ctx) == 0
    cases = [  # kernel, parameters, grid, block, dynamic shared memory -> result
        ("fixed_block", 1, (2, 1, 1), (128, 1, 1), 0, 0),
        ("fixed_block", 1, (2, 1, 1), (64, 2, 1), 0, 1),  # REQNTID: exactly that block or CUDA_ERROR_INVALID_VALUE
        ("cluster2", 1, (4, 2, 1), (32, 1, 1), 0, 0),
        ("cluster2", 1, (3, 1, 1), (32, 1, 1), 0, 912),  # a compile-time cluster needs a grid of whole clusters
        ("big_smem", 3, (1, 1, 1), (64, 1, 1), 48 * 1024, 0),
        ("big_smem", 3, (1, 1, 1), (64, 1, 1), 60_000, 1),  # above 48 KiB only after the opt-in
        ("noargs", 0, (1, 1, 1), (1024, 2, 1), 0, 1),  # more than 1024 threads
        ("noargs", 0, (1, 1, 1), (1, 1, 65), 0, 1),  # block z above 64
        ("noargs", 0, (1, 65536, 1), (1, 1, 1), 0, 1),  # grid y above 65535
        ("noargs", 0, (0, 1, 1), (1, 1, 1), 0, 1),  # an empty grid
    ]
    for name, n, grid, block, smem, want in cases:
        assert _launch(cu, k[name], n, grid, block, smem) == want, (name, grid, block, smem)
    assert cu.cuKernelSetAttribute(8, 232448 + 1, k["big_smem"], 0) == 1, "beyond the device's opt-in limit"
    assert cu.cuKernelSetAttribute(0, 1, k["big_smem"], 0) == 1, "read-only attribute"
    assert cu.cuKernelSetAttribute(8, 60_000, k["big_smem"], 0) == 0
    assert _launch(cu, k["big_smem"], 3, (1, 1, 1), (64, 1, 1), 60_000) == 0
    results = [x["result"] for x in fake.attempts()]
    assert results == [201] + [c[-1] for c in cases] + [0]
    assert [x["kernel"] for x in fake.launches()] == ["fixed_block", "cluster2", "big_smem", "big_smem"]
    assert fake.calls("cuLaunchKernel") == len(results) and fake.calls("cuLibraryGetKernel") == 5


def _probe(fake_cuda: FakeCuda, tmp_path: Path, calls: str, **config: str) -> list[str]:
    """Run ``calls`` (Python lines using ``fn(name, *ctypes args)``) in a fresh process on the fake."""
    script = tmp_path / "probe.py"
    script.write_text("import ctypes\n"
                      "cu = ctypes.CDLL('libcuda.so.1')\n"
                      "n, s = ctypes.c_int(-1), ctypes.c_char_p()\n"
                      "def fn(sym, *args):\n"
                      "    p = ctypes.c_void_p()\n"
                      "    if cu.cuGetProcAddress_v2(sym.encode(), ctypes.byref(p), 12000, 0, None):\n"
                      "        return 'missing'\n"
                      "    return ctypes.CFUNCTYPE(ctypes.c_int, *[type(a) for a in args])(p.value)(*args)\n"
                      + calls)
    r = run([sys.executable, str(script)], tmp_path, fake_cuda, **environment(**config))
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_initialisation_devices_and_error_names(fake_cuda: FakeCuda, tmp_path: Path) -> None:
    calls = ("print(fn('cuDeviceGetCount', ctypes.pointer(n)), fn('cuInit', ctypes.c_uint(0)),"
             " fn('cuDeviceGetCount', ctypes.pointer(n)), n.value,"
             " fn('cuDeviceGet', ctypes.pointer(n), ctypes.c_int(2)),"
             " fn('cuGetErrorName', ctypes.c_int(12345), ctypes.pointer(s)), s.value,"
             " fn('cuGetErrorName', ctypes.c_int(912), ctypes.pointer(s)), s.value.decode())\n")
    assert _probe(fake_cuda, tmp_path, calls, cc="8.0,9.0") == [
        "3", "0", "0", "2", "101", "1", "None", "0", "CUDA_ERROR_CLUSTER_SIZE_INVALID"]
    assert _probe(fake_cuda, tmp_path, "print(fn('cuInit', ctypes.c_uint(0)))\n", cc="none") == ["100"]
    assert _probe(fake_cuda, tmp_path, "print(fn('cuInit', ctypes.c_uint(0)))\n", fail="cuInit:999") == ["999"]
    assert _probe(fake_cuda, tmp_path, "print(fn('cuInit', ctypes.c_uint(0)))\n", missing="cuInit") == ["missing"]


LAUNCHES = """
mod.add(0x1000, 0x2000, 0x3000, 8, grid=3, block=32, stream=0x77)
mod.spec_cluster(0x1000, 0x2000, 0x3000, 8, grid=4, block=32)
mod.affine(0x1000, 0x2000, bytes(range(12)), 5, grid=1, block=32)
mod.clustered(0x1000, 8, grid=4, block=32)
"""
SCRIPT = "import sys, kernelpack\nmod = kernelpack.load(sys.argv[1])\n" + LAUNCHES
CONFIG = {"cc": "8.0,9.0", "current": 1}  # device 1 (sm_90) current on every thread


def test_one_answer_through_the_log_and_in_process(fake: InProcessFake, fake_cuda: FakeCuda, runtime_bundle: Bundle,
                                                    tmp_path: Path) -> None:
    """The same runtime launches, on the fake configured the same way, in this process and in a program that opens
    libcuda.so.1: equal records."""
    import kernelpack

    kp = runtime_bundle.write(tmp_path / "k.kpack")
    script = tmp_path / "launch.py"
    script.write_text(SCRIPT)
    r = run([sys.executable, str(script), str(kp)], tmp_path, fake_cuda, PYTHONPATH=str(ROOT / "src"),
            **environment(**CONFIG))
    assert r.returncode == 0, r.stdout + r.stderr
    fake.reset(**CONFIG)
    exec(LAUNCHES, {"mod": kernelpack.load(kp)})
    got = fake.attempts()
    assert [(x["kernel"], x["device"], x["result"]) for x in got] == [
        ("add", 1, 0), ("add", 1, 0), ("affine", 1, 0), ("clustered", 1, 0)]
    assert got[1]["cluster"] == (2, 1, 1) and got[1]["ex"] and got[0]["stream"] == 0x77
    assert r.attempts() == got
