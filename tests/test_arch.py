"""Arch names and the rule for which binary runs on which device."""

import pytest

from kernelpack.core.arch import Arch, parse_archs
from kernelpack.core.errors import KernelpackError
from kernelpack.launch.binaries import runs_on


def test_parse_round_trips_names():
    assert str(Arch.parse("sm_90a")) == "sm_90a"
    assert Arch.parse("sm_100a") == Arch(10, 0, "a")
    assert Arch.parse("compute_80") == Arch(8, 0, "", virtual=True) != Arch(8, 0)
    assert str(Arch.parse("COMPUTE_90a")) == "compute_90a" and Arch.parse("compute_90a").real == Arch(9, 0, "a")
    for name in ("sm_100a", "sm_100f", "sm_103", "sm_103f", "sm_110", "sm_110f", "sm_120", "sm_120a", "sm_121f",
                 "compute_120f", "sm_88"):
        assert str(Arch.parse(name)) == name


@pytest.mark.parametrize("bad,match", [
    ("sm_95", r"not a CUDA arch: 'sm_95' \(no NVIDIA GPU has SM 95; known: .*sm_121; did you mean 'sm_90' or "
              r"'sm_100'\?\)"),
    ("compute_99", "no NVIDIA GPU has SM 99"),
    ("sm_80a", r"sm_80 has no arch-specific 'a' target; those are sm_90a, sm_100a"),
    ("sm_90f", r"sm_90 has no family-specific 'f' target; those are sm_100f"),
    ("compute_", "not a CUDA arch: 'compute_'"),
    ("sm_90x", "not a CUDA arch"),
])
def test_unknown_archs_are_refused_naming_what_exists(bad, match):
    with pytest.raises(KernelpackError, match=match):
        Arch.parse(bad)


def test_arch_specific_binaries_run_only_on_the_exact_capability():
    assert runs_on(Arch.parse("sm_90a"), 9, 0)
    assert not runs_on(Arch.parse("sm_90a"), 10, 0)
    assert runs_on(Arch.parse("sm_80"), 8, 6) and not runs_on(Arch.parse("sm_86"), 8, 0)
    assert not runs_on(Arch.parse("sm_80"), 9, 0)
    assert runs_on(Arch.parse("sm_100f"), 10, 3) and not runs_on(Arch.parse("sm_100f"), 11, 0)
    assert runs_on(Arch.parse("compute_80"), 12, 1) and not runs_on(Arch.parse("compute_100f"), 12, 0)


def test_bad_arch_names_are_refused_clearly():
    with pytest.raises(KernelpackError, match="not a CUDA arch: 'gfx90a'"):
        Arch.parse("gfx90a")
    with pytest.raises(KernelpackError, match="no target arch"):
        parse_archs([])
    assert parse_archs(["sm_80", "sm_80", "sm_90a"]) == (Arch(8, 0), Arch(9, 0, "a"))


@pytest.mark.parametrize("typo,meant", [
    ("sm90", "'sm_90'"), ("SM-90a", "'sm_90a'"), ("compute90", "'compute_90'"), ("sm_89a", "'sm_89' or 'sm_90a'"),
    ("sm_100x", "'sm_100' or 'sm_100f'"), ("sm_90f", "'sm_90' or 'sm_100f'"),
])
def test_a_misspelled_arch_is_refused_naming_the_arch_meant(typo, meant):
    with pytest.raises(KernelpackError, match=f"did you mean {meant}"):
        Arch.parse(typo)


@pytest.mark.parametrize("bare", ["90", "90a", " 100 ", 90])
def test_a_bare_number_is_no_arch_as_a_string_or_as_an_int(bare):
    """One rule (docs/reliability.md): an arch is a name with its prefix; "90" was taken as sm_90 while 90 was
    refused, and either could have meant sm_90a."""
    with pytest.raises(KernelpackError, match="sm_90" if "9" in str(bare) else "sm_100"):
        Arch.parse(bare)
    with pytest.raises(KernelpackError, match="write 'sm_|did you mean 'sm_"):
        parse_archs([bare])


@pytest.mark.parametrize("bad,match", [
    (90, r"must be a string such as 'sm_80'.*got int 90; write 'sm_90'"),
    (9.0, "must be a string .*got float 9.0"),
    (None, "must be a string .*got NoneType None"),
    (b"sm_90", "must be a string .*got bytes"),
    ("sm_9", "not a CUDA arch: 'sm_9'"),
    ("sm_90\n", None),  # surrounding whitespace is fine
    ("sm_\u0669\u0660", "not a CUDA arch"),  # Arabic-Indic digits are not digits here
    ("sm_1000000000000000000000", "not a CUDA arch"),
])
def test_malformed_archs_are_kernelpack_errors(bad, match):
    if match is None:
        assert Arch.parse(bad) == Arch(9, 0)
        return
    with pytest.raises(KernelpackError, match=match):
        Arch.parse(bad)
    with pytest.raises(KernelpackError, match=match):
        parse_archs([bad])


@pytest.mark.parametrize("bad", [90, 9.0, None, {"sm_90": 1}, iter(["sm_90"])])
def test_parse_archs_refuses_what_is_neither_a_name_nor_a_list(bad):
    with pytest.raises(KernelpackError, match="arch must be an arch name such as 'sm_90a' or a list of them"):
        parse_archs(bad)


def test_every_frontend_refuses_an_int_arch_with_a_kernelpack_error(tmp_path):
    """arch=90 (an int) used to be a TypeError deep inside the frontends."""
    from kernelpack.frontends.cuda import compile as cuda

    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(float* y) { y[0] = 1.0f; }\n')
    with pytest.raises(KernelpackError, match="got int 90; write 'sm_90'"):
        cuda.compile(src, ["k"], arch=90)  # type: ignore[arg-type]
    tried = 1
    try:
        import frontend_builds as fb
        import kernelpack.frontends.triton.compile as kt
        from triton_kernels import add_kernel
    except ImportError:
        pass
    else:
        with pytest.raises(KernelpackError, match="got int 90"):
            kt.compile(add_kernel, fb.F32, constexprs={"BLOCK": 1024}, arch=90)  # type: ignore[arg-type]
        tried += 1
    try:
        import cuda.tile as ct

        import kernelpack.frontends.cutile.compile as kc
        from cutile_kernels import array, vadd
    except ImportError:
        pass
    else:
        sig = [array(ct.float32, 1), array(ct.float32, 1), array(ct.float32, 1), 256]
        with pytest.raises(KernelpackError, match="got int 90"):
            kc.compile(vadd, [sig], arch=90)  # type: ignore[arg-type]
        tried += 1
    try:
        import kernelpack.cute as kcute
    except ImportError:
        pass
    else:
        with pytest.raises(KernelpackError, match="got int 90"):
            kcute.compile(lambda: None, arch=90)  # type: ignore[arg-type]
        tried += 1
    assert tried >= 1
