"""The cubin reader, the bundle loader and the embedded-manifest reader under mutation fuzzing (hypothesis) with real
files: only CubinError / BundleError come out, every example inside a time box and an address-space cap
(tests/fuzz_support.py). scripts/fuzz.py runs the same targets for long campaigns. Bugs the fuzzers found are
pinned at the bottom as regression tests.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections import Counter
from functools import partial

import pytest
from hypothesis import HealthCheck, given, settings

import fuzz_support as fz
from kernelpack.bundle.embedded import read_embedded_bundle
from kernelpack.bundle.kpack import MAGIC, Bundle
from kernelpack.core.errors import BundleError
from toolchain_support import needs_cuda_compiler

pytestmark = needs_cuda_compiler
FUZZ = settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)



@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> fz.Seeds:
    return fz.make_seeds(tmp_path_factory.mktemp("fuzzseeds"))


# examples per target in the suite (about 35 s on two cores); scripts/fuzz.py runs long campaigns of the same
IN_SUITE = {"cubin": 2000, "bundle-bytes": 1000, "bundle-manifest": 500, "bundle-load": 400, "dispatch-record": 400,
            "embedded-bytes": 500, "embedded-manifest": 300}


def _fuzz_test(name: str):  # type: ignore[no-untyped-def]
    parser, strategy, runner = fz.TARGETS[name]

    @settings(FUZZ, max_examples=IN_SUITE[name])
    @given(args=strategy)
    def test(seeds: fz.Seeds, args) -> None:  # type: ignore[no-untyped-def]
        fz.check(parser, lambda: runner(seeds, args))

    test.__name__ = f"test_fuzz_{name.replace('-', '_')}"
    return test


test_fuzz_cubin = _fuzz_test("cubin")
test_fuzz_bundle_bytes = _fuzz_test("bundle-bytes")
test_fuzz_bundle_manifest = _fuzz_test("bundle-manifest")
test_fuzz_embedded_bytes = _fuzz_test("embedded-bytes")


@settings(FUZZ, max_examples=IN_SUITE["bundle-load"])
@given(args=fz.TARGETS["bundle-load"][1])
def test_fuzz_bundle_load(seeds: fz.Seeds, fake, args) -> None:  # type: ignore[no-untyped-def]
    """A forged manifest (hashes consistent), loaded lazily and every binary loaded on the fake driver as a first
    launch loads it: only KernelpackError (naming the cause) comes out."""
    fz.check("load", lambda: fz.TARGETS["bundle-load"][2](seeds, args))
test_fuzz_embedded_manifest = _fuzz_test("embedded-manifest")


@settings(FUZZ, max_examples=IN_SUITE["dispatch-record"])
@given(args=fz.TARGETS["dispatch-record"][1])
def test_fuzz_dispatch_record(seeds: fz.Seeds, fake, args) -> None:  # type: ignore[no-untyped-def]
    """A family's dispatch record edited (hashes consistent), loaded and launched through the C launcher with the
    plans it states, every binary loaded: only KernelpackError (naming the cause) comes out, never a crash."""
    fz.check("load", lambda: fz.TARGETS["dispatch-record"][2](seeds, args))


def test_every_integer_of_a_dispatch_record_at_a_width_boundary_is_refused_or_launched(seeds, fake):
    """The dispatch-record sweep's share in the suite (fuzz_support.record_sweep; scripts/fuzz.py runs all of it):
    every integer field of records holding a C slot of each kind (pointer, scalar with range and divisor, bytes,
    null, tensor struct, TMA descriptor, descriptor field, device value, tensor list and its count) beside a grid
    program, every launch fact, a
    device requirement and binaries, set in turn to values that wrap at each width the C launcher stores them in or
    overflow a sum with an offset; each hex group of the plan and the integer columns to 0x8000, 0xffff, 0x80000000.
    Written with every hash consistent, loaded, the family launched through the C launcher: each launched or refused
    (KernelpackError naming the cause), never a crash. Before: 11 of the full sweep's 3,952 inputs killed the
    process (SIGSEGV), among them the slot argument 2**15 (int16 -32768) and offsets of 2**63 - 1."""
    inputs = list(fz.record_sweep(fz.seed_record(seeds), fz.CI_BOUNDARY, ("8000", "ffff", "80000000")))
    outcomes = Counter(fz.check("load", partial(fz.sweep_input, seeds, text)) for _, _, text in inputs)
    assert sum(outcomes.values()) == len(inputs) > 800 and outcomes["refused"] > 700, outcomes
    assert {kind for kind, _, _ in inputs} == set(fz.SLOT_KINDS)


# ------------------------------------------------------------------ regressions found by the fuzzers


def _forged(body: bytes) -> bytes:
    return struct.pack("<8sIIQQ32s", MAGIC, 1, 0, 64, len(body), hashlib.sha256(body).digest()) + body


@pytest.mark.parametrize("body,match", [
    (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),  # RecursionError escaped json.loads
    (b'{"format":1,"blobs":[],"artifacts":[],"x":' + b"1" * 5000 + b"}", "not valid JSON"),  # int digit limit
    (b'{"format":1,"blobs":[{"offset":Infinity,"size":1,"sha256":"x"}],"artifacts":[]}', "not valid JSON"),
    (b'{"format":1,"blobs":[{"offset":1e400,"size":1,"sha256":"x"}],"artifacts":[]}', "blob 0 entry is malformed"),
    (b'{"format":1,"blobs":[],"artifacts":[{"binaries":[{"blob":1e400}]}]}', "malformed manifest entry"),
    (b'{"format":1,"blobs":[],"artifacts":[{"binaries":[{"blob":NaN}]}]}', "not valid JSON"),
])
def test_hostile_manifest_json_is_a_bundle_error(body, match):
    with pytest.raises(BundleError, match=match):
        Bundle.from_bytes(_forged(body))


def test_wrong_json_shapes_in_artifact_fields_are_bundle_errors(seeds):
    manifest = fz.manifest_of(seeds.bundle)
    for field, value in [("abi", "x"), ("abi", [[1]]), ("launch", [1]), ("provenance", 3), ("binaries", [[0]]),
                         ("name", {"a": 1}), ("launch", {"grid": {"x": 1}})]:
        m = json.loads(json.dumps(manifest))
        m["artifacts"][0][field] = value
        with pytest.raises(BundleError):
            Bundle.from_bytes(fz.forge(seeds.bundle, fz.encode(m)))


@pytest.mark.parametrize("field", [b"1a3       ", b"\xff\xfe12      ", b"-60       ", b"          "])
def test_a_garbled_ar_member_size_is_a_bundle_error(seeds, tmp_path, field):
    lib = bytearray(seeds.static)
    lib[8 + 48:8 + 58] = field  # the first member's decimal size (ValueError / UnicodeDecodeError escaped)
    (tmp_path / "x.a").write_bytes(bytes(lib))
    with pytest.raises(BundleError, match="malformed ar member header|truncated ar archive|no kernelpack bundle"):
        read_embedded_bundle(tmp_path / "x.a")


@pytest.mark.parametrize("entsize", [0, 1, 39])
def test_a_tiny_elf_section_header_size_is_a_bundle_error(seeds, tmp_path, entsize):
    lib = bytearray(seeds.shared)
    struct.pack_into("<H", lib, 0x3A, entsize)  # e_shentsize (struct.error escaped)
    (tmp_path / "x.so").write_bytes(bytes(lib))
    with pytest.raises(BundleError, match="ELF section table"):
        read_embedded_bundle(tmp_path / "x.so")
