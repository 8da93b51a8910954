"""Arch names and the rule for which binary runs on which device."""

import pytest

from kernelpack.arch import Arch, parse_archs
from kernelpack.errors import KernelpackError


def test_parse_round_trips_names():
    assert str(Arch.parse("sm_90a")) == "sm_90a"
    assert Arch.parse("sm_100a") == Arch(10, 0, "a")
    assert Arch.parse("compute_80") == Arch(8, 0, "")


def test_arch_specific_binaries_run_only_on_the_exact_capability():
    assert Arch.parse("sm_90a").runs_on(9, 0)
    assert not Arch.parse("sm_90a").runs_on(10, 0)
    assert Arch.parse("sm_80").runs_on(8, 6) and not Arch.parse("sm_86").runs_on(8, 0)
    assert not Arch.parse("sm_80").runs_on(9, 0)


def test_bad_arch_names_are_refused_clearly():
    with pytest.raises(KernelpackError, match="not a CUDA arch: 'gfx90a'"):
        Arch.parse("gfx90a")
    with pytest.raises(KernelpackError, match="no target arch"):
        parse_archs([])
    assert parse_archs(["sm_80", "sm_80", "sm_90a"]) == (Arch(8, 0), Arch(9, 0, "a"))
