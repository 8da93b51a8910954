"""Every public object has a short, useful repr: one line within MAX_REPR characters, naming what matters (label,
archs, sizes) and never bytes, however much it holds (a thousand kernels, a long mangled entry, a deep path). The
CuTe host objects are held to it in tests/test_cute_host_library.py. GPU-less."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

import kernelpack
from kernelpack.bundle.kpack import Bundle
from kernelpack.cli.demo import compile_examples
from kernelpack.core._reprs import MAX_REPR
from kernelpack.core.abi import Abi, DType, Field, Opaque, Param, Pointer, Scalar, Struct, TensorSpec
from kernelpack.core.launchspec import LaunchSpec
from toolchain_support import needs_cuda_compiler

pytestmark = needs_cuda_compiler

BYTES = re.compile(r"""b['"]|\\x[0-9a-f]{2}""")


def check_repr(obj: Any, *must: str) -> str:
    """``repr(obj)``: one line, bounded, no bytes, holding each of ``must``."""
    r = repr(obj)
    assert "\n" not in r and len(r) <= MAX_REPR, (len(r), r)
    assert not BYTES.search(r), r
    assert " object at 0x" not in r, r  # a default repr says nothing
    for m in must:
        assert m in r, (m, r)
    return r


def long_struct() -> Struct:
    spec = TensorSpec(DType.f16, (None,) * 8, (None,) * 7 + (1,), align=16)
    return Struct.tensor_descriptor("tensor_f16_" + "x" * 200, spec)


@pytest.fixture(scope="module")
def bundle(module_cache) -> Bundle:
    return compile_examples(("sm_80", "sm_90a"))


def test_compile_objects(bundle: Bundle) -> None:
    axpy = next(a for a in bundle if a.name == "axpy")
    check_repr(bundle, "6 kernels", "axpy", "sm_80, sm_90a", "KiB")
    check_repr(axpy, "axpy", "sm_80, sm_90a", "4 params", "2 cubins", "cuda")
    b = axpy.binaries[0]
    check_repr(b, "sm_80", "cubin", "KiB", b.sha256[:12])
    check_repr(axpy.abi, "float alpha", "int32_t n")
    check_repr(axpy.abi.params[0], "float alpha")
    check_repr(axpy.provenance, "cuda", "options")
    check_repr(b.cubin, "sm_80", "kernels")
    check_repr(axpy.cubin_kernel("sm_80"), "axpy", "registers")
    check_repr(axpy.archs[0])
    check_repr(Bundle.from_bytes(bundle.to_bytes(), source="/a/b/" + "deep/" * 100 + "x.kpack"), "x.kpack")


def test_abi_values_stay_short_whatever_they_hold() -> None:
    s = long_struct()
    check_repr(s, "shape0", "bytes")
    check_repr(Param("t", s, divisibility=16), "divisible by 16")
    check_repr(Abi(tuple(Param(f"p{i}_" + "n" * 40, s) for i in range(40))))
    for v in (Scalar(DType.f32), Pointer(DType.bf16, const=True), Opaque(128, 64, "tmap"), s.tensor,
              Field("f" * 100, s), DType.f32):
        check_repr(v)


def test_launch_specs_show_what_is_set() -> None:
    assert repr(LaunchSpec()) == "LaunchSpec()"
    grid = (("ceil_div", ("arg", "n", None), 256), ("min", ("arg", "c", "shape1"), 65535), 1)
    r = check_repr(LaunchSpec(block=128, dynamic_smem=1024, grid=grid))
    assert r == "LaunchSpec(block=(128, 1, 1), dynamic_smem=1024, grid=[ceil_div(n, 256), min(c.shape1, 65535), 1])"
    deep: Any = ("arg", "n", None)
    for _ in range(200):
        deep = ("add", deep, 1)
    check_repr(LaunchSpec(grid=(deep, 1, 1)), "grid=[add(")


def test_big_bundles_and_long_names_stay_bounded(bundle: Bundle) -> None:
    axpy = next(a for a in bundle if a.name == "axpy")
    many = Bundle.of(*(dataclasses.replace(axpy, name=f"kernel_with_a_long_name_{i:04}") for i in range(300)))
    check_repr(many, "300 kernels", "more)")
    scale = next(a for a in bundle if a.name == "scale")
    check_repr(dataclasses.replace(scale, variant="v" * 300), "entry _Z5scale")


def test_library_build_and_runtime_objects(bundle: Bundle, tmp_path: Path) -> None:
    lib = kernelpack.Library("kprepr", bundle)
    check_repr(lib, "kprepr", "6 kernels")
    check_repr(lib.generate(), "kprepr.c", "chars")
    built = lib.build(tmp_path / ("deep/" * 60))
    check_repr(built, "libkprepr.so", "kprepr.h")
    axpy = next(a for a in bundle if a.name == "axpy")
    path = Bundle.of(*(dataclasses.replace(axpy, name=f"k{i:04}") for i in range(300))).write(tmp_path / "m.kpack")
    for source in (path, built.shared):
        mod = kernelpack.load(source)
        check_repr(mod, "kernelpack module")
        name = mod.__all__[0]
        check_repr(mod[name], name)
        check_repr(mod.families[name], name, "specialization")


def test_project_build_report(tmp_path: Path, fresh_cache) -> None:
    from kernelpack.project import build

    (tmp_path / "k.cu").write_text('extern "C" __global__ void neg(float* y) { y[threadIdx.x] *= -1.0f; }\n')
    (tmp_path / "kernelpack.toml").write_text('[library]\nname = "rep"\narchs = ["sm_90a"]\noutputs = ["bundle"]\n\n'
                                              '[[cuda]]\nsource = "k.cu"\nkernels = ["neg"]\n')
    check_repr(build(tmp_path, jobs=1), "1 jobs (1 compiled)", "1 kernels")
