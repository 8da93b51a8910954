"""Shape-range dispatch (kernelpack.launch.ranges): range and equality constraints on integer arguments and tensor
extents choose between the specializations of a family -- the most specific (narrowest) matching one -- the same
way in the generated C library (a program on the fake libcuda.so.1), the runtime's C launch path and its pure-Python
path; contradictory and ambiguous ranges are refused when the family is formed, naming both specializations.

Each specialization of a test family launches the same cubin entry with its own default block, so the block the
fake driver saw tells which one dispatch chose.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import kernelpack
from clib_support import add_abi, bins, compile_program, session_env
from fake_cuda import run
from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.abi import Abi, DType, Param, Pointer, Struct, TensorSpec
from kernelpack.core.errors import KernelpackError
from kernelpack.core.launchspec import LaunchSpec
from kernelpack.launch import ranges as rmodel
from kernelpack.runtime import NoMatchingSpecialization
from runtime_support import CudaArray, python_path

HERE = Path(__file__).parent
TSUM = Abi((Param("t", Struct.tensor_descriptor("Tensor2f", TensorSpec(DType.f32, (None, None), (None, 1)))),
            Param("out", Pointer(DType.f32))))

# (variant, ranges, default block)
RADD = [("tiny", ["n in [1, 16]"], 32), ("small", ["1 <= n <= 64"], 64), ("mid", {"n": (65, 4096)}, 128),
        ("any", [], 256)]
RSUM = [("narrow", ["t.shape[1] == 8"], 32), ("wide", ["t.shape[1] <= 4096"], 64), ("any", [], 128)]
# n -> the block of the specialization that must run (radd); cols -> block (rsum)
RADD_CASES = {8: 32, 1: 32, 16: 32, 17: 64, 64: 64, 65: 128, 4096: 128, 4097: 256, 0: 256, -3: 256}
RSUM_CASES = {8: 32, 9: 64, 1: 64, 4096: 64, 5000: 128}


def _arts(k) -> list[KernelArtifact]:
    def one(name, entry, abi, variant, ranges, block, archs=("80", "90a")):
        return KernelArtifact(name, entry, abi, bins(k, *archs), variant=variant, ranges=ranges,
                              launch=LaunchSpec(block=(block, 1, 1)))

    out = [one("radd", "add_f32", add_abi(DType.f32), v, r, b) for v, r, b in RADD]
    out += [one("rsum", "tsum", TSUM, v, r, b) for v, r, b in RSUM]
    out.append(one("rnarrow", "add_f32", add_abi(DType.f32), "", ["n <= 16"], 32))
    # 64 disjoint range specializations (the dispatch benchmark) and the same kernel without ranges
    out += [one("disp", "add_f32", add_abi(DType.f32), f"r{i}", [f"n in [{64 * i + 1}, {64 * i + 64}]"], 32)
            for i in range(64)]
    out.append(one("one", "add_f32", add_abi(DType.f32), "", [], 32))
    return out


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from kernelpack.clib import Library

    e = session_env(tmp_path_factory)
    root = tmp_path_factory.mktemp("ranges")
    arts = _arts(e.kernels)
    lib = Library("rng", *arts, cflags=["-Werror"]).build(root / "rng", keep_sources=True)
    exe = compile_program(HERE / "ranges_harness.c", root / "harness", lib.include_dir,
                          [f"-L{lib.lib_dir}", "-lrng", f"-Wl,-rpath,{lib.lib_dir}"],
                          flags=("-D_POSIX_C_SOURCE=199309L",))
    return e, root, lib, exe, Bundle.of(arts)


def _c_blocks(env, fn: str, values) -> dict[int, object]:
    e, root, _, exe, _ = env
    r = run(exe, root, e.fake, fn, *map(str, values))
    assert r.returncode == 0, r.stderr
    statuses = {int(line.split(" ")[0][len(fn):]): line.split(" ")[1] for line in r.stdout.splitlines()}
    launches = iter(r.launches())
    out: dict[int, object] = {}
    for v in values:
        out[v] = next(launches)["block"][0] if statuses[v] == "status=KP_SUCCESS" else statuses[v]
    return out


@pytest.fixture(params=["c", "python"])
def mod(request, env, fake):
    bundle = env[4]
    if request.param == "python":
        with python_path():
            yield kernelpack.load(bundle)
    else:
        m = kernelpack.load(bundle)
        assert m.radd.family.fast is not None, "the C extension is not built (python setup.py build_ext --inplace)"
        yield m


def _f32(ptr: int) -> CudaArray:
    return CudaArray(ptr, (1024,), "<f4")


def _t(cols: int) -> CudaArray:
    return CudaArray(0x40000, (3, cols), "<f4", (cols * 4, 4))


def test_the_c_library_picks_the_narrowest_matching_range(env):
    assert _c_blocks(env, "radd", list(RADD_CASES)) == RADD_CASES


def test_the_c_library_dispatches_on_tensor_extents(env):
    assert _c_blocks(env, "rsum", list(RSUM_CASES)) == RSUM_CASES


def test_the_runtime_picks_the_same_specialization_as_the_c_library(mod, fake):
    for n, block in RADD_CASES.items():
        mod.radd(_f32(0x10000), _f32(0x20000), _f32(0x30000), n, grid=1)
        assert fake.last()["block"][0] == block, f"n = {n}"
    for cols, block in RSUM_CASES.items():
        mod.rsum(_t(cols), _f32(0x50000), grid=1)
        assert fake.last()["block"][0] == block, f"cols = {cols}"
    for n in (1, 64, 65, 4096):
        mod.disp(_f32(0x10000), _f32(0x20000), _f32(0x30000), n, grid=1, block=32)
    assert fake.count() == len(RADD_CASES) + len(RSUM_CASES) + 4


def test_a_value_outside_every_range_is_refused_naming_the_range(env, mod, fake):
    assert _c_blocks(env, "radd", [5])[5] == 32
    e, root, _, exe, _ = env
    n = fake.count()
    with pytest.raises(NoMatchingSpecialization, match=r"n <= 16.*got 17|got 17.*n <= 16"):
        mod.rnarrow(_f32(0x10000), _f32(0x20000), _f32(0x30000), 17, grid=1)
    assert fake.count() == n, "nothing is launched"


def test_the_header_and_describe_show_the_ranges(env):
    _, _, lib, _, bundle = env
    header = (lib.include_dir / "rng.h").read_text()
    assert "n in [1, 16]" in header and "t.shape[1] == 8" in header
    back = Bundle.from_bytes(bundle.to_bytes())
    assert [a.range_rules for a in back] == [a.range_rules for a in bundle], "ranges survive the bundle file"


def test_dispatch_over_64_ranges_microbench_runs(env):
    """The C microbench (bench/clib_launch.py reports it; no timing is asserted here): it runs and prints."""
    e, root, _, exe, _ = env
    r = run(exe, root, e.fake, "bench", "2000")
    assert r.returncode == 0 and "dispatch64_ns=" in r.stdout, r.stdout + r.stderr


# ------------------------------------------------------------------ refused when the family is formed


def _ranged(k, variant: str, ranges, abi=None) -> KernelArtifact:
    return KernelArtifact("f", "add_f32", abi or add_abi(DType.f32), bins(k, "80"), variant=variant, ranges=ranges)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    return session_env(tmp_path_factory).kernels


@pytest.mark.parametrize("a,b,match", [
    (["n in [1, 64]"], ["n in [32, 128]"], "overlap and neither lies inside the other"),
    (["n <= 64"], ["n <= 64"], "the same range constraints"),
    (["n == 64"], {"n": 64}, "the same range constraints"),
])
def test_ambiguous_ranges_are_refused_naming_both(kernels, tmp_path, a, b, match):
    from kernelpack.clib import Library

    arts = [_ranged(kernels, "a", a), _ranged(kernels, "b", b)]
    with pytest.raises(KernelpackError, match=match) as e:
        Library("amb", *arts).generate()
    assert "f[a]" in str(e.value) and "f[b]" in str(e.value)
    with pytest.raises(KernelpackError, match=match):
        _ = kernelpack.load(Bundle.of(arts)).f  # the runtime forms the family the same way


def test_nested_disjoint_and_different_dtype_ranges_are_accepted(kernels):
    from kernelpack.clib import Library

    arts = [_ranged(kernels, "a", ["n in [1, 64]"]), _ranged(kernels, "b", ["n in [1, 128]"]),
            _ranged(kernels, "c", ["n in [200, 300]"]), _ranged(kernels, "d", [])]
    Library("ok", *arts).generate()


@pytest.mark.parametrize("ranges,match", [
    (["n in [64, 1]"], "empty"),
    (["n <= 5", "n >= 9"], "contradict each other"),
    (["m <= 3"], "names no argument"),
    (["x <= 3"], "integer argument's value"),
    (["n.shape[0] <= 3"], "extent of a tensor"),
    (["n <= "], "cannot read"),
    ({"n": "big"}, "must be an int"),
])
def test_bad_ranges_are_refused_when_the_artifact_is_made(kernels, ranges, match):
    with pytest.raises(KernelpackError, match=match):
        _ranged(kernels, "a", ranges)


def test_a_range_outside_a_static_extent_or_the_type_is_contradictory(kernels):
    with pytest.raises(KernelpackError, match="contradictory"):
        KernelArtifact("g", "tsum", Abi((Param("t", Struct.tensor_descriptor("T", TensorSpec(
            DType.f32, (None, 8), (None, 1)))), Param("out", Pointer(DType.f32)))), bins(kernels, "80"),
            ranges=["t.shape[1] >= 9"])


def test_range_texts_are_canonical_and_read_back():
    rows = rmodel.normalize(["M in [1, 64]", "n < 4097", "k > 7", "d == 128", "x.shape[1] >= 2", "M >= 2"], "k")
    assert [r.text() for r in rows] == ["M in [2, 64]", "d == 128", "k >= 8", "n <= 4096", "x.shape[1] >= 2"]
    assert rmodel.normalize([r.text() for r in rows], "k") == rows


def test_a_range_the_type_holds_whole_constrains_nothing(kernels):
    a = _ranged(kernels, "a", ["n >= -2147483648"])
    from kernelpack.launch.facts import plans

    assert all(not s.ranges for s in plans(a)[0].args)


def test_dataclass_replace_keeps_ranges(kernels):
    a = _ranged(kernels, "a", ["n <= 8"])
    assert dataclasses.replace(a, variant="b").range_rules == a.range_rules
    assert a.with_ranges(()).range_rules == ()


# ------------------------------------------------------------------ declared through the frontends


def test_triton_specializations_carry_ranges_and_refuse_bad_ones(module_cache):
    pytest.importorskip("triton")
    import kernelpack.frontends.triton.compile as kt
    from kernelpack.core.errors import CompileError
    from triton_kernels import add_kernel

    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    specs = [{"constexprs": {"BLOCK": 128}, "variant": "small", "ranges": ["n <= 4096"]},
             {"constexprs": {"BLOCK": 1024}, "variant": "big"}]
    b = kt.compile(add_kernel, sig, arch="sm_90a", specializations=specs, cache=module_cache)
    assert {a.variant: [r.text() for r in a.range_rules] for a in b} == {"small": ["n <= 4096"], "big": []}
    assert [a.range_rules for a in Bundle.from_bytes(b.to_bytes())] == [a.range_rules for a in b]
    with pytest.raises(CompileError, match="names no argument"):
        kt.compile(add_kernel, sig, arch="sm_90a", constexprs={"BLOCK": 128},
                   specializations=[{"ranges": ["BLOCK <= 3"]}], cache=module_cache)


def test_bundle_with_ranges_names_the_artifacts_by_label():
    b = Bundle.read(HERE / "fixtures" / "built-2026-12-01" / "demo.kpack")
    got = b.with_ranges({"axpy": ["n <= 4"], "scale[half]": {"n": (1, 8)}})
    assert {a.label: rmodel.text(a.range_rules) for a in got if a.range_rules} == {
        "axpy": "n <= 4", "scale[half]": "n in [1, 8]"}
    with pytest.raises(KernelpackError, match="nope: no such kernel"):
        b.with_ranges({"nope": ["n <= 4"]})


TEMPLATE_KERNEL = ('template <int B> __global__ void neg(float* y, int n) { int i = threadIdx.x * B; '
                   'if (i < n) y[i] = -y[i]; }\n')


@pytest.mark.parametrize("second,ok", [('["n in [65, 128]"]', True), ('["n in [32, 128]"]', False)])
def test_kernelpack_build_embeds_ranges_and_refuses_ambiguous_ones(tmp_path, capsys, second, ok):
    import kernelpack.cli as cli

    (tmp_path / "k.cu").write_text(TEMPLATE_KERNEL)
    (tmp_path / "kernelpack.toml").write_text(
        '[library]\nname = "p"\narchs = ["sm_90a"]\noutputs = ["bundle"]\n[[cuda]]\nsource = "k.cu"\n'
        f'kernels = ["neg<1>", "neg<2>"]\nranges = {{ "neg[1]" = ["n <= 64"], "neg[2]" = {second} }}\n')
    code = cli.main(["build", "-q", "-j", "1", str(tmp_path)])
    err = capsys.readouterr().err
    if ok:
        assert code == 0, err
        b = Bundle.read(tmp_path / "build" / "p.kpack")
        assert {a.label: rmodel.text(a.range_rules) for a in b} == {"neg[1]": "n <= 64", "neg[2]": "n in [65, 128]"}
    else:
        assert code == 1 and "neg[1]" in err and "neg[2]" in err and "overlap" in err, err


def test_a_typed_entry_checks_its_integer_ranges(env, tmp_path):
    """The per-specialization entry (no dispatch) refuses an integer outside its ranges: KP_ERROR_INVALID_ARGUMENT."""
    _, _, lib, _, _ = env
    src = tmp_path / "typed.c"
    src.write_text('#include <stdio.h>\n#include <string.h>\n#include "rng.h"\n'
                   'int main(void) {\n    kp_launch l;\n    memset(&l, 0, sizeof l);\n    l.grid[0] = 1;\n'
                   '    kp_status s = rng_radd_tiny(&l, (const float*)0x10000, (const float*)0x20000, (float*)0x30000, '
                   '17);\n    printf("%s %s\\n", rng_status_name(s), rng_last_error());\n    return 0;\n}\n')
    exe = compile_program(src, tmp_path / "typed", lib.include_dir,
                          [f"-L{lib.lib_dir}", "-lrng", f"-Wl,-rpath,{lib.lib_dir}"])
    e = env[0]
    r = run(exe, tmp_path, e.fake)
    assert r.stdout.startswith("KP_ERROR_INVALID_ARGUMENT"), r.stdout
    assert "must satisfy n in [1, 16], got 17" in r.stdout and not r.launches()
