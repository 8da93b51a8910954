"""The range index of family entries (kernelpack.clib.rangeindex): a generated entry whose specializations range
over one integer argument or tensor extent binary-searches the ranges' bounds and checks only that interval's
candidates -- and still picks exactly what the linear walk and the runtime's C and Python paths pick, at every
boundary: lo and hi inclusive, nested ranges, ranges on two arguments, tensor extents, negative values, the int64
and uint64 extremes, values no range admits (the next specialization, or the unchanged no-match error), and a
narrow specialization without a binary for the device (the next group).

Each specialization launches the same cubin entry with its own default block: the block the fake driver saw tells
which one ran.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import kernelpack
from clib_support import add_abi, bins, compile_program, session_env
from fake_cuda import run
from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.bundle.kpack import Bundle
from kernelpack.clib import rangeindex
from kernelpack.core.abi import Abi, DType, Param, Pointer, Scalar, Struct, TensorSpec
from kernelpack.core.launchspec import LaunchSpec
from kernelpack.runtime import NoMatchingSpecialization
from runtime_support import CudaArray, python_path

HERE = Path(__file__).parent
I64_MIN, I64_MAX, U64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
PACK = Abi(tuple(Param(n, Scalar(DType(d))) for n, d in zip(
    "abcdefghij", ["i8", "i16", "i32", "i64", "f32", "f64", "bool", "u16", "u8", "u64"], strict=True))
    + (Param("out", Pointer(DType.f32)),))
TSUM = Abi((Param("t", Struct.tensor_descriptor("Tensor2f", TensorSpec(DType.f32, (None, None), (None, 1)))),
            Param("out", Pointer(DType.f32))))

# family -> [(variant, ranges, default block, archs)]; every family gets a range index (test_every_family_...)
FAMILIES = {
    "ei": [("neg", ["n in [-100, -1]"], 33), ("m50", ["n == -50"], 34), ("zero", ["n == 0"], 35),
           ("lo", ["n in [1, 16]"], 36, ("90a",)), ("mid", ["1 <= n <= 64"], 37), ("m2", ["17 <= n <= 32"], 38),
           ("top", ["n >= 2147483000"], 39), ("bot", ["n <= -2147483000"], 40), ("any", [], 41)],
    "nb": [("a", ["n in [1, 10]"], 33, ("90a",)), ("b", ["n in [11, 20]"], 34), ("c", ["n in [21, 30]"], 35)],
    "e64": [("dmin", ["d <= -9223372036854775807"], 33), ("dmax", ["d >= 9223372036854775806"], 34),
            ("dz", ["d == 0"], 35), ("dpos", ["d in [1, 9223372036854775805]"], 36), ("any", [], 37)],
    "two": [("c1d1", ["c in [1, 64]", "d in [1, 64]"], 33), ("c1d2", ["c in [1, 64]", "d in [65, 128]"], 34),
            ("c2", ["c in [65, 128]", "d in [1, 128]"], 35), ("c", ["c in [1, 128]"], 36), ("any", [], 37)],
    "uns": [("h", ["h in [1, 100]"], 33), ("hj", ["h in [1, 100]", "j >= 5"], 34), ("h2", ["h >= 101"], 35),
            ("jbig", ["h == 0", "j >= 9223372036854775000"], 36)],
    "tx": [("r0", ["t.shape[0] in [1, 4]", "t.shape[1] in [1, 64]"], 33),
           ("r1", ["t.shape[0] in [1, 4]", "t.shape[1] in [65, 4096]"], 34), ("w", ["t.shape[1] <= 4096"], 35),
           ("eq", ["t.shape[0] == 2", "t.shape[1] == 8"], 36), ("any", [], 37)],
}
# family -> {call: the variant that must run, or "none" (no specialization accepts)}
EXPECT: dict[str, dict[object, str]] = {
    "ei": {-2147483648: "bot", -2147483001: "bot", -2147483000: "bot", -2147482999: "any", -101: "any",
           -100: "neg", -51: "neg", -50: "m50", -49: "neg", -1: "neg", 0: "zero", 1: "lo", 16: "lo", 17: "m2",
           32: "m2", 33: "mid", 64: "mid", 65: "any", 2147482999: "any", 2147483000: "top", 2147483647: "top"},
    "nb": {0: "none", 1: "a", 10: "a", 11: "b", 20: "b", 21: "c", 30: "c", 31: "none", -5: "none"},
    "e64": {I64_MIN: "dmin", I64_MIN + 1: "dmin", I64_MIN + 2: "any", -1: "any", 0: "dz", 1: "dpos",
            I64_MAX - 2: "dpos", I64_MAX - 1: "dmax", I64_MAX: "dmax"},
    "two": {(1, 1): "c1d1", (64, 64): "c1d1", (64, 65): "c1d2", (1, 128): "c1d2", (1, 129): "c", (1, 0): "c",
            (65, 1): "c2", (128, 128): "c2", (128, 129): "c", (128, 0): "c", (0, 1): "any", (129, 1): "any",
            (-7, I64_MIN): "any"},
    "uns": {(0, 0): "none", (1, 0): "h", (100, 4): "h", (100, 5): "hj", (1, U64_MAX): "hj", (101, 0): "h2",
            (65535, U64_MAX): "h2", (0, 9223372036854774999): "none", (0, 9223372036854775000): "jbig",
            (0, I64_MAX): "jbig", (0, I64_MAX + 1): "jbig", (0, U64_MAX): "jbig"},
    "tx": {(2, 8): "eq", (2, 9): "r0", (1, 64): "r0", (4, 1): "r0", (4, 65): "r1", (1, 4096): "r1", (5, 8): "w",
           (0, 8): "w", (2, 0): "w", (0, 4096): "w", (2, 4097): "any", (9, 100000): "any"},
}


def _abi(family: str) -> Abi:
    return {"ei": add_abi(DType.f32), "nb": add_abi(DType.f32), "tx": TSUM}.get(family, PACK)


def _entry(family: str) -> str:
    return {"ei": "add_f32", "nb": "add_f32", "tx": "tsum"}.get(family, "pack")


def _arts(k) -> list[KernelArtifact]:
    out = []
    for fam, rows in FAMILIES.items():
        for row in rows:
            variant, ranges, block = row[:3]
            archs = row[3] if len(row) > 3 else ("80", "90a")
            out.append(KernelArtifact(fam, _entry(fam), _abi(fam), bins(k, *archs), variant=variant, ranges=ranges,
                                      launch=LaunchSpec(block=(block, 1, 1))))
    return out


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from kernelpack.clib import Library

    e = session_env(tmp_path_factory)
    root = tmp_path_factory.mktemp("rix")
    arts = _arts(e.kernels)
    lib = Library("rix", *arts, cflags=["-Werror"]).build(root / "rix", keep_sources=True)
    libs = [f"-L{lib.lib_dir}", "-lrix", f"-Wl,-rpath,{lib.lib_dir}"]
    exes = {"c99": compile_program(HERE / "range_index_harness.c", root / "harness_c", lib.include_dir, libs),
            "c++17": compile_program(HERE / "range_index_harness.c", root / "harness_cpp", lib.include_dir, libs,
                                     cxx=True, flags=("-x", "c++"))}
    return e, root, lib, exes, Bundle.of(arts)


def _block_variants(family: str) -> dict[int, str]:
    return {row[2]: row[0] for row in FAMILIES[family]}


def _arg(call: object) -> str:
    return ",".join(map(str, call)) if isinstance(call, tuple) else str(call)


def _c_choices(env, family: str, calls, exe: str = "c99", **fake_env: str) -> dict[object, str]:
    """call -> the variant the C library ran, or "none" (KP_ERROR_NO_MATCHING_SPECIALIZATION)."""
    e, root, _, exes, _ = env
    r = run(exes[exe], root, e.fake, family, *map(_arg, calls), **fake_env)
    assert r.returncode == 0, r.stdout + r.stderr
    status = {line.split(" status=")[0]: line.split(" status=")[1].split(" ")[0] for line in r.stdout.splitlines()}
    launches = iter(r.launches())
    blocks = _block_variants(family)
    out = {}
    for call in calls:
        s = status[_arg(call)]
        if s == "KP_SUCCESS":
            out[call] = blocks[next(launches)["block"][0]]
        elif s == "KP_ERROR_NO_BINARY_FOR_ARCH":  # some specialization accepts, none with a binary for the device
            out[call] = "no binary"
        else:
            assert s == "KP_ERROR_NO_MATCHING_SPECIALIZATION", f"{family} {call}: {s}"
            out[call] = "none"
    return out


def _f32(ptr: int) -> CudaArray:
    return CudaArray(ptr, (1024,), "<f4")


def _py_call(mod, family: str, call) -> None:
    f = getattr(mod, family)
    if family in ("ei", "nb"):
        f(_f32(0x10000), _f32(0x20000), _f32(0x30000), call, grid=1)
    elif family == "e64":
        f(0, 0, 0, call, 0.0, 0.0, False, 0, 0, 0, _f32(0x30000), grid=1)
    elif family == "two":
        f(0, 0, call[0], call[1], 0.0, 0.0, False, 0, 0, 0, _f32(0x30000), grid=1)
    elif family == "uns":
        f(0, 0, 0, 0, 0.0, 0.0, False, call[0], 0, call[1], _f32(0x30000), grid=1)
    else:
        s0, s1 = call
        f(CudaArray(0x40000, (s0, s1), "<f4", (max(s1, 1) * 4, 4)), _f32(0x30000), grid=1)


def _py_choices(mod, fake, family: str, calls) -> dict[object, str]:
    blocks = _block_variants(family)
    out = {}
    for call in calls:
        n = fake.count()
        try:
            _py_call(mod, family, call)
        except NoMatchingSpecialization:
            assert fake.count() == n, "nothing is launched"
            out[call] = "none"
        else:
            out[call] = blocks[fake.last()["block"][0]]
    return out


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_dispatches_through_a_range_index(env, family):
    _, _, lib, _, _ = env
    assert lib.sources is not None
    src = (lib.sources / "rix.c").read_text()
    entry = src[src.index(f"RIX_API kp_status rix_{family}("):]
    assert "range index on" in entry[:entry.index("\n}\n")], f"rix_{family} walks its specializations linearly"


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("exe", ["c99", "c++17"])
def test_the_c_library_picks_the_most_specific_range_at_every_boundary(env, family, exe):
    assert _c_choices(env, family, list(EXPECT[family]), exe) == EXPECT[family]


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("path", ["c", "python"])
def test_the_runtime_picks_what_the_c_library_picks(env, fake, family, path):
    bundle = env[4]
    if path == "python":
        with python_path():
            mod = kernelpack.load(bundle)
            got = _py_choices(mod, fake, family, list(EXPECT[family]))
    else:
        mod = kernelpack.load(bundle)
        assert getattr(mod, family).family.fast is not None, "the C extension is not built"
        got = _py_choices(mod, fake, family, list(EXPECT[family]))
    assert got == EXPECT[family]


def test_a_narrow_range_without_a_binary_for_the_device_falls_to_the_next_group(env):
    # "ei[lo]" (n in [1, 16]) has a binary for sm_90a only: on an sm_80 device the next group, "ei[mid]", runs
    assert _c_choices(env, "ei", [0, 1, 16, 17, 33], FAKECUDA_CC="8.0") == {
        0: "zero", 1: "mid", 16: "mid", 17: "m2", 33: "mid"}
    # "nb[a]" has a binary for sm_90a only: on an sm_80 device it admits n = 5 but cannot run it, and no other
    # specialization admits n = 5: KP_ERROR_NO_BINARY_FOR_ARCH, as the linear walk reports it
    assert _c_choices(env, "nb", [5, 15, 50], FAKECUDA_CC="8.0") == {5: "no binary", 15: "b", 50: "none"}
    e, root, _, exes, _ = env
    r = run(exes["c99"], root, e.fake, "nb", "5", "50", FAKECUDA_CC="8.0")
    lines = r.stdout.splitlines()
    assert "no specialization with a binary for this device accepts" in lines[0], lines[0]
    assert "no specialization accepts" in lines[1] and "n in [1, 10]" in lines[1], lines[1]


def test_the_no_match_message_lists_every_specialization_s_ranges(env):
    e, root, _, exes, _ = env
    r = run(exes["c99"], root, e.fake, "uns", "0,0")
    msg = r.stdout
    assert "KP_ERROR_NO_MATCHING_SPECIALIZATION" in msg
    for text in ("h in [1, 100]", "j >= 5", "h >= 101", "h == 0", "j >= 9223372036854775000"):
        assert text in msg, msg


def test_scattered_values_pick_what_the_python_path_picks(env, fake):
    """Many values around every bound of "ei" and "two", in the C library and the pure-Python path."""
    rnd = random.Random(17)
    bounds = sorted({b + d for b in (-2147483000, -100, -50, 0, 1, 16, 17, 32, 33, 64, 65, 128, 129, 2147483000)
                     for d in (-1, 0, 1)} - {-2147483649})
    ei = bounds + [rnd.randint(-2**31, 2**31 - 1) for _ in range(40)]
    two = [(rnd.choice(bounds), rnd.choice(bounds)) for _ in range(60)]
    with python_path():
        mod = kernelpack.load(env[4])
        for family, calls in (("ei", ei), ("two", two)):
            calls = list(dict.fromkeys(calls))
            assert _c_choices(env, family, calls) == _py_choices(mod, fake, family, calls), family


# ------------------------------------------------------------------ the index itself


def _cand(group: int, ranges: dict, checks=()) -> rangeindex.Candidate:
    return rangeindex.Candidate(group, group, ranges, tuple(checks))


def test_candidates_are_those_whose_range_covers_the_value_in_dispatch_order():
    rnd = random.Random(3)
    key = (0, -1)
    for _ in range(200):
        specs = []
        for g in range(rnd.randint(2, 9)):
            if rnd.random() < 0.2:
                specs.append(_cand(g, {}))
                continue
            lo = rnd.choice([I64_MIN, rnd.randint(-50, 50)])
            hi = rnd.choice([I64_MAX, rnd.randint(-50, 50)])
            specs.append(_cand(g, {key: (min(lo, hi), max(lo, hi))}))
        idx = rangeindex._index_on(key, specs)
        if idx is None:  # no bound anywhere: every range is the whole of int64
            assert all(s.ranges.get(key, (I64_MIN, I64_MAX)) == (I64_MIN, I64_MAX) for s in specs)
            continue
        for v in [I64_MIN, I64_MAX, *range(-60, 61)]:
            want = tuple(p for p, s in enumerate(specs)
                         if s.ranges.get(key, (I64_MIN, I64_MAX))[0] <= v <= s.ranges.get(key, (I64_MIN, I64_MAX))[1])
            assert idx.candidates(v) == want, (specs, v)


def test_no_index_where_it_would_not_shorten_the_walk():
    key = (0, -1)
    # every specialization is a candidate somewhere at once: nested ranges all holding 5
    nested = [_cand(0, {key: (5, 5)}), _cand(1, {key: (1, 10)}), _cand(2, {})]
    assert rangeindex.build(nested, [key]) is None
    disjoint = [_cand(0, {key: (1, 10)}), _cand(0, {key: (11, 20)}), _cand(1, {})]
    idx = rangeindex.build(disjoint, [key])
    assert idx is not None and idx.longest == 2


def test_no_index_whose_candidate_table_would_be_huge():
    key = (0, -1)
    # 40 disjoint ranges and 20 specializations without one: 81 intervals x 20+ candidates each
    specs = [_cand(0, {key: (10 * i, 10 * i + 5)}) for i in range(40)] + [_cand(1 + i, {}) for i in range(20)]
    assert rangeindex._index_on(key, specs) is not None
    assert rangeindex.build(specs, [key]) is None


def test_the_key_with_the_shortest_candidate_lists_is_chosen():
    m, n = (0, -1), (1, -1)
    specs = [_cand(0, {m: (1, 8), n: (1, 100)}), _cand(0, {m: (9, 16), n: (1, 100)}),
             _cand(0, {m: (17, 24), n: (1, 100)}), _cand(1, {})]
    idx = rangeindex.build(specs, [n, m])
    assert idx is not None and idx.key == m and idx.longest == 2


def test_only_exact_int64_keys_are_indexed():
    assert rangeindex.indexable("value", Scalar(DType.i64), -1)
    assert rangeindex.indexable("value", Scalar(DType.u32), -1)
    assert not rangeindex.indexable("value", Scalar(DType.u64), -1)  # above INT64_MAX: not an int64
    assert not rangeindex.indexable("value", Scalar(DType.f32), -1)
    assert rangeindex.indexable("tensor", None, 1) and rangeindex.indexable("desc", None, 0)
    assert not rangeindex.indexable("tensor", None, 8)  # beyond KP_MAX_RANK
