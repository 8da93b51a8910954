"""AOT tuning tables (kernelpack.tuning) on the fake driver with synthetic timings: kernelpack.tuning.tune launches
every config on every declared shape (through kernelpack.load, as on a GPU) and times it with an injected timer; the
table becomes shape-range rules when the bundle is built, and the generated C library and both runtime paths then
pick the tuned config per shape. A table for another bundle or arch is refused.

Each config launches the same cubin entry with its own default block, so the block the fake saw names the config.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

import kernelpack
from clib_support import add_abi, bins, compile_program, session_env
from fake_cuda import run
from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.abi import DType
from kernelpack.core.launchspec import LaunchSpec
from kernelpack.launch import ranges as rmodel
from kernelpack.tuning.tune import Problem, TuningError, TuningTable, bucket, embed, tune
from runtime_support import CudaArray, python_path

HERE = Path(__file__).parent
BLOCK = {"c0": 32, "c1": 64, "c2": 128}  # config -> its default block (what identifies it on the fake)
SHAPES = [16, 100, 1000, 5000]
# the synthetic kernel times: c0 is fastest up to 128, c1 up to 1024, c2 beyond
WANT = {16: "c0", 100: "c0", 1000: "c1", 5000: "c2"}


def synthetic_ms(config: str, n: int) -> float:
    best = "c0" if n <= 128 else "c1" if n <= 1024 else "c2"
    return 1.0 + n / 1000 + (0.0 if config == best else 0.5 + int(config[1]) * 0.01)


def _f32(ptr: int) -> CudaArray:
    return CudaArray(ptr, (8192,), "<f4")


def make(shape, meta):
    return (_f32(0x10000), _f32(0x20000), _f32(0x30000), shape["n"]), {"grid": 1}


def _configs(k) -> Bundle:
    return Bundle(tuple(KernelArtifact("mm", "add_f32", add_abi(DType.f32), bins(k, "80", "90a"), variant=v,
                                       launch=LaunchSpec(block=(b, 1, 1))) for v, b in BLOCK.items()))


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    return session_env(tmp_path_factory)


def _timer(fake, seen):
    """What kernelpack.tuning.cuda_event_timer does on a GPU, with the time read from a table: launch once (the
    fake records it), take the config from the launch's block and n from its parameters."""
    block_to_config = {b: c for c, b in BLOCK.items()}

    def timer(launch):
        launch()
        rec = fake.last()
        config, n = block_to_config[rec["block"][0]], struct.unpack_from("<i", rec["params"], 24)[0]
        seen.append((config, n))
        return [synthetic_ms(config, n) + d for d in (0.002, -0.001, 0.0)]  # median: the table's value

    return timer


@pytest.fixture
def table(kernels, fake):
    seen: list[tuple[str, int]] = []
    b = _configs(kernels.kernels)
    t = tune(b, {"mm": Problem(["n"], [{"n": n} for n in SHAPES], make)}, timer=_timer(fake, seen), arch="sm_90a",
             device="fake sm_90")
    assert sorted(seen) == sorted((c, n) for c in BLOCK for n in SHAPES for _ in range(3)), \
        "every config is timed on every shape, in each of the 3 rounds"
    return b, t


def test_tune_times_every_config_and_picks_the_fastest_per_shape(table):
    b, t = table
    assert [(s.shape["n"], s.chosen) for s in t.families["mm"].shapes] == [(n, f"mm[{WANT[n]}]") for n in SHAPES]
    assert t.families["mm"].shapes[0].timings_ms["mm[c1]"] == pytest.approx(synthetic_ms("c1", 16))
    back = TuningTable.from_json(json.loads(json.dumps(t.to_json())))
    assert back == t, "the tuning file reads back as written"


def test_each_config_counts_its_best_round_so_a_slow_moment_does_not_decide(kernels, fake):
    seen: list[tuple[str, int]] = []
    base = _timer(fake, seen)
    first: set[tuple[str, int]] = set()

    def drifting(launch):  # the first timing of each (config, shape) is disturbed: 10 ms slower
        times = base(launch)
        key = seen[-1]
        if key not in first:
            first.add(key)
            return [t + 10.0 for t in times]
        return times

    t = tune(_configs(kernels.kernels), {"mm": Problem(["n"], [{"n": n} for n in SHAPES], make)}, timer=drifting,
             arch="sm_90a", device="fake sm_90", rounds=2)
    assert [(s.shape["n"], s.chosen) for s in t.families["mm"].shapes] == [(n, f"mm[{WANT[n]}]") for n in SHAPES]
    assert t.families["mm"].shapes[0].timings_ms["mm[c1]"] == pytest.approx(synthetic_ms("c1", 16))
    with pytest.raises(TuningError, match="rounds must be >= 1"):
        tune(_configs(kernels.kernels), {}, timer=drifting, arch="sm_90a", rounds=0)


def test_the_table_becomes_disjoint_range_rules(table):
    b, t = table
    tuned = embed(b, t)
    rules = {a.label: rmodel.text(a.range_rules) for a in tuned}
    # fallback: the least total time over all shapes (c0 here); one rule per power-of-two bucket of n
    assert rules == {"mm[c0]": "", "mm[c0_t0]": "n in [9, 16]", "mm[c0_t1]": "n in [65, 128]",
                     "mm[c1_t2]": "n in [513, 1024]", "mm[c2_t3]": "n in [4097, 8192]"}
    assert bucket(1) == (rmodel.INT64_MIN, 1) and bucket(2) == (2, 2) and bucket(3) == (3, 4)


@pytest.fixture
def tuned_lib(kernels, table, tmp_path):
    from kernelpack.clib import Library

    b, t = table
    tuned = embed(b, t)
    lib = Library("rng", tuned, cflags=["-Werror"]).build(tmp_path / "rng")
    exe = compile_program(HERE / "ranges_harness.c", tmp_path / "harness", lib.include_dir,
                          [f"-L{lib.lib_dir}", "-lrng", f"-Wl,-rpath,{lib.lib_dir}"],
                          flags=("-DRADD=rng_mm", "-DONLY_RADD"))
    return tuned, exe


# n -> the config dispatch must choose: tuned shapes, other values in their buckets, and the fallback elsewhere
DISPATCH = {16: "c0", 10: "c0", 100: "c0", 70: "c0", 1000: "c1", 600: "c1", 5000: "c2", 8192: "c2", 3: "c0",
            300: "c0", 20000: "c0"}


def test_the_c_library_picks_the_tuned_config_per_shape(kernels, tuned_lib, tmp_path):
    _, exe = tuned_lib
    r = run(exe, tmp_path, kernels.fake, "radd", *map(str, DISPATCH))
    assert r.returncode == 0 and "KP_SUCCESS" in r.stdout, r.stdout + r.stderr
    got = [x["block"][0] for x in r.launches()]
    assert got == [BLOCK[c] for c in DISPATCH.values()]


@pytest.mark.parametrize("path", ["c", "python"])
def test_the_runtime_picks_the_tuned_config_per_shape(tuned_lib, fake, path):
    tuned, _ = tuned_lib
    if path == "python":
        with python_path():
            m = kernelpack.load(tuned)
    else:
        m = kernelpack.load(tuned)
        assert m.mm.family.fast is not None
    for n, config in DISPATCH.items():
        m.mm(_f32(0x10000), _f32(0x20000), _f32(0x30000), n, grid=1)
        assert fake.last()["block"][0] == BLOCK[config], f"n = {n}"


def test_a_table_for_another_bundle_or_arch_is_refused(kernels, table):
    b, t = table
    other = Bundle(tuple(a.with_ranges(["n >= 0"]) if a.variant == "c0" else a for a in b))
    with pytest.raises(TuningError, match="made for another bundle"):
        embed(other, t)
    from dataclasses import replace

    with pytest.raises(TuningError, match=r"tuned on sm_100a .*carries sm_80, sm_90a"):
        embed(b, replace(t, arch="sm_100a", device="B200"))
    with pytest.raises(TuningError, match="no family nope"):
        embed(b, replace(t, families={**t.families, "nope": t.families["mm"]}))


def test_a_malformed_tuning_file_is_refused(tmp_path):
    p = tmp_path / "t.json"
    p.write_text('{"format": 1, "arch": "sm_90a"}')
    with pytest.raises(TuningError, match="not a kernelpack tuning file"):
        TuningTable.read(p)
    p.write_text("{")
    with pytest.raises(TuningError, match="cannot read it"):
        TuningTable.read(p)
    p.write_text('{"format": 7}')
    with pytest.raises(TuningError, match="format 7"):
        TuningTable.read(p)


# ------------------------------------------------------------------ Triton: every autotune config compiled

ADD_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


def test_an_autotuned_triton_kernel_compiles_every_config_as_one_family(module_cache):
    pytest.importorskip("triton")
    import kernelpack.frontends.triton.compile as kt
    from kernelpack.tuning.tune import constexprs
    from triton_kernels import add_autotuned

    b = kt.compile(add_autotuned, ADD_SIG, arch="sm_90a", name="add", cache=module_cache)
    assert [a.label for a in b] == ["add[c0]", "add[c1]"]
    assert [constexprs(a) for a in b] == [{"BLOCK": 128}, {"BLOCK": 1024}]
    assert kt.autotune_key(add_autotuned) == ["n"]


def test_a_project_builds_the_configs_of_an_autotuned_kernel_with_autotune_true(tmp_path, capsys):
    pytest.importorskip("triton")
    import shutil

    import kernelpack.cli as cli

    shutil.copy(HERE / "triton_kernels.py", tmp_path / "kernels.py")
    toml = ('[library]\nname = "p"\narchs = ["sm_90a"]\noutputs = ["bundle"]\n[[triton]]\n'
            'kernel = "kernels.py:add_autotuned"\nname = "add"\nautotune = true\n'
            'signature = { x_ptr = "*fp32", y_ptr = "*fp32", out_ptr = "*fp32", n = "i32" }\n'
            'grid = [["ceil_div", ["arg", "n"], "BLOCK"], 1, 1]\n')  # ["arg", n]: a scalar (TOML has no null)
    (tmp_path / "kernelpack.toml").write_text(toml)
    assert cli.main(["build", "-q", "-j", "1", str(tmp_path)]) == 0, capsys.readouterr().err
    arts = list(Bundle.read(tmp_path / "build" / "p.kpack"))
    assert [a.label for a in arts] == ["add[c0]", "add[c1]"]
    # one grid formula in the project file, each config's own BLOCK in it (issue 30: as the Python API's function)
    assert [a.launch.grid[0][2] for a in arts] == [128, 1024]  # type: ignore[index]


# ------------------------------------------------------------------ kernelpack build embeds the table


NEG = ('template <int B> __global__ void neg(float* y, int n) { int i = threadIdx.x * B; '
       'if (i < n) y[i] = -y[i]; }\n')


def test_kernelpack_build_embeds_the_tuning_table_and_refuses_a_foreign_one(tmp_path, capsys):
    from dataclasses import replace

    import kernelpack.cli as cli
    from kernelpack.tuning.tune import FamilyTable, TunedShape, bundle_sha256

    (tmp_path / "k.cu").write_text(NEG)
    toml = ('[library]\nname = "p"\narchs = ["sm_90a"]\noutputs = ["bundle"]\n{tuning}[[cuda]]\nsource = "k.cu"\n'
            'kernels = ["neg<1>", "neg<2>"]\n')
    (tmp_path / "kernelpack.toml").write_text(toml.format(tuning=""))
    build = ["build", "-q", "-j", "1", str(tmp_path)]
    assert cli.main(build) == 0, capsys.readouterr().err
    plain = Bundle.read(tmp_path / "build" / "p.kpack")
    table = TuningTable(bundle_sha256(plain), "sm_90a", "fake", {"neg": FamilyTable(("n",), (
        TunedShape({"n": 100}, "neg[2]", {"neg[1]": 2.0, "neg[2]": 1.0}),
        TunedShape({"n": 5000}, "neg[1]", {"neg[1]": 3.0, "neg[2]": 5.0})))})
    table.write(tmp_path / "tuning.json")
    (tmp_path / "kernelpack.toml").write_text(toml.format(tuning='tuning = "tuning.json"\n'))
    assert cli.main(build) == 0, capsys.readouterr().err
    tuned = Bundle.read(tmp_path / "build" / "p.kpack")
    assert {a.label: rmodel.text(a.range_rules) for a in tuned} == {
        "neg[1]": "", "neg[2_t0]": "n in [65, 128]", "neg[1_t1]": "n in [4097, 8192]"}
    assert cli.main([*build, "--tuning", "none"]) == 0
    assert Bundle.read(tmp_path / "build" / "p.kpack").to_bytes() == plain.to_bytes(), "the untuned bundle again"

    replace(table, arch="sm_100a", device="B200").write(tmp_path / "tuning.json")
    assert cli.main(build) == 1
    assert "tuned on sm_100a (B200); the bundle carries sm_90a" in capsys.readouterr().err
    replace(table, bundle_sha256="0" * 64).write(tmp_path / "tuning.json")
    assert cli.main(build) == 1
    assert "was made for another bundle" in capsys.readouterr().err
    assert Bundle.read(tmp_path / "build" / "p.kpack").to_bytes() == plain.to_bytes(), "failed builds keep outputs"


def test_kernelpack_tune_without_a_gpu_says_so(tmp_path, capsys):
    pytest.importorskip("torch")
    import torch

    import kernelpack.cli as cli

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    b = tmp_path / "b.kpack"
    Bundle.read(HERE / "fixtures" / "built-2026-12-01" / "demo.kpack").write(b)
    assert cli.main(["tune", str(b), "--problems", "p.py:PROBLEMS"]) == 1
    assert "needs a CUDA device" in capsys.readouterr().err


def test_the_tuned_arch_is_the_binary_the_device_runs(kernels):
    """kernel tune names the table's arch by the bundle's binary the device runs (as the runtime picks it), so a
    bundle built for sm_80 tuned on an 8.6 device is embeddable; a device the bundle carries nothing for: sm_XY."""
    from kernelpack.tuning.tune import device_arch

    bundle = _configs(kernels.kernels)  # sm_80 and sm_90a
    assert device_arch(bundle, 8, 6) == "sm_80"
    assert device_arch(bundle, 8, 0) == "sm_80"
    assert device_arch(bundle, 9, 0) == "sm_90a"
    assert device_arch(bundle, 7, 5) == "sm_75"
