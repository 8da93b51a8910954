"""Shared memory per arch (issue 27 items 6 and 7), GPU-less, with Triton matmuls whose pipelined tl.dot needs more
shared memory on sm_90a than on sm_80 (tests/smem_kernels.py):

* item 6: an arch's launch facts -- dynamic shared memory first -- stay with that arch's binaries when artifacts
  compiled in separate calls are merged (before, the merge refused ``launch dynamic_smem: 65536 ..., 98304``);
* item 7: a (config, arch) whose shared memory exceeds the arch's opt-in limit is refused at compile, naming the
  kernel, config, arch, need and limit (before, it compiled and could only fail at launch) -- unless the config is
  one of an autotuned family's: then it is left out for that arch (a ConfigDropped warning, a line in the build
  summary), dispatch there picks another config (the C library and both runtime paths, on the fake driver), and
  only an arch no config fits is refused.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Any

import pytest

from kernelpack.bundle.kpack import Bundle
from kernelpack.core.arch import Arch
from kernelpack.core.errors import CompileError, ConfigDropped, LimitError
from kernelpack.launch.limits import smem_limit

ARCHS = ["sm_80", "sm_90a"]


@pytest.fixture(scope="module")
def sk() -> Any:
    pytest.importorskip("triton")
    import smem_kernels

    return smem_kernels


@pytest.fixture(scope="module")
def family(sk, module_cache) -> tuple[Bundle, list[ConfigDropped]]:
    """configs BIG (left out for sm_80) and SMALL, compiled for sm_80 and sm_90a in one call: (bundle, warnings)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        bundle = sk.compile_family((sk.BIG, sk.SMALL), ARCHS, module_cache)
    return bundle, [w.message for w in seen if isinstance(w.message, ConfigDropped)]


def art(bundle: Bundle, label: str) -> Any:
    return next(a for a in bundle if a.label == label)


# ------------------------------------------------------------------ the limits: one table in the launch model


@pytest.mark.parametrize(("target", "limit"), [
    ("sm_80", 163 * 1024), ("sm_86", 163 * 1024), ("sm_89", 99 * 1024), ("sm_90a", 227 * 1024),
    ("sm_90", 227 * 1024), ("sm_100a", 227 * 1024), ("sm_120", 99 * 1024), ("sm_120a", 99 * 1024),
    ("compute_80", 227 * 1024), ("sm_75", 64 * 1024)])
def test_an_archs_limit_is_the_largest_of_the_devices_its_binary_runs_on(target, limit):
    """A plain sm_86 cubin also runs on 8.7 (163 KiB); sm_89 only on 8.9 (99 KiB); compute_80 PTX on all."""
    assert smem_limit(Arch.parse(target)) == limit


# ------------------------------------------------------------------ item 6: per-arch facts survive a merge


def test_a_kernel_compiled_per_arch_merges_with_each_archs_shared_memory(sk, module_cache):
    import kernelpack.frontends.triton.compile as kt

    def one(arch: Any) -> Bundle:
        return kt.compile(sk.mm_tagged, sk.SIG, arch=arch, specializations=[sk.specialization(sk.SMALL, "")],
                          name="mm", cache=module_cache)

    merged = Bundle.of(one("sm_90a"), one("sm_80")).artifacts[0]
    assert [merged.launch_for(a).dynamic_smem for a in ARCHS] == [65536, 98304]
    both = one(ARCHS).artifacts[0]  # the artifact one call for both archs makes (Triton's ptxas differs per arch:
    assert merged == dataclasses.replace(both, provenance=merged.provenance)  # the provenance names the sm_80 one's)
    again = Bundle.from_bytes(Bundle.of(merged).to_bytes()).artifacts[0]
    assert again.launch_for("sm_90a").dynamic_smem == 98304


# ------------------------------------------------------------------ item 7: refused, or left out in a family


def test_a_specialization_beyond_an_archs_shared_memory_is_refused_naming_all(sk, module_cache):
    import kernelpack.frontends.triton.compile as kt

    with pytest.raises(CompileError) as err:
        kt.compile(sk.mm_tagged, sk.SIG, arch=ARCHS, name="mm", cache=module_cache,
                   specializations=[sk.specialization(sk.SMALL, "small"), sk.specialization(sk.BIG, "big")])
    assert err.value.message.startswith(
        "kernel mm[big] (sm_80): needs 196,608 bytes of shared memory per block (196,608 dynamic); sm_80 allows at "
        "most 166,912 (163 KiB, with opt-in)"), err.value.message


def test_every_frontends_artifact_is_held_to_the_limit(family):
    """The check is the artifact's (kernelpack.bundle.artifact), whatever made it: here a LaunchSpec asks for more."""
    small = art(family[0], "mm[c1]")
    over = dataclasses.replace(small.launch, dynamic_smem=232449)
    with pytest.raises(LimitError, match=r"kernel mm\[c1\] \(sm_90a\): needs 232,449 bytes .* sm_90a allows at most "
                                         r"232,448"):
        dataclasses.replace(small, per_arch={"sm_90a": dataclasses.replace(small.arch_launches[Arch.parse("sm_90a")],
                                                                           launch=over)})
    assert dataclasses.replace(small, launch=dataclasses.replace(small.launch, dynamic_smem=166912))  # at the limit


def test_an_autotuned_config_is_left_out_for_the_arch_it_does_not_fit(family):
    bundle, dropped = family
    assert [(a.label, [str(x) for x in a.archs]) for a in bundle] == [("mm[c0]", ["sm_90a"]),
                                                                     ("mm[c1]", ARCHS)]
    assert [(d.kernel, d.label, d.arch) for d in dropped] == [("mm", "mm[c0]", "sm_80")]
    assert str(dropped[0]) == ("kernel mm[c0] left out for sm_80: needs 196,608 bytes of shared memory per block "
                               "(196,608 dynamic); sm_80 allows at most 166,912 (163 KiB, with opt-in)")
    assert art(bundle, "mm[c0]").launch_for("sm_90a").dynamic_smem == 229376  # 224 KiB: fits sm_90a's 227


def test_an_arch_no_config_fits_is_refused_naming_each(sk, module_cache):
    with pytest.raises(CompileError) as err:
        sk.compile_family((sk.HUGE, sk.BIG), ARCHS, module_cache)
    msg = err.value.message
    assert msg.startswith("kernel mm: no config fits sm_80: mm[c0] needs 229,376 bytes"), msg
    assert "; mm[c1] needs 196,608 bytes" in msg, msg


def test_explicit_specializations_can_be_pruned_as_configs(sk, module_cache):
    import kernelpack.frontends.triton.compile as kt

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        b = kt.compile(sk.mm_tagged, sk.SIG, arch=ARCHS, name="mm", cache=module_cache, prune=True,
                       specializations=[sk.specialization(sk.SMALL, "small"), sk.specialization(sk.BIG, "big")])
    assert {a.label: [str(x) for x in a.archs] for a in b} == {"mm[big]": ["sm_90a"], "mm[small]": ARCHS}
    assert [str(w.message).split(":")[0] for w in seen] == ["kernel mm[big] left out for sm_80"]


# ------------------------------------------------------------------ dispatch: another config where one was left out

PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include "sm.h"
int main(void) {
    kp_launch l;
    memset(&l, 0, sizeof l); /* grid {0,0,0}: the chosen config's grid formula */
    kp_status s = sm_mm(&l, (kp_f16*)0x100000, (kp_f16*)0x200000, (float*)0x300000, (int32_t*)0x400000, 256, 256,
                        512);
    printf("mm status=%s msg=%s\n", sm_status_name(s), s ? sm_last_error() : "");
    return 0;
}
"""
ARGS = (0x100000, 0x200000, 0x300000, 0x400000, 256, 256, 512)


@pytest.fixture(scope="module")
def lib(family, tmp_path_factory) -> tuple[Path, Path]:
    from clib_support import compile_program
    from kernelpack.clib import Library

    root = tmp_path_factory.mktemp("smemlib")
    built = Library("sm", family[0], cflags=["-Werror"]).build(root / "sm")
    (root / "main.c").write_text(PROGRAM)
    exe = compile_program(root / "main.c", root / "main", built.include_dir,
                          [f"-L{built.lib_dir}", "-lsm", f"-Wl,-rpath,{built.lib_dir}", "-lpthread"])
    return exe, root


@pytest.mark.parametrize(("cc", "smem"), [((8, 0), 65536), ((9, 0), 229376)], ids=["sm80", "sm90"])
@pytest.mark.parametrize("path", ["c_library", "runtime_c", "runtime_python"])
def test_dispatch_picks_a_config_that_carries_the_devices_arch(family, lib, fake, fake_cuda, path, cc, smem):
    """c0 first wherever it has a binary (sm_90a: its 224 KiB, the opt-in raised to it); on sm_80, where it was left
    out, c1 -- through the C library and the runtime's C and Python paths."""
    import kernelpack
    from clib_support import results
    from fake_cuda import environment, run
    from kernelpack.runtime import driver
    from runtime_support import python_path

    if path == "c_library":
        exe, root = lib
        r = run(exe, root, fake_cuda, **environment(cc=[cc]))
        assert results(r)["mm"] == ("KP_SUCCESS", ""), r.stdout + r.stderr
        done = r.launches()
    else:
        fake.reset(cc)
        driver.use_library(str(fake.path))
        if path == "runtime_python":
            with python_path():
                mod = kernelpack.load(family[0])
        else:
            mod = kernelpack.load(family[0])
        mod.mm(*ARGS)
        done = fake.launches()
    assert [(x["smem"], x["grid"]) for x in done] == [(smem, (2, 2, 1))]


# ------------------------------------------------------------------ kernelpack build: the summary and the family

TOML = """
[library]
name = "smem"
archs = ["sm_80", "sm_90a"]
outputs = ["bundle"]

[[triton]]
kernel = "kernels.py:{kernel}"
example_args = "kernels.py:example_args"
name = "mm"
autotune = true
"""
KERNELS = """
from smem_kernels import BIG, HUGE, SMALL, autotuned, example_args

tuned = autotuned(HUGE, BIG, SMALL)  # HUGE fits no arch, BIG only sm_90a
hopeless = autotuned(HUGE, BIG)  # nothing fits sm_80
"""


def test_kernelpack_build_leaves_configs_out_with_a_line_in_its_summary(sk, tmp_path, fresh_cache):
    import io

    from rich.console import Console

    from kernelpack.project import BuildFailed, build
    from kernelpack.project.ui import summarize

    # (jobs=1: built in this process, where the project's kernels.py imports tests/smem_kernels.py)
    (tmp_path / "kernels.py").write_text(KERNELS)
    (tmp_path / "kernelpack.toml").write_text(TOML.format(kernel="tuned"))
    for round_ in ("built", "reused", "up to date"):
        if round_ == "reused":
            (tmp_path / "kernelpack.toml").write_text(TOML.format(kernel="tuned") + "\n# touched\n")
        report = build(tmp_path, jobs=1)
        assert report.up_to_date == (round_ == "up to date")
        rows = {r.kernel: r for r in report.rows}
        assert {k: (r.archs, r.status) for k, r in rows.items()} == {
            "mm[c0]": ([], "dropped"),
            "mm[c1]": (["sm_90a"], "reused" if round_ != "built" else "compiled"),
            "mm[c2]": (ARCHS, "reused" if round_ != "built" else "compiled")}, round_
        assert rows["mm[c0]"].warnings == [
            f"left out for {arch} (a config of a tuned family, as Triton's autotuner prunes it): needs {need} bytes "
            f"of shared memory per block ({need} dynamic); {arch} allows at most {limit}" for arch, need, limit in
            (("sm_80", "229,376", "166,912 (163 KiB, with opt-in)"),
             ("sm_90a", "262,144", "232,448 (227 KiB, with opt-in)"))], round_
        assert [w for w in rows["mm[c1]"].warnings if "sm_80" in w] == [
            "left out for sm_80 (a config of a tuned family, as Triton's autotuner prunes it): needs 196,608 bytes "
            "of shared memory per block (196,608 dynamic); sm_80 allows at most 166,912 (163 KiB, with opt-in)"]
        assert not any("not built for" in w for w in rows["mm[c1]"].warnings), round_
    out = io.StringIO()
    summarize(report, Console(file=out, width=300))
    assert "warning: mm[c1]: left out for sm_80 (a config of a tuned family" in out.getvalue(), out.getvalue()
    bundle = Bundle.read(tmp_path / "build" / "smem.kpack")
    assert {a.label: [str(x) for x in a.archs] for a in bundle} == {"mm[c1]": ["sm_90a"], "mm[c2]": ARCHS}

    (tmp_path / "kernelpack.toml").write_text(TOML.format(kernel="hopeless"))
    with pytest.raises(BuildFailed, match=r"kernel mm: no config fits sm_80: mm\[c0\] needs 229,376 bytes .*; "
                                          r"mm\[c1\] needs 196,608 bytes"):
        build(tmp_path, jobs=1)


# ------------------------------------------------------------------ tuning keeps a config for every arch


def test_a_tuned_family_keeps_a_config_for_an_arch_its_fallback_was_left_out_for(family):
    from kernelpack.tuning.table import FamilyTable, TunedShape, TuningTable
    from kernelpack.tuning.tune import bundle_sha256, embed

    bundle = family[0]
    times = {"mm[c0]": 1.0, "mm[c1]": 2.0}  # c0 (sm_90a only) the fastest on the tuned arch
    table = TuningTable(bundle_sha256(bundle), "sm_90a", "H200", {"mm": FamilyTable(("M",), (
        TunedShape({"M": 256}, "mm[c0]", times), TunedShape({"M": 4096}, "mm[c0]", times)))})
    tuned = embed(bundle, table)
    got = {a.label: ([str(x) for x in a.archs], [r.text() for r in a.range_rules]) for a in tuned}
    assert got == {"mm[c0]": (["sm_90a"], []), "mm[c1_fallback]": (["sm_80"], []),
                   "mm[c0_t0]": (["sm_90a"], ["M in [129, 256]"]), "mm[c0_t1]": (["sm_90a"], ["M in [2049, 4096]"])}
    assert art(tuned, "mm[c1_fallback]").launch_for("sm_80").dynamic_smem == 65536
