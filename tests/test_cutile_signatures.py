"""cuTile signatures from example arguments: for each array layout and scalar mix, kernelpack's signature from torch
meta/CPU tensors and numpy arrays is the one cuTile's own JIT derivation (``KernelSignature.from_kernel_args``) gives
for device arrays of the same layout (``__cuda_array_interface__`` objects at a caching-allocator-like address)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
torch = pytest.importorskip("torch", reason="torch is not installed")
import numpy as np  # noqa: E402
from cuda.tile.compilation import CallingConvention, KernelSignature  # noqa: E402

import cutile_kernels as CK  # noqa: E402
import cutile_sig_kernels as K  # noqa: E402
import kernelpack.frontends.cutile.compile as kc  # noqa: E402
from kernelpack import CompileError  # noqa: E402
from kernelpack.frontends.cutile.signature import _ensure_driver  # noqa: E402

DEVICE_BASE = 0x7F00_0000_0000  # a device allocation: the caching allocator aligns to 512 bytes
TYPESTR = {torch.float32: "<f4", torch.float16: "<f2", torch.bfloat16: "<V2", torch.int8: "|i1", torch.int32: "<i4",
           torch.int64: "<i8", torch.uint8: "|u1", torch.bool: "|b1", torch.float64: "<f8"}


class DeviceArray:
    """What cuTile's JIT reads from a CUDA array: address, shape, strides in bytes, element type."""

    def __init__(self, t: Any) -> None:
        size = t.element_size()
        self.__cuda_array_interface__ = {"shape": tuple(t.shape), "strides": tuple(s * size for s in t.stride()),
                                         "typestr": TYPESTR[t.dtype],
                                         "data": (DEVICE_BASE + t.storage_offset() * size, False), "version": 3}


def jit_signature(kernel: Any, args: tuple[Any, ...]) -> Any:
    """cuTile's own signature for the call with device arrays laid out like the tensors in ``args``."""
    _ensure_driver()
    dev = tuple(DeviceArray(a) if isinstance(a, torch.Tensor) else a for a in args)
    return KernelSignature.from_kernel_args(kernel, dev, CallingConvention.cutile_python_v2())


def _views(dtype: Any, device: str) -> dict[str, Any]:
    base = torch.empty(4, 8, 32, dtype=dtype, device=device)
    return {"contiguous": base, "inner_slice": base[:, :, 1:], "outer_slice": base[1:], "transposed":
            base.transpose(1, 2), "strided": base[:, :, ::2], "unit_dims": base[:1, :, :16], "unit_mid": base[:, 2:3],
            "offset16": base.view(-1)[16:16 + 4 * 8 * 16].view(4, 8, 16)}


LAYOUTS = list(_views(torch.float32, "meta"))
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int32, torch.int64, torch.uint8, torch.bool]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_arrays_match_the_jit(dtype: Any, layout: str) -> None:
    meta, cpu = _views(dtype, "meta")[layout], _views(dtype, "cpu")[layout]
    y = torch.empty(8, 32, dtype=dtype, device="meta")
    want = jit_signature(K.scaled, (meta, y, 2.0, 7, True, 32))
    assert kc.signature_from_args(K.scaled, (meta, y, 2.0, 7, True, 32)) == want
    assert kc.signature_from_args(K.scaled, (cpu, y, 2.0, 7, True, 32)) == want
    if dtype is not torch.bfloat16:  # numpy has no bfloat16
        arr = np.zeros(cpu._base.shape if cpu._base is not None else cpu.shape, dtype=str(dtype).split(".")[-1]
                       .replace("bool", "bool_"))
        view = np.lib.stride_tricks.as_strided(arr.reshape(-1)[cpu.storage_offset():], shape=tuple(cpu.shape),
                                               strides=tuple(s * cpu.element_size() for s in cpu.stride()))
        assert kc.signature_from_args(K.scaled, (view, y, 2.0, 7, True, 32)) == want


@pytest.mark.parametrize("alpha", [2.0, 3, True, np.float32(0.5), np.float64(1.0)])
@pytest.mark.parametrize("n", [0, 1, -1, 16, 2**31 - 1, np.int64(5), np.int32(16)])
@pytest.mark.parametrize("flag", [True, False, np.bool_(True), 1])
def test_scalars_match_the_jit(alpha: Any, n: Any, flag: Any) -> None:
    """numpy scalars are taken as the Python number (cuTile's JIT refuses numpy integers)."""
    x, y = torch.empty(4, 8, 32, device="meta"), torch.empty(8, 32, device="meta")
    py = [v.item() if isinstance(v, np.generic) else v for v in (alpha, n, flag)]
    want = jit_signature(K.scaled, (x, y, *py, 64))
    assert kc.signature_from_args(K.scaled, (x, y, alpha, n, flag, 64)) == want


@pytest.mark.parametrize("layout", ["contiguous", "inner_slice", "transposed", "offset16"])
def test_annotations_match_the_jit(layout: str) -> None:
    """int64 indexing, static shape and stride dims and a ScalarInt64 come from the kernel's own annotations."""
    x = _views(torch.float16, "meta")[layout][0]
    y = torch.empty(8, 64, dtype=torch.float16, device="meta")[:, :32]
    want = jit_signature(K.wide, (x, y, 3, 32))
    got = kc.signature_from_args(K.wide, (x, y, 3, 32))
    assert got == want
    assert got.parameters[0].index_dtype.name == "int64" and got.parameters[0].shape_constant[0] == x.shape[0]
    assert got.parameters[1].stride_constant == (64, None)


def test_fp8_cpu_and_meta_agree() -> None:
    """float8 arrays have no __cuda_array_interface__ spelling: CPU and meta tensors must at least agree."""
    for layout in LAYOUTS:
        meta, cpu = (_views(torch.float8_e4m3fn, d)[layout] for d in ("meta", "cpu"))
        y = torch.empty(8, 32, dtype=torch.float8_e4m3fn, device="meta")
        assert kc.signature_from_args(K.scaled, (meta, y, 1.0, 1, True, 32)) == kc.signature_from_args(
            K.scaled, (cpu, y, 1.0, 1, True, 32))


def test_signature_source_rebuilds_the_signature() -> None:
    x = _views(torch.bfloat16, "meta")["transposed"]
    sigs = {"a": kc.signature_from_args(K.scaled, (x, x[0], 2.0, 7, True, 32)),
            "b": kc.signature_from_args(K.wide, (x[0], x[1], 3, 32))}
    ns: dict[str, Any] = {}
    exec(kc.signature_source(sigs), ns)  # noqa: S102 - the generated module under test
    assert {k: v.with_mangled_symbol(fn) for (k, v), fn in zip(ns["SIGNATURES"].items(), ("scaled", "wide"))} == sigs
    ns = {}
    exec(kc.signature_source(sigs["a"], name="ONE"), ns)  # noqa: S102
    assert ns["ONE"][0].with_mangled_symbol("scaled") == sigs["a"]


def test_compile_with_example_args_is_the_jits_kernel() -> None:
    """The artifact from example arguments equals the one compiled from cuTile's own signature for that call."""
    a = torch.empty(1 << 16, device="meta")
    (derived,) = kc.compile(CK.vadd, example_args=(a, a, a[1:], 1024), arch="sm_90a", name="vadd")
    (own,) = kc.compile(CK.vadd, [jit_signature(CK.vadd, (a, a, a[1:], 1024))], arch="sm_90a", name="vadd")
    assert derived.abi == own.abi and derived.binaries == own.binaries and derived.entry == own.entry
    assert [(p.name, p.divisibility) for p in derived.abi][:3] == [("a", 16), ("a_shape0", 16), ("a_stride0", 1)]
    assert derived.abi.params[6].divisibility == 1  # c = a[1:]: a 4-byte offset
    variants = kc.compile(CK.vadd, arch="sm_90a", example_args={"al": (a, a, a, 1024), "un": (a[1:], a, a, 1024)})
    assert sorted(x.variant for x in variants) == ["al", "un"]


def test_bad_example_arguments_are_reported() -> None:
    a = torch.empty(64, device="meta")
    with pytest.raises(CompileError, match=r"kernel vadd: cuTile cannot derive a signature from the example"):
        kc.signature_from_args(CK.vadd, (a, a))
    with pytest.raises(CompileError, match=r"example_args must be a tuple or list"):
        kc.signature_from_args(CK.vadd, {"a": a})
    with pytest.raises(CompileError, match=r"OverflowError"):
        kc.signature_from_args(K.scaled, (torch.empty(4, 8, 32, device="meta"), a.view(2, 32), 1.0, 2**40, True, 8))
    with pytest.raises(CompileError, match="give signatures or example_args"):
        kc.compile(CK.vadd, arch="sm_90a")
    with pytest.raises(CompileError, match="not both"):
        kc.compile(CK.vadd, [], arch="sm_90a", example_args=(a, a, a, 64))


def test_project_entry_derives_from_example_args(tmp_path: Path, fresh_cache: Any) -> None:
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.project import build

    (tmp_path / "ck.py").write_text((Path(__file__).parent / "cutile_kernels.py").read_text())
    (tmp_path / "args.py").write_text(textwrap.dedent("""
        import torch

        def vadd_args():
            a = torch.empty(1 << 16, device="meta")
            return {"aligned": (a, a, a, 1024), "unaligned": (a[1:], a[1:], a[1:], 1024)}
    """))
    (tmp_path / "kernelpack.toml").write_text(textwrap.dedent("""
        [library]
        name = "ct"
        archs = ["sm_90a"]
        outputs = ["bundle"]
        [[cutile]]
        kernel = "ck.py:vadd"
        example_args = "args.py:vadd_args"
    """))
    r = build(tmp_path, jobs=1)
    assert sorted(r.jobs) == ["cutile:vadd[aligned]", "cutile:vadd[unaligned]"]
    arts = {a.variant: a for a in Bundle.from_bytes(Path(r.outputs["bundle"]).read_bytes())}
    assert arts["aligned"].abi.params[0].divisibility == 16 and arts["unaligned"].abi.params[0].divisibility == 1


def test_fp8_arrays_are_fp8_pointer_params_and_fp8_scalars_are_refused() -> None:
    """cuTile's float8_e4m3fn/float8_e5m2 arrays become f8e4m3/f8e5m2 pointers (a torch float8 tensor then matches);
    a scalar of an fp8 dtype has no C type and is refused naming the parameter."""
    import cuda.tile as ct

    from kernelpack.core.abi import DType, Pointer
    from kernelpack.frontends.cutile.compile import _params

    x8 = _views(torch.float8_e4m3fn, "meta")["contiguous"]
    y8 = torch.empty(8, 32, dtype=torch.float8_e5m2, device="meta")
    sig = kc.signature_from_args(K.scaled, (x8, y8, 1.0, 1, True, 32))
    x, y = (_params("scaled", i, n, c)[0] for i, (n, c) in enumerate(zip(("x", "y"), sig.parameters[:2])))
    assert (x.type, y.type) == (Pointer(DType.f8e4m3), Pointer(DType.f8e5m2))
    scalar = sig.parameters[2].__class__(ct.float8_e4m3fn)
    with pytest.raises(CompileError, match=r"kernel scaled: parameter 2 'alpha': unsupported scalar dtype "
                                           r"float8_e4m3fn"):
        _params("scaled", 2, "alpha", scalar)
