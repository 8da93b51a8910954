"""kernelpack.load reads a .kpack lazily: the file's hashes are checked at load, each family is built on its first
use and each binary verified against its kernel's ABI when first loaded; verify=True and inspect --verify verify
everything at once. On the fake driver."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

import kernelpack
from kernelpack.abi import Abi, DType, Param, Pointer
from kernelpack.artifact import Binary, deferred_verification
from kernelpack.bundle import Bundle
from kernelpack.errors import AbiMismatch, BundleError


def _art(bundle: Bundle, label: str):
    return next(a for a in bundle if a.label == label)


@pytest.fixture(scope="module")
def broken(runtime_bundle, tmp_path_factory):
    """A bundle whose hashes are intact but in which two kernels cannot be used: ``wrong_abi`` states a parameter
    its cubin lacks, ``not_a_cubin`` carries bytes that are no cubin. Such a bundle can only come from a writer
    that skipped verification (deferred_verification), or from a build verified by another kernelpack version."""
    add = _art(runtime_bundle, "add")
    with deferred_verification():
        wrong = dataclasses.replace(add, name="wrong_abi",
                                    abi=Abi((*add.abi.params, Param("extra", Pointer(DType.f32)))))
        garbage = dataclasses.replace(add, name="not_a_cubin", binaries=(Binary("sm_90a", b"\x7fELF not a cubin"),),
                                      per_arch={})
    path = tmp_path_factory.mktemp("broken") / "broken.kpack"
    Bundle((add, wrong, garbage)).write(path)
    return path


def test_load_builds_no_family_and_parses_no_cubin_until_first_use(fake, runtime_bundle, tmp_path):
    path = runtime_bundle.write(tmp_path / "k.kpack")
    mod = kernelpack.load(path)
    st = mod._st
    assert st.families == {} and st.index._families == {}, "load builds no family"
    assert "add" in mod.__all__ and "add" in dir(mod) and "scale" in mod.__all__
    mod.add(0x10000, 0x20000, 0x30000, 8, grid=1, block=32)
    assert fake.last()["kernel"] == "add"
    assert set(st.index._families) == {"add"}, "only the family used was built"
    (art,) = st.index.family("add")
    assert not art.verified, "the sm_80 binary was never used: not verified yet"
    art.verify_binary(art.binary("sm_80"))
    assert art.verified, "the sm_90a binary launched was verified against the ABI on its first use"


def test_lazy_module_matches_the_eager_one(fake, runtime_bundle, tmp_path):
    path = runtime_bundle.write(tmp_path / "k.kpack")
    lazy, eager = kernelpack.load(path), kernelpack.load(path, verify=True)
    assert lazy.__all__ == eager.__all__
    assert lazy.bundle == eager.bundle == runtime_bundle
    assert sorted(lazy.families) == sorted(eager.families)
    assert repr(lazy.scale) == repr(eager.scale) and lazy.scale.__doc__ == eager.scale.__doc__
    assert lazy["add"] is lazy.add, "mod[name] and the attribute are one callable"


def test_a_corrupt_binary_loads_and_fails_at_its_kernels_first_use_naming_it(fake, broken):
    mod = kernelpack.load(broken)
    assert sorted(mod.__all__) == ["add", "not_a_cubin", "wrong_abi"]
    with pytest.raises(AbiMismatch, match=r"kernel wrong_abi \(sm_90a\).*extra"):
        mod.wrong_abi(0x10000, 0x20000, 0x30000, 8, 0x40000, grid=1, block=32)
    with pytest.raises(AbiMismatch, match=r"kernel not_a_cubin \(sm_90a\)"):
        mod.not_a_cubin(0x10000, 0x20000, 0x30000, 8, grid=1, block=32)
    with pytest.raises(AbiMismatch, match="kernel wrong_abi"):  # still refused, every time
        mod.wrong_abi(0x10000, 0x20000, 0x30000, 8, 0x40000, grid=1, block=32)
    mod.add(0x10000, 0x20000, 0x30000, 8, grid=1, block=32)  # the sound kernel of the same bundle launches
    assert fake.last()["kernel"] == "add"


def test_verify_true_fails_at_load_naming_the_kernel(broken):
    with pytest.raises(BundleError, match=r"broken.kpack: kernel not_a_cubin \(sm_90a\)"):
        kernelpack.load(broken, verify=True)


def test_an_altered_byte_still_fails_at_load(runtime_bundle, tmp_path):
    path = runtime_bundle.write(tmp_path / "k.kpack")
    data = bytearray(path.read_bytes())
    data[200] ^= 0x55  # inside the first blob
    path.write_bytes(bytes(data))
    with pytest.raises(BundleError, match="SHA-256 mismatch"):
        kernelpack.load(path)


def _inspect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelpack.cli", "inspect", *args], capture_output=True, text=True)


def test_inspect_verify_reports_a_sound_bundle_and_names_a_broken_kernel(runtime_bundle, broken, tmp_path):
    good = runtime_bundle.write(tmp_path / "good.kpack")
    ok = _inspect(str(good), "--verify")
    assert ok.returncode == 0, ok.stderr
    assert f"verified: {len(runtime_bundle)} specializations" in ok.stderr
    bad = _inspect(str(broken), "--verify")
    assert bad.returncode == 2 and "kernel not_a_cubin (sm_90a)" in bad.stderr, bad.stderr
