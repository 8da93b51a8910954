"""kernelpack.load reads a .kpack lazily: the file's hashes are checked at load, each family is built on its first
use and each binary verified against its kernel's ABI when first loaded; verify=True and inspect --verify verify
everything at once. On the fake driver."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

import kernelpack
from kernelpack.bundle.artifact import deferred_verification
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.abi import Abi, DType, Param, Pointer
from kernelpack.core.binary import Binary
from kernelpack.core.errors import AbiMismatch, BundleError


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


@pytest.mark.parametrize("version", [1, 2])
def test_load_builds_no_family_and_parses_no_cubin_until_first_use(fake, runtime_bundle, tmp_path, version):
    """Format 2: a launch reads its family's dispatch record (what the build verified) and builds nothing else;
    format 1 (no record): the launch builds its family and verifies the binary it loads."""
    path = tmp_path / "k.kpack"
    path.write_bytes(runtime_bundle.to_bytes(version=version))
    mod = kernelpack.load(path)
    st = mod._st
    assert st.families == {} and st.index._specs == {} and st.index._families == {}, "load builds no family"
    assert "add" in mod.__all__ and "add" in dir(mod) and "scale" in mod.__all__
    mod.add(0x10000, 0x20000, 0x30000, 8, grid=1, block=32)
    assert fake.last()["kernel"] == "add"
    assert set(st.index._specs) == ({"add"} if version == 1 else set()), "only the family used was built"
    assert mod.add.family.record is None if version == 1 else mod.add.family._specs is None
    (art,) = st.index.family("add")
    assert not art.verified, "the sm_80 binary was never used: not verified yet"
    art.verify_binary(art.binary("sm_80"))
    if version == 2:
        assert not art.verified, "the launch trusted the record: the sm_90a binary is verified when asked"
        art.verify_binary(art.binary("sm_90a"))
    assert art.verified, "format 1: the sm_90a binary launched was verified against the ABI on its first use"


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


@pytest.fixture()
def altered_second(runtime_bundle, tmp_path):
    """Family ``add`` of two specializations: ``add[a]`` (sm_90a) and ``add[b]`` (n a multiple of 2; sm_90a and
    sm_80), with one byte of the blob only ``add[b]`` uses (its sm_80 cubin) altered after the build."""
    add = _art(runtime_bundle, "add")
    a = dataclasses.replace(add, variant="a", binaries=(add.binary("sm_90a"),),
                            per_arch={k: v for k, v in add.arch_launches.items() if str(k) == "sm_90a"})
    params = tuple(dataclasses.replace(p, divisibility=2) if p.name == "n" else p for p in add.abi.params)
    b = dataclasses.replace(add, variant="b", abi=Abi(params))
    path = Bundle((a, b)).write(tmp_path / "two.kpack")
    data = bytearray(path.read_bytes())
    from kernelpack.bundle.kpack import read_manifest

    manifest = read_manifest(bytes(data))
    (entry,) = [x for x in manifest["artifacts"] if x["variant"] == "b"]
    (i,) = [x["blob"] for x in entry["binaries"] if x["arch"] == "sm_80"]
    blob = manifest["blobs"][i]
    data[blob["offset"] + blob["size"] // 2] ^= 0x55
    path.write_bytes(bytes(data))
    return path, i


def test_an_altered_blob_loads_and_fails_at_the_first_use_of_its_binary_naming_it(fake, altered_second):
    """The manifest's hash is checked at load, a blob's when a launch first uses the binary it holds (load does not
    hash every binary of the file): on an sm_80 device add[b] runs its sm_80 cubin, the altered blob."""
    path, i = altered_second
    fake.reset((8, 0))
    mod = kernelpack.load(path)
    for _ in range(2):  # n even: add[b], refused each time
        with pytest.raises(BundleError, match=rf"two.kpack: kernel add\[b\]: blob {i} SHA-256 mismatch \(the "
                                              r"binary was altered\)"):
            mod.add(0x10000, 0x20000, 0x30000, 8, grid=1, block=32)


def test_a_specialization_launches_where_its_altered_blob_is_not_the_binary_chosen(fake, altered_second):
    """On this sm_90 device add[b] runs its sm_90a cubin (shared with add[a], sound): its altered sm_80 blob is
    never read, so it launches, as add[a] does."""
    path, _ = altered_second
    mod = kernelpack.load(path)
    mod.add(0x10000, 0x20000, 0x30000, 8, grid=1, block=32)  # n even: add[b]
    assert fake.last()["kernel"] == "add"
    mod.add(0x10000, 0x20000, 0x30000, 3, grid=1, block=32)  # n odd: add[a]
    assert fake.last()["kernel"] == "add"
    assert [e.label for e in mod.add.family.device_state(0).entries if e.ready] == ["add[b]", "add[a]"]


def test_an_altered_blob_fails_at_load_with_verify_true(altered_second):
    path, i = altered_second
    with pytest.raises(BundleError, match=rf"blob {i} SHA-256 mismatch"):
        kernelpack.load(path, verify=True)
    with pytest.raises(BundleError, match=rf"blob {i} SHA-256 mismatch"):
        Bundle.read(path)


def _inspect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelpack.cli", "inspect", *args], capture_output=True, text=True)


def test_inspect_verify_reports_a_sound_bundle_and_names_a_broken_kernel(runtime_bundle, broken, tmp_path):
    good = runtime_bundle.write(tmp_path / "good.kpack")
    ok = _inspect(str(good), "--verify")
    assert ok.returncode == 0, ok.stderr
    assert f"verified: {len(runtime_bundle)} specializations" in ok.stderr
    bad = _inspect(str(broken), "--verify")
    assert bad.returncode == 1 and "kernel not_a_cubin (sm_90a)" in bad.stderr, bad.stderr


def _manifest_text(data: bytes) -> bytes:
    from kernelpack.bundle.kpack import manifest_bytes

    return manifest_bytes(data)


def test_a_format_1_manifest_is_one_json_object_with_one_artifact_per_line_name_first(runtime_bundle):
    import json

    from kernelpack.bundle.kpack import read_manifest, split_manifest

    data = runtime_bundle.to_bytes(version=1)
    text = _manifest_text(data)
    lines = text.split(b"\n")
    assert len(lines) == len(runtime_bundle) + 2, "a head line, one line per artifact, a tail line"
    assert all(line.startswith(b'{"name":"') for line in lines[1:-1])
    whole = read_manifest(data)  # any JSON reader reads the same object as before: the layout changes no value
    assert [a["name"] for a in whole["artifacts"]] == [a.name for a in runtime_bundle]
    head, entries = split_manifest(text, "k")
    assert head["blobs"] == whole["blobs"] and head["format"] == whole["format"] and head["artifacts"] == []
    assert [json.loads(t) for _, t in entries] == whole["artifacts"]


def test_load_parses_only_the_entries_of_the_families_used(fake, runtime_bundle, tmp_path):
    mod = kernelpack.load(runtime_bundle.write(tmp_path / "k.kpack"))
    groups = mod._st.index._groups
    assert all(isinstance(e, bytes) for g in groups.values() for e in g), "load parsed no artifact entry"
    mod.add(0x10000, 0x20000, 0x30000, 8, grid=1, block=32)
    assert fake.last()["kernel"] == "add"


def test_a_manifest_in_the_older_canonical_layout_still_loads(fake, runtime_bundle, tmp_path):
    from fuzz_support import encode, forge
    from kernelpack.bundle.kpack import read_manifest

    data = runtime_bundle.to_bytes(version=1)
    path = tmp_path / "old.kpack"
    path.write_bytes(forge(data, encode(read_manifest(data))))  # sorted keys, no newlines: the first writer's
    mod = kernelpack.load(path)
    assert mod.bundle == runtime_bundle
    mod.add(0x10000, 0x20000, 0x30000, 8, grid=1, block=32)
    assert fake.last()["kernel"] == "add"


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("edit", ["bad_json", "other_name"])
def test_a_malformed_entry_with_intact_hashes_fails_at_its_familys_first_use_naming_it(fake, runtime_bundle,
                                                                                       tmp_path, edit, version):
    from fuzz_support import edit_family_stream, forge

    def altered(line: bytes) -> bytes:
        return (line.replace(b'"entry":', b'"entry":,') if edit == "bad_json"
                else line.replace(b'"provenance":', b'"name":"add","provenance":'))

    if version == 1:
        data = runtime_bundle.to_bytes(version=1)
        lines = _manifest_text(data).split(b"\n")
        i = next(i for i, line in enumerate(lines) if line.startswith(b'{"name":"scale",'))
        lines[i] = altered(lines[i])
        data = forge(data, b"\n".join(lines))
    else:
        data = edit_family_stream(runtime_bundle.to_bytes(), "scale",
                                  lambda text: b"\n".join(map(altered, text.split(b"\n"))))
    path = tmp_path / "bad.kpack"
    path.write_bytes(data)
    mod = kernelpack.load(path)
    assert "scale" in mod.__all__
    with pytest.raises(BundleError, match=r"bad.kpack: kernel scale: .*(not valid JSON|malformed manifest entry)"):
        _ = mod["scale"].family.specs  # format 2: its first launches read its record; its entries when needed whole
    with pytest.raises(BundleError, match=r"bad.kpack: kernel scale: .*(not valid JSON|malformed manifest entry)"):
        kernelpack.load(path, verify=True)
    mod.add(0x10000, 0x20000, 0x30000, 8, grid=1, block=32)  # the other families load
    assert fake.last()["kernel"] == "add"
