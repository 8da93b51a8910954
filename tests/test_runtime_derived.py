"""Launch values the runtime derives from the arguments, on the fake driver (no GPU): grids from
``LaunchSpec.grid`` formulas, Triton scratch buffers (``global_scratch``/``profile_scratch``), and tensor
descriptors encoded with cuTensorMapEncodeTiled (``LaunchSpec.tensor_descs``). The references are
``kernelpack.artifact.evaluate_grid`` and ``kernelpack.tma.encode_args``; the semantics are the C library's.
"""

from __future__ import annotations

import dataclasses
import struct

import pytest

import kernelpack
from kernelpack.artifact import LaunchSpec, evaluate_grid
from kernelpack.bundle import Bundle
from kernelpack.runtime import driver
from kernelpack.tma import encode_args
from runtime_support import (
    FakeDriver,
    assert_singletons_intact,
    build_fake,
    build_test_bundle,
    cpu_tensors_as_cuda,
    python_path,
)

torch = pytest.importorskip("torch")

CEIL_N_256 = ("ceil_div", ("arg", "n", None), 256)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return build_test_bundle(tmp_path_factory.mktemp("rtd"))


def _art(bundle, label):
    return next(a for a in bundle if a.label == label)


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
    ])


@pytest.fixture(scope="module")
def fake_lib(tmp_path_factory):
    fake = FakeDriver(build_fake(tmp_path_factory.mktemp("fake")))
    driver.use_library(str(fake.path))
    yield fake
    driver.use_library()


@pytest.fixture
def fake(fake_lib, bundle):
    fake_lib.reset((9, 0))
    fake_lib.register(bundle, "sm_90a")
    driver.use_library(str(fake_lib.path))
    yield fake_lib
    fake_lib.set_current(-1)
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
def triton_bundle(tmp_path_factory):
    pytest.importorskip("triton")
    import frontend_builds as fb
    from kernelpack.cache import CompileCache

    cache = CompileCache(tmp_path_factory.mktemp("trcache"))
    return Bundle.of(fb.triton_tma(cache), fb.triton_scratch(cache))


@pytest.fixture
def tmod(fake, triton_bundle, request):
    fake.register(triton_bundle, "sm_90a")
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
