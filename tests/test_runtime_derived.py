"""Launch values the runtime derives from the arguments, on the fake driver (no GPU): grids from
``LaunchSpec.grid`` formulas, Triton scratch buffers (``global_scratch``/``profile_scratch``), and tensor
descriptors encoded with cuTensorMapEncodeTiled (``LaunchSpec.tensor_descs``). The references are
``kernelpack.core.launchspec.evaluate_grid`` and ``kernelpack.core.tma.encode_args``; the semantics are the C library's.
"""

from __future__ import annotations

import dataclasses
import struct

import pytest

import kernelpack
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.launchspec import GRID_OPS, LaunchSpec, evaluate_grid
from kernelpack.core.tma import encode_args
from runtime_support import (
    assert_singletons_intact,
    cpu_tensors_as_cuda,
    python_path,
)

torch = pytest.importorskip("torch")

CEIL_N_256 = ("ceil_div", ("arg", "n", None), 256)
N = ("arg", "n", None)
D, C = ("arg", "d", None), ("arg", "c", None)  # i64 and i32 params of the scalars kernel
# the C library tests' formulas (tests/clib_support.py GADD_GRID), every operator nested
GADD_GRID = (("ceil_div", N, 256), ("max", ("min", ("div", ("sub", 100, N), -7), 6), 1), ("add", ("mul", N, 0), 1))
WIDTHS = "abcdefgh"  # scalars: i8 i16 i32 i64 u8 u16 u32 u64
SUM_WIDTHS = ("max", ("add", ("arg", "a", None), ("add", ("arg", "b", None), ("add", ("arg", "c", None), ("add", (
    "arg", "d", None), ("add", ("arg", "e", None), ("add", ("arg", "f", None), ("add", ("arg", "g", None), (
        "arg", "h", None)))))))), 1)
MAX_GRID_X = 2**31 - 1


@pytest.fixture(scope="module")
def base(runtime_bundle):
    return runtime_bundle


def _art(bundle, label):
    return next(a for a in bundle if a.label == label)


def _affine_abi(abi):
    """affine's Opaque struct spelled out, so a formula can read its int field."""
    from kernelpack.core.abi import Abi, Field, Scalar, Struct

    affine = Struct("Affine", (Field("scale", Scalar("f32")), Field("shift", Scalar("f32")),
                               Field("clamp", Scalar("i32"))))
    return Abi(tuple(dataclasses.replace(p, type=affine) if p.name == "p" else p for p in abi.params))


@pytest.fixture(scope="module")
def bundle(base):
    add, rows, scratch = _art(base, "add"), _art(base, "row_sums"), _art(base, "with_scratch")
    return Bundle.of(base, [
        dataclasses.replace(add, name="add_rule", launch=LaunchSpec(block=(256, 1, 1), grid=(CEIL_N_256, 1, 1))),
        dataclasses.replace(add, name="add_rule2d", launch=LaunchSpec(
            grid=(("min", CEIL_N_256, 4), ("sub", ("arg", "n", None), 990), 1))),
        dataclasses.replace(rows, name="rows_rule", launch=LaunchSpec(grid=(("arg", "t", "shape0"), 1, 1))),
        dataclasses.replace(scratch, name="scratch_kernel", launch=LaunchSpec(
            global_scratch=96, global_scratch_align=512, profile_scratch=40, profile_scratch_align=64)),
        dataclasses.replace(scratch, name="gscratch_kernel", launch=LaunchSpec(global_scratch=128,
                                                                              global_scratch_align=128)),
        dataclasses.replace(add, name="gadd", launch=LaunchSpec(grid=GADD_GRID)),
        dataclasses.replace(rows, name="rows_fields", launch=LaunchSpec(grid=(
            ("sub", ("arg", "t", "shape0"), 200), ("arg", "t", "stride0"), ("div", ("arg", "t", "shape0"), 100)))),
        dataclasses.replace(_art(base, "affine"), name="affine_rule", abi=_affine_abi(_art(base, "affine").abi),
                            launch=LaunchSpec(grid=(("arg", "p", "clamp"), N, 1))),
        dataclasses.replace(_art(base, "scalars"), name="widths_rule", launch=LaunchSpec(
            block=(32, 1, 1), grid=(SUM_WIDTHS, ("min", ("arg", "h", None), 5), 1))),
        *(dataclasses.replace(_art(base, "scalars"), name=f"g_{op}", launch=LaunchSpec(
            block=(32, 1, 1), grid=((op, D, C), 1, 1))) for op in GRID_OPS),
    ])


@pytest.fixture(autouse=True)
def _singleton_canary():
    """Every test leaves the interpreter's one-character bytes/str objects intact (see test_runtime_singletons)."""
    yield
    assert_singletons_intact()


@pytest.fixture(params=["c", "python"])
def mod(request, fake, bundle):
    if request.param == "python":
        with python_path():
            m = kernelpack.load(bundle)
    else:
        m = kernelpack.load(bundle)
    with cpu_tensors_as_cuda():
        yield m


def vecs(n):
    return [torch.zeros(n) for _ in range(3)]


# ------------------------------------------------------------------ grid rules


@pytest.mark.parametrize("n", [1, 255, 256, 257, 1000, 100_000])
def test_grid_from_a_scalar_argument(mod, fake, n):
    mod.add_rule(*vecs(8), n)
    rec = fake.last()
    assert rec["grid"] == (evaluate_grid(CEIL_N_256, {("n", None): n}), 1, 1) and rec["block"] == (256, 1, 1)


def test_a_given_grid_wins_over_the_rule(mod, fake):
    mod.add_rule(*vecs(8), 1000, grid=(7, 2))
    assert fake.last()["grid"] == (7, 2, 1)


@pytest.mark.parametrize("n", [0, -5])
def test_a_dimension_below_one_launches_nothing(mod, fake, n):
    before = fake.count()
    assert mod.add_rule(*vecs(8), n) is None
    assert fake.count() == before


def test_every_dimension_follows_its_formula(mod, fake):
    for n in (991, 1000, 5000):
        mod.add_rule2d(*vecs(8), n, block=128)
        want = tuple(evaluate_grid(e, {("n", None): n}) for e in _art(mod.bundle, "add_rule2d").launch.grid)
        assert fake.last()["grid"] == want
    before = fake.count()
    mod.add_rule2d(*vecs(8), 990, block=128)  # y = n - 990 = 0
    assert fake.count() == before


def test_grid_from_a_tensor_extent(mod, fake):
    wide = torch.zeros(300, 128)
    mod.rows_rule(wide[:, :64], torch.zeros(300), block=64)
    assert fake.last()["grid"] == (300, 1, 1)


I64 = 2**63
OPERANDS = [(1000, 256), (1000, -256), (-1000, 256), (-1000, -256), (7, 0), (0, 7), (-7, 2), (7, -2), (-7, -2),
            (255, 256), (256, 256), (257, 256), (2**40, 3), (-(2**40), 7), (2**62, 4), (I64 - 1, 1), (-I64, -1),
            (-I64, 1), (I64 - 1, 2**31 - 1), (2**31, 1), (2**31 - 1, 0)]


def _scalars(d, c):
    return [0, 0, c, d, 0, 0, 0, 0, 0.0, 0.0, 0.0, False, torch.zeros(1)]


def _on_c_path(mod, name, before):
    fam = getattr(mod, name).family
    return fam.fast is None or fam.python_calls == before


@pytest.mark.parametrize("op", GRID_OPS)
def test_every_operator_agrees_with_evaluate_grid(mod, fake, op):
    """64-bit signed values, both signs, zero divisors, truncation, floor for ceil_div, results <= 0 (nothing is
    launched) and above the device limit (the Python path's error); the C path computes every grid that fits 64
    bits and leaves the rest to Python."""
    fam = getattr(mod, f"g_{op}").family
    getattr(mod, f"g_{op}")(*_scalars(1, 1))  # loads the device (the Python path)
    for d, c in OPERANDS:
        want = evaluate_grid((op, D, C), {("d", None): d, ("c", None): c})
        before, n = fam.python_calls, fake.count()
        if want > MAX_GRID_X:
            with pytest.raises(kernelpack.LaunchError, match=r"grid\[0\]"):
                getattr(mod, f"g_{op}")(*_scalars(d, c))
            assert fake.count() == n
            continue
        getattr(mod, f"g_{op}")(*_scalars(d, c))
        if want <= 0:
            assert fake.count() == n, (op, d, c, want)
        else:
            assert fake.count() == n + 1 and fake.last()["grid"] == (want, 1, 1), (op, d, c, want)
        exact = all(-I64 <= v < I64 for v in (d, c, d + c - 1, want))
        if exact:
            assert _on_c_path(mod, f"g_{op}", before), (op, d, c)


def test_nested_formulas_in_every_dimension(mod, fake):
    mod.gadd(*vecs(8), 1, block=32)
    for n in (-3000, -1, 0, 1, 57, 100, 101, 256, 257, 5000):
        before, count = mod.gadd.family.python_calls, fake.count()
        mod.gadd(*vecs(8), n, block=32)
        want = tuple(evaluate_grid(e, {("n", None): n}) for e in GADD_GRID)
        if min(want) <= 0:
            assert fake.count() == count
        else:
            assert fake.last()["grid"] == want, n
        assert _on_c_path(mod, "gadd", before)


def test_formulas_read_tensor_fields_and_struct_fields(mod, fake):
    wide = torch.zeros(300, 128)
    mod.rows_fields(wide[:, :64], torch.zeros(300), block=64)
    mod.affine_rule(*vecs(8)[:2], struct.pack("<ffi", 0.5, 0.25, 9), 4, block=32)
    before = mod.rows_fields.family.python_calls
    mod.rows_fields(wide[:, :64], torch.zeros(300), block=64)
    assert fake.last()["grid"] == (100, 128, 3), "shape0 - 200, stride0, shape0 / 100"
    assert _on_c_path(mod, "rows_fields", before)
    before = mod.affine_rule.family.python_calls
    mod.affine_rule(*vecs(8)[:2], struct.pack("<ffi", 0.5, 0.25, 9), 4, block=32)
    assert fake.last()["grid"] == (9, 4, 1)
    assert _on_c_path(mod, "affine_rule", before)


@pytest.mark.parametrize("vals", [(-1, -2, -3, -4, 5, 6, 7, 8), (-128, 0, 0, 0, 0, 0, 0, 2**64 - 1),
                                  (127, 32767, 2**31 - 1, 2**40, 255, 65535, 2**32 - 1, 3)])
def test_formulas_read_every_integer_width(mod, fake, vals):
    """u64 values above 2**63 leave int64: the C path hands them to Python, which computes them exactly."""
    fields = {(k, None): v for k, v in zip(WIDTHS, vals)}
    want = tuple(evaluate_grid(e, fields) for e in (SUM_WIDTHS, ("min", ("arg", "h", None), 5), 1))
    mod.widths_rule(*[1] * 8, 0.0, 0.0, 0.0, True, torch.zeros(1))
    before = mod.widths_rule.family.python_calls
    if want[0] > MAX_GRID_X:
        with pytest.raises(kernelpack.LaunchError):
            mod.widths_rule(*vals, 0.0, 0.0, 0.0, True, torch.zeros(1))
        return
    mod.widths_rule(*vals, 0.0, 0.0, 0.0, True, torch.zeros(1))
    assert fake.last()["grid"] == want
    if vals[7] < I64:
        assert _on_c_path(mod, "widths_rule", before)


def test_grid_programs_for_the_c_path(bundle):
    from kernelpack.launch.plan import G_CONST, G_LOAD, Plan, grid_program

    plan = Plan.of(_art(bundle, "add").abi)
    n = next(s for s in plan.slots if s.name == "n")
    assert grid_program(plan, None) is None
    prog = grid_program(plan, (CEIL_N_256, 1, 1))
    assert prog[0] == ((G_LOAD, n.offset, 3), (G_CONST, 256, 0), (2 + GRID_OPS.index("ceil_div"), 0, 0))
    assert prog[1] == prog[2] == ((G_CONST, 1, 0),)
    assert grid_program(plan, (("add", 2**63, N), 1, 1)) is False, "a constant beyond int64: Python only"
    left = right = N
    for _ in range(20):
        left, right = ("add", left, 1), ("add", 1, right)
    assert grid_program(plan, (left, 1, 1)) is not False, "left-nested: the stack stays at 2"
    assert grid_program(plan, (right, 1, 1)) is False, "21 values pending: deeper than the C stack, Python only"


def test_a_formula_too_deep_for_c_still_launches(mod, fake, bundle):
    deep = N
    for _ in range(20):
        deep = ("add", 1, deep)
    m = kernelpack.load(Bundle((dataclasses.replace(_art(bundle, "add"), name="deep", launch=LaunchSpec(
        block=(32, 1, 1), grid=(deep, 1, 1))),)))
    with cpu_tensors_as_cuda():
        m.deep(*vecs(8), 5)
    assert fake.last()["grid"] == (25, 1, 1)


def test_no_grid_and_no_rule_is_still_an_error(mod, fake):
    with pytest.raises(kernelpack.LaunchError, match="grid is required"):
        mod.add(*vecs(8), 8, block=32)


# ------------------------------------------------------------------ Triton scratch


def _ptrs(params, *offsets):
    return [struct.unpack_from("<Q", params, o)[0] for o in offsets]


def test_scratch_is_allocated_per_cta_on_the_launch_stream_and_freed_after(mod, fake, bundle):
    art = _art(bundle, "scratch_kernel")
    ck = art.cubin_kernel("sm_90a")
    x = torch.zeros(64)
    mod.scratch_kernel(x, 64, grid=(3, 2), block=32, stream=0x77)
    (a,) = fake.allocs()
    ctas = 6
    poff = (96 * ctas + 63) // 64 * 64
    assert a["size"] == poff + 40 * ctas + 512, "global + profile, aligned, + slack for the 512-byte alignment"
    assert a["stream"] == 0x77 and a["freed"] and a["free_stream"] == 0x77
    g, p = _ptrs(fake.last()["params"], ck.params[2].offset, ck.params[3].offset)
    assert g % 512 == 0 and a["ptr"] <= g < a["ptr"] + 512 and p == g + poff
    assert fake.last()["stream"] == 0x77


def test_one_scratch_buffer_and_null_for_the_other(mod, fake, bundle):
    ck = _art(bundle, "gscratch_kernel").cubin_kernel("sm_90a")
    mod.gscratch_kernel(torch.zeros(8), 8, grid=5, block=32)
    (a,) = fake.allocs()
    assert a["size"] == 5 * 128 and a["freed"]
    g, p = _ptrs(fake.last()["params"], ck.params[2].offset, ck.params[3].offset)
    assert g == a["ptr"] and p == 0


def test_no_scratch_size_passes_null_and_allocates_nothing(mod, fake, bundle):
    ck = _art(bundle, "with_scratch").cubin_kernel("sm_90a")
    mod.with_scratch(torch.zeros(8), 8, grid=1, block=32)
    assert fake.allocs() == []
    assert _ptrs(fake.last()["params"], ck.params[2].offset) == [0]


def test_a_failed_launch_still_frees_its_scratch(mod, fake):
    fake.fail("cuLaunchKernel", 700)
    with pytest.raises(kernelpack.runtime.DriverError, match="ILLEGAL_ADDRESS"):
        mod.scratch_kernel(torch.zeros(8), 8, grid=2, block=32)
    (a,) = fake.allocs()
    assert a["freed"]


# ------------------------------------------------------------------ Triton kernels: TMA descriptors and scratch


@pytest.fixture(scope="module")
def triton_bundle(module_cache):
    pytest.importorskip("triton")
    import frontend_builds as fb

    return Bundle.of(fb.triton_tma(module_cache), fb.triton_scratch(module_cache))


@pytest.fixture
def tmod(fake, triton_bundle, request):
    m = kernelpack.load(triton_bundle)
    with cpu_tensors_as_cuda():
        yield m


def test_tma_descriptors_are_encoded_as_encode_args_says(tmod, fake, triton_bundle):
    art = _art(triton_bundle, "tr_tma_matmul")
    ck = art.cubin_kernel("sm_90a")
    assert tmod.tr_tma_matmul.family.arg_names == ("a_desc", "b_desc", "c_desc", "K")
    m, n, k = 256, 384, 512
    a, b, c = torch.zeros(m, k, dtype=torch.float16), torch.zeros(k, n, dtype=torch.float16), torch.zeros(
        m, n, dtype=torch.float16)
    tmod.tr_tma_matmul(a, b, c, k, grid=(m // 128, n // 128))
    encodes = fake.encodes()
    assert len(encodes) == 3
    rec = fake.last()
    offs = {p.name: cp.offset for p, cp in zip(art.abi.params, ck.params)}
    for d, t, enc in zip(art.launch.tensor_descs, (a, b, c), encodes):
        want = encode_args(d, t.data_ptr(), t.shape, t.stride(), driver_version=13000, kernel=art.label)
        assert enc == {f: getattr(want.encode, f) for f in enc}, d.arg
        words = struct.unpack_from("<16Q", rec["params"], offs[d.arg])
        bit21 = 0 if want.encode.clear_bit21 else 1 << 21
        assert words[0] == t.data_ptr() and words[1] == (2**64 - 1) & ~(1 << 21) | bit21
        for name, v in zip(d.params[1:], want.values[1:]):
            fmt = "<i" if "shape" in name else "<q"
            assert struct.unpack_from(fmt, rec["params"], offs[name])[0] == v, name
    assert struct.unpack_from("<i", rec["params"], offs["K"])[0] == k


def test_a_tensor_tma_cannot_take_is_refused_before_launch(tmod, fake):
    m, k = 256, 512
    a = torch.zeros(m, k + 8, dtype=torch.float16)[:, 1:k + 1]  # base not 16-byte aligned
    b, c = torch.zeros(k, 384, dtype=torch.float16), torch.zeros(m, 384, dtype=torch.float16)
    before = fake.count()
    with pytest.raises(kernelpack.runtime.ArgumentValueError, match="a_desc.*16-byte aligned"):
        tmod.tr_tma_matmul(a, b, c, k, grid=(2, 3))
    with pytest.raises(kernelpack.runtime.ArgumentValueError, match="expected a fp16 tensor"):
        tmod.tr_tma_matmul(a.float(), b, c, k, grid=(2, 3))
    assert fake.count() == before and fake.encodes() == []


def test_triton_scratch_kernel(tmod, fake, triton_bundle):
    art = _art(triton_bundle, "tr_scale_rows")
    m, n = 96, 320
    x, y = torch.zeros(m, n), torch.zeros(m, n)
    tmod.tr_scale_rows(x, y, m, n, 1.5, grid=m // 32)
    (a,) = fake.allocs()
    ls = art.launch
    assert a["size"] >= 3 * ls.global_scratch and a["freed"] and a["stream"] == 0x5000


def test_docs_tell_the_grid_rule_and_the_scratch(mod):
    import inspect

    assert "grid computed from the arguments when none is given: (ceil_div(n, 256), 1, 1)" in mod.add_rule.__doc__
    assert inspect.signature(mod.add_rule).parameters["grid"].default is None
    assert inspect.signature(mod.add).parameters["grid"].default is inspect.Parameter.empty
    assert "global_scratch (global_scratch, 96 bytes per CTA allocated per launch)" in mod.scratch_kernel.__doc__
