"""The .kpack bundle: deterministic bytes, hash-checked loading, clear refusal of bad files."""

from __future__ import annotations

import hashlib
import json
import struct
import zlib

import pytest

from kernelpack.bundle.kpack import (
    FLAG_ZLIB_BLOBS,
    FLAG_ZLIB_MANIFEST,
    HEADER_SIZE,
    MAGIC,
    MAX_MANIFEST,
    Bundle,
    read_manifest,
)
from kernelpack.cli.demo import compile_examples
from kernelpack.core.errors import BundleError
from toolchain_support import needs_cuda_compiler

pytestmark = needs_cuda_compiler


@pytest.fixture(scope="module")
def bundle(module_cache):
    return compile_examples(("sm_80", "sm_90a"))


def test_two_builds_from_scratch_give_identical_bytes(tmp_path):
    from kernelpack.core import config

    outs = []
    for i in range(2):
        with config.override(cache_dir=None):
            outs.append(compile_examples(("sm_80", "sm_90a")).write(tmp_path / f"b{i}.kpack").read_bytes())
    assert outs[0] == outs[1]
    assert hashlib.sha256(outs[0]).hexdigest() == hashlib.sha256(outs[1]).hexdigest()


def test_round_trip_preserves_every_artifact(bundle, tmp_path):
    back = Bundle.read(bundle.write(tmp_path / "x.kpack"))
    assert back == bundle
    assert back.to_bytes() == bundle.to_bytes()
    assert set(back.families()) == {"affine", "axpy", "row_sum", "scale"}
    assert len(back.families()["scale"]) == 3


def test_identical_cubins_are_stored_once(bundle):
    data = bundle.to_bytes()
    manifest = read_manifest(data)
    cubin_bytes = {b.sha256: len(b.data) for a in bundle for b in a.binaries}
    assert len(manifest["blobs"]) == len(cubin_bytes) == 2  # one module per arch, shared by 6 kernels
    assert len(data) < sum(cubin_bytes.values()) + 64 * 1024


def test_a_flipped_byte_anywhere_is_refused(bundle):
    data = bundle.to_bytes()
    moff = struct.unpack_from("<Q", data, 16)[0]
    blob_off = read_manifest(data)["blobs"][0]["offset"]
    for pos in (20, blob_off + 100, moff + 10, len(data) - 2):
        bad = bytearray(data)
        bad[pos] ^= 0x01
        with pytest.raises(BundleError):
            Bundle.from_bytes(bytes(bad))
    bad = bytearray(data)
    bad[blob_off + 100] ^= 0x01
    with pytest.raises(BundleError, match=r"blob 0 .*\(the binary was altered\)"):
        Bundle.from_bytes(bytes(bad))


def test_truncation_and_padding_are_refused(bundle):
    data = bundle.to_bytes()
    for cut in (0, 10, HEADER_SIZE, len(data) // 2, len(data) - 1):
        with pytest.raises(BundleError):
            Bundle.from_bytes(data[:cut])
    with pytest.raises(BundleError, match="truncated or padded"):
        Bundle.from_bytes(data + b"\0")


def test_a_newer_format_version_is_refused_with_both_versions_named(bundle):
    data = bytearray(bundle.to_bytes())
    struct.pack_into("<I", data, 8, 7)
    with pytest.raises(BundleError, match="format version 7 is newer than the supported version 2"):
        Bundle.from_bytes(bytes(data))


def test_not_a_bundle_is_refused(tmp_path):
    with pytest.raises(BundleError, match="bad magic"):
        Bundle.from_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(BundleError, match="cannot read bundle"):
        Bundle.read(tmp_path / "missing.kpack")


@pytest.mark.parametrize("version", [1, 2])
def test_a_manifest_lying_about_its_abi_is_refused_by_verification(bundle, version):
    from fuzz_support import manifest_of, repack

    data = bundle.to_bytes(version=version)
    manifest = manifest_of(data)
    axpy = next(a for a in manifest["artifacts"] if a["name"] == "axpy")
    axpy["abi"][0]["type"] = {"kind": "scalar", "dtype": "f64"}  # fp32 alpha claimed as double
    with pytest.raises(BundleError, match=r"axpy \(sm_80\): parameter 0 'alpha'"):
        Bundle.from_bytes(repack(data, manifest))


def test_duplicate_name_and_variant_is_refused_and_the_same_kernel_twice_is_harmless(bundle):
    with pytest.raises(BundleError, match="same name and variant: axpy"):
        Bundle((*bundle.artifacts, bundle.artifacts[1]))
    assert Bundle.of(bundle, bundle.artifacts[1]).to_bytes() == bundle.to_bytes()  # merged (tests/test_merge.py)


def _with_manifest(data: bytes, body: bytes, flags: int) -> bytes:
    version, moff = struct.unpack_from("<I", data, 8)[0], struct.unpack_from("<Q", data, 16)[0]
    head = struct.pack("<8sIIQQ32s", MAGIC, version, flags, moff, len(body), hashlib.sha256(body).digest())
    return head + data[HEADER_SIZE:moff] + body


def test_the_manifest_is_stored_compressed_and_a_plain_one_still_loads(bundle):
    data = bundle.to_bytes(compress=False)  # binaries as they are: flag 0x2 clear
    moff, msize = struct.unpack_from("<QQ", data, 16)
    assert struct.unpack_from("<I", data, 12)[0] == FLAG_ZLIB_MANIFEST
    plain = zlib.decompress(data[moff:moff + msize])
    assert msize < len(plain) / 1.5  # (the manifest of format 2 is mostly hashes: the entries are streams of their own)
    assert json.loads(plain) == {k: v for k, v in read_manifest(data).items() if k != "artifacts"}
    again = Bundle.from_bytes(_with_manifest(data, plain, 0))  # flags 0: plain JSON, as written before
    assert [(a.name, a.variant) for a in again] == [(a.name, a.variant) for a in bundle]


def test_a_manifest_that_is_not_zlib_or_expands_too_far_is_refused(bundle):
    data = bundle.to_bytes()
    moff, msize = struct.unpack_from("<QQ", data, 16)
    with pytest.raises(BundleError, match="not valid zlib data"):
        Bundle.from_bytes(_with_manifest(data, b"{}", FLAG_ZLIB_MANIFEST))
    with pytest.raises(BundleError, match="truncated or followed by extra bytes"):
        Bundle.from_bytes(_with_manifest(data, data[moff:moff + msize - 4], FLAG_ZLIB_MANIFEST))
    with pytest.raises(BundleError, match="truncated or followed by extra bytes"):
        Bundle.from_bytes(_with_manifest(data, data[moff:moff + msize] + b"x", FLAG_ZLIB_MANIFEST))
    bomb = zlib.compress(b" " * (MAX_MANIFEST + 1), 9)  # ~256 KB that would expand past the limit
    with pytest.raises(BundleError, match="expands to more than"):
        Bundle.from_bytes(_with_manifest(data, bomb, FLAG_ZLIB_MANIFEST))


def test_binaries_are_stored_compressed_and_expand_to_the_same_bytes(bundle):
    data = bundle.to_bytes()
    plain = bundle.to_bytes(compress=False)
    assert struct.unpack_from("<I", data, 12)[0] == FLAG_ZLIB_MANIFEST | FLAG_ZLIB_BLOBS
    assert struct.unpack_from("<I", plain, 12)[0] == FLAG_ZLIB_MANIFEST
    blobs = read_manifest(data)["blobs"]
    assert all(b["encoding"] == "zlib" and b["raw_size"] > 2 * b["size"] for b in blobs)
    assert len(data) < len(plain) / 2
    for raw in (data, plain):
        again = Bundle.from_bytes(raw)
        assert [b.data for a in again for b in a.binaries] == [b.data for a in bundle for b in a.binaries]


def _with_blob_entry(data: bytes, **changes) -> bytes:
    manifest = read_manifest(data)
    manifest["blobs"][0].update(changes)
    for k in [k for k, v in changes.items() if v is None]:
        del manifest["blobs"][0][k]
    body = zlib.compress(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())
    return _with_manifest(data, body, struct.unpack_from("<I", data, 12)[0])


@pytest.mark.parametrize("changes,match", [
    ({"encoding": "lz4"}, "blob 0 has encoding 'lz4'"),
    ({"raw_size": 2**40}, r"raw_size 1099511627776 is outside \(0, 2147483648\]"),
    ({"raw_size": 0}, "raw_size 0 is outside"),
    ({"raw_size": None}, "blob 0 entry is malformed"),
    ({"raw_size": 100}, "does not expand to its raw_size 100"),
    ({"encoding": None, "raw_size": None}, "not a cubin|magic|ELF"),  # the zlib stream taken as the binary
])
def test_a_lying_blob_entry_is_refused(bundle, changes, match):
    with pytest.raises(BundleError, match=match):
        Bundle.from_bytes(_with_blob_entry(bundle.to_bytes(), **changes))


def test_a_zlib_blob_without_the_header_flag_is_refused(bundle):
    data = bytearray(bundle.to_bytes())
    struct.pack_into("<I", data, 12, FLAG_ZLIB_MANIFEST)
    with pytest.raises(BundleError, match=r"encoding 'zlib'; this bundle allows none \(header flag 0x2 is clear\)"):
        Bundle.from_bytes(bytes(data))


def test_merging_read_bundles_reuses_their_compressed_streams(bundle, monkeypatch):
    data = bundle.to_bytes()
    again = Bundle.from_bytes(data)
    real = zlib.compress
    calls: list[int] = []
    monkeypatch.setattr("kernelpack.bundle.zlib.compress", lambda d, lvl=-1: calls.append(len(d)) or real(d, lvl))
    streams = 1 + len(read_manifest(data)["chunks"])  # the manifest, the chunks of entries and records
    assert Bundle.of(again).to_bytes() == data  # the same bytes, from the streams the blobs were read as
    assert len(calls) == streams  # no blob compressed again
    fresh = Bundle.from_bytes(bundle.to_bytes(compress=False))  # binaries never stored compressed
    calls.clear()
    fresh.to_bytes()  # every blob compressed, and the manifest
    assert len(calls) == streams + len(read_manifest(data)["blobs"])
    calls.clear()
    fresh.to_bytes()  # once per binary: its stream is kept
    assert len(calls) == streams
