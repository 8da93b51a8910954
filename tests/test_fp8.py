"""fp8 element types (f8e4m3, f8e5m2) end to end without a GPU: CUDA C++ kernels over ``__nv_fp8_e4m3*`` compiled
with NVRTC get typed fp8 pointer parameters; the C library dispatches on ``KP_F8E4M3``/``KP_F8E5M2`` (kp_dtype codes
the Python launch model also uses); the Python runtime takes torch float8 tensors on both launch paths and refuses
the other fp8 format, the AMD fnuz formats and wrong dtypes with messages naming the kernel, the parameter, what it
expected and what it got. Launches go to the fake libcuda."""

from __future__ import annotations

import re
from typing import Any

import pytest

import kernelpack
from clib_support import compile_program
from fake_cuda import run, session_fake
from kernelpack.core.abi import DType, Pointer
from kernelpack.frontends.cuda import compile as cuda
from kernelpack.launch.codes import DTYPE_CODE
from kernelpack.runtime import ArgumentTypeError, ArgumentValueError, NoMatchingSpecialization
from runtime_support import cpu_tensors_as_cuda, python_path
from toolchain_support import cuda_include, needs_cuda_compiler

pytestmark = needs_cuda_compiler
torch = pytest.importorskip("torch")

SOURCE = r"""
#include <cuda_fp8.h>
template <class T> __global__ void widen(const T* __restrict__ x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = float(x[i]);
}
extern "C" __global__ void widen_e4m3(const __nv_fp8_e4m3* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = float(x[i]);
}
extern "C" __global__ void scaled(const __nv_fp8_e5m2* x, __nv_fp8_e4m3 s, float* y) { y[0] = float(x[0]) * float(s); }
"""
NAMES = ["widen<__nv_fp8_e4m3>", "widen<__nv_fp8_e5m2>", "widen_e4m3"]
E4M3_ENTRY, E5M2_ENTRY = "_Z5widenI13__nv_fp8_e4m3EvPKT_Pfj", "_Z5widenI13__nv_fp8_e5m2EvPKT_Pfj"

C_PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include "f8.h"
static void show(const char* tag, kp_status s) { printf("%s status=%s msg=%s\n", tag, f8_status_name(s),
                                                         s ? f8_last_error() : ""); }
int main(void) {
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = 1;
    l.block[0] = 64;
    void* x = (void*)0x10000;
    float* y = (float*)0x20000;
    show("e4m3", f8_widen(&l, x, KP_F8E4M3, y, 64));
    show("e5m2", f8_widen(&l, x, KP_F8E5M2, y, 64));
    show("f32", f8_widen(&l, x, KP_F32, y, 64));
    show("u8", f8_widen(&l, x, KP_U8, y, 64));
    show("typed", f8_widen_e4m3(&l, (const uint8_t*)x, y, 64));
    printf("codes %d %d\n", (int)KP_F8E4M3, (int)KP_F8E5M2);
    return 0;
}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from kernelpack.clib import Library

    root = tmp_path_factory.mktemp("fp8")
    bundle = cuda.compile(SOURCE, NAMES, arch="sm_90a")
    lib = Library("f8", *bundle, cflags=["-Werror"]).build(root / "f8")
    return root, bundle, lib


def test_nvrtc_kernels_over_nv_fp8_get_fp8_pointer_params(built: Any) -> None:
    _, bundle, _ = built
    by = {a.label: a for a in bundle}
    assert by["widen[nv_fp8_e4m3]"].abi.params[0].type == Pointer(DType.f8e4m3, const=True)
    assert by["widen[nv_fp8_e5m2]"].abi.params[0].type == Pointer(DType.f8e5m2, const=True)
    assert by["widen_e4m3"].abi.params[0].type == Pointer(DType.f8e4m3, const=True)
    assert by["widen_e4m3"].abi.describe().startswith("const uint8_t* x, float* y")  # C has no fp8: the raw byte
    # a by-value fp8 is not a scalar kernelpack packs: it stays the 1-byte struct the cubin shows
    (scaled,) = cuda.compile(SOURCE, ["scaled"], arch="sm_90a")
    x, s, _ = scaled.abi.params
    assert x.type == Pointer(DType.f8e5m2, const=True)
    assert (type(s.type).__name__, s.type.size) == ("Opaque", 1)


def test_c_library_dispatches_on_the_fp8_kp_dtypes(built: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    root, _, lib = built
    header = (lib.include_dir / "f8.h").read_text()
    assert "\n#define KP_F8E4M3 ((kp_dtype)14)\n" in header and "\n#define KP_F8E5M2 ((kp_dtype)15)\n" in header
    src = root / "main.c"
    src.write_text(C_PROGRAM)
    exe = compile_program(src, root / "main", lib.include_dir,
                          [f"-L{lib.lib_dir}", "-lf8", f"-Wl,-rpath,{lib.lib_dir}", "-lpthread"])
    r = run(exe, root, session_fake(tmp_path_factory))
    assert r.returncode == 0, r.stdout + r.stderr
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert out["e4m3"].startswith("status=KP_SUCCESS") and out["e5m2"].startswith("status=KP_SUCCESS")
    assert out["typed"].startswith("status=KP_SUCCESS")
    for bad in ("f32", "u8"):
        assert out[bad].startswith("status=KP_ERROR_NO_MATCHING_SPECIALIZATION"), out[bad]
        # names the family, the argument as given and what each specialization expects
        assert re.search(rf"f8_widen: no specialization accepts the arguments \(x: {bad} pointer .*"
                         rf"widen\[nv_fp8_e4m3\] \(x: f8e4m3; sm_90a\); widen\[nv_fp8_e5m2\] \(x: f8e5m2; sm_90a\)",
                         out[bad]), out[bad]
    assert out["codes"] == f"{DTYPE_CODE[DType.f8e4m3]} {DTYPE_CODE[DType.f8e5m2]}"  # the same codes as Python's
    kernels = [r.field(x, "kernel") for x in r.launch_lines()]
    assert kernels == [E4M3_ENTRY, E5M2_ENTRY, "widen_e4m3"]


CPP_PROGRAM = r"""
#include <cstdio>
#include <cuda_fp8.h>
#include "f8.hpp"
static_assert(kp::dtype_of<__nv_fp8_e4m3>::value == KP_F8E4M3, "e4m3");
static_assert(kp::dtype_of<const __nv_fp8_e5m2>::value == KP_F8E5M2, "e5m2");
static_assert(kp::dtype_of<uint8_t>::value == KP_U8, "u8 stays u8");
int main() {
    kp_launch l{};
    l.grid[0] = 1;
    l.block[0] = 64;
    // the family overloads take cuda_fp8.h's types, each passing its own kp_dtype
    kp_status a = f8::widen(l, reinterpret_cast<const __nv_fp8_e4m3*>(0x10000), reinterpret_cast<float*>(0x20000), 64);
    kp::device_span<const __nv_fp8_e5m2> x(reinterpret_cast<const __nv_fp8_e5m2*>(0x10000), 64);
    kp_status b = f8::widen(l, x, kp::device_span<float>(reinterpret_cast<float*>(0x20000), 64), 64);
    std::printf("%s %s\n", f8_status_name(a), f8_status_name(b));
    return 0;
}
"""


def test_cpp_layer_maps_cuda_fp8_types_to_their_kp_dtypes(built: Any, tmp_path_factory: pytest.TempPathFactory
                                                         ) -> None:
    """With cuda_fp8.h included first, kp::dtype_of names the fp8 kp_dtypes and a family's fp8 overloads take
    __nv_fp8_e4m3*/__nv_fp8_e5m2* (a uint8_t* overload could not tell them apart), each dispatching to its own
    specialization; without it the header still compiles (-Wall -Wextra -Werror, C++17) and offers no fp8 overload."""
    root, _, lib = built
    inc = cuda_include()
    if inc is None or not (inc / "cuda_fp8.h").exists():
        pytest.skip("no CUDA toolkit headers (cuda_fp8.h)")
    src = root / "fp8.cpp"
    src.write_text(CPP_PROGRAM)
    libs = [f"-L{lib.lib_dir}", "-lf8", f"-Wl,-rpath,{lib.lib_dir}", "-lpthread"]
    exe = compile_program(src, root / "fp8cpp", lib.include_dir, libs, cxx=True, flags=(f"-I{inc}",))
    r = run(exe, root, session_fake(tmp_path_factory))
    assert r.returncode == 0 and r.stdout.split() == ["KP_SUCCESS", "KP_SUCCESS"], r.stdout + r.stderr
    assert [r.field(x, "kernel") for x in r.launch_lines()] == [E4M3_ENTRY, E5M2_ENTRY]
    assert "widen(const kp_launch& kp_cfg, const uint8_t* x" not in (lib.include_dir / "f8.hpp").read_text()
    src.write_text('#include "f8.hpp"\nint main() { return kp::dtype_of<float>::value == KP_F32 ? 0 : 1; }\n')
    compile_program(src, root / "nofp8cpp", lib.include_dir, [], cxx=True)


@pytest.mark.parametrize("path", ["c", "python"])
def test_runtime_takes_torch_float8_tensors_and_refuses_the_other_format(built: Any, fake: Any, path: str) -> None:
    _, _, lib = built
    with python_path() if path == "python" else _null():
        mod = kernelpack.load(lib.shared)
    e4m3 = torch.zeros(64, dtype=torch.float8_e4m3fn)
    e5m2 = torch.zeros(64, dtype=torch.float8_e5m2)
    y = torch.zeros(64, dtype=torch.float32)
    with cpu_tensors_as_cuda():
        mod.widen(e4m3, y, 64, grid=1, block=64)
        assert fake.last()["kernel"] == E4M3_ENTRY
        mod.widen(e5m2, y, 64, grid=1, block=64)
        assert fake.last()["kernel"] == E5M2_ENTRY
        mod.widen_e4m3(e4m3, y, 64, grid=1, block=64)
        assert fake.last()["kernel"] == "widen_e4m3"
        assert fake.last()["params"][:8] == e4m3.data_ptr().to_bytes(8, "little")
        before = fake.count()
        with pytest.raises(ArgumentValueError, match=r"kernel widen_e4m3: parameter 0 'x': expected a f8e4m3 "
                                                     r"tensor, got a float8_e5m2 tensor"):
            mod.widen_e4m3(e5m2, y, 64, grid=1, block=64)
        with pytest.raises(NoMatchingSpecialization, match=r"widen.*float32"):
            mod.widen(y, y, 64, grid=1, block=64)
        fnuz = torch.zeros(64, dtype=torch.float8_e4m3fnuz)
        with pytest.raises(ArgumentTypeError, match=r"kernel widen_e4m3: parameter 0 'x': .*float8_e4m3fnuz.*the "
                                                    r"fnuz fp8 formats .* are not NVIDIA's"):
            mod.widen_e4m3(fnuz, y, 64, grid=1, block=64)
        assert fake.count() == before  # nothing refused was launched


def test_dlpack_names_nvidia_fp8_and_refuses_other_8_bit_floats() -> None:
    from kernelpack.runtime import adapters

    class Capsule:  # a DLPack producer of the torch tensor's capsule, of any dtype code
        def __init__(self, t: Any) -> None:
            self.t = t

        def __dlpack__(self, **kw: Any) -> Any:
            return torch.utils.dlpack.to_dlpack(self.t)

    for dt, want in ((torch.float8_e4m3fn, DType.f8e4m3), (torch.float8_e5m2, DType.f8e5m2)):
        try:
            view = adapters.dlpack_view(Capsule(torch.zeros(4, dtype=dt)))
        except (RuntimeError, BufferError, TypeError) as e:  # a torch that cannot export fp8 through DLPack
            pytest.skip(f"torch {torch.__version__} does not export {dt} through DLPack: {e}")
        assert view.dtype is want and view.dtype_name == want.value
    try:
        fnuz = adapters.dlpack_view(Capsule(torch.zeros(4, dtype=torch.float8_e4m3fnuz)))
    except (RuntimeError, BufferError, TypeError):
        return
    assert fnuz.dtype is None and "float8_e4m3fnuz" in fnuz.dtype_name


def test_torch_fp8_dtypes_map_to_the_nvidia_formats_only() -> None:
    from kernelpack.runtime import adapters

    table = adapters._torch_dtypes(torch)
    assert table[torch.float8_e4m3fn] is DType.f8e4m3 and table[torch.float8_e5m2] is DType.f8e5m2
    assert torch.float8_e4m3fnuz not in table and torch.float8_e5m2fnuz not in table


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


def test_tensor_descriptor_of_fp8_takes_a_torch_float8_tensor() -> None:
    """A CuTe-style tensor struct of f8e4m3 elements (what a CuTe host program such as FlashInfer's rmsnorm_quant
    takes for its fp8 output) accepts a torch float8_e4m3fn tensor and refuses an e5m2 one naming both."""
    from kernelpack.core.abi import Abi, Param, Struct, TensorSpec
    from kernelpack.launch.plan import Plan
    from kernelpack.runtime import adapters, checks

    abi = Abi((Param("mY", Struct.tensor_descriptor("t", TensorSpec(DType.f8e4m3, (None, 64), (None, 1)))),))
    (slot,) = Plan.of(abi).slots
    y = torch.zeros(4, 64, dtype=torch.float8_e4m3fn)
    with cpu_tensors_as_cuda():
        ptr, shape, strides = checks.check_arg("rmsnorm_quant", slot, y, adapters.torch_view(y))
        assert (ptr, tuple(shape), tuple(strides)) == (y.data_ptr(), (4, 64), (64, 1))
        bad = y.view(torch.float8_e5m2)
        with pytest.raises(ArgumentValueError, match=r"kernel rmsnorm_quant: parameter 0 'mY': expected a f8e4m3 "
                                                     r"tensor.*got a float8_e5m2 tensor"):
            checks.check_arg("rmsnorm_quant", slot, bad, adapters.torch_view(bad))
