"""The C runtime's zlib decoder (csrc/kp_inflate.c), which expands the compressed binaries of a built library on
first load, against Python's zlib: every block type (stored, fixed, dynamic Huffman) at every level, real cubins
and PTX, odd sizes; and damaged streams (flipped bits, truncation, a wrong expected size, a bad header) are
refused, never read or written out of bounds (AddressSanitizer + UBSan)."""

from __future__ import annotations

import random
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from fake_cuda import fnv1a
from kernelpack.clib.generate import _csrc
from toolchain_support import CC, CXX, cuda_compiler_available

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    d = tmp_path_factory.mktemp("inflate")
    (d / "kp_inflate.c").write_text(_csrc("kp_inflate.c"))
    exe = d / "inflate"
    flags = ["-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
             f"-I{d}"]
    subprocess.run([CXX, "-x", "c++", "-std=c++17", *flags, "-fsyntax-only", str(HERE / "inflate_harness.c")],
                   check=True)  # the decoder is valid C++17 too
    subprocess.run([CC, "-std=c99", *flags, str(HERE / "inflate_harness.c"), "-o", str(exe)], check=True)
    return exe


def run(exe: Path, records: list[tuple[bytes, int]]) -> list[str]:
    stdin = b"".join(struct.pack("<II", len(z), n) + z for z, n in records)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    return out.stdout.decode().split("\n")[:-1]


@pytest.fixture(scope="module")
def binaries() -> list[bytes]:
    """Real cubins (sm_80, sm_90a) of the demo kernels; none where neither NVRTC nor nvcc is installed."""
    from kernelpack.cli.demo import compile_examples

    if not cuda_compiler_available():
        return []
    return sorted({b.data for a in compile_examples(("sm_80", "sm_90a")) for b in a.binaries})


def samples(binaries: list[bytes]) -> list[bytes]:
    rng = random.Random(1234)
    text = (HERE.parent / "src" / "kernelpack" / "csrc" / "kp_runtime.c").read_bytes()
    out = [b"x", b"\0" * 70000, bytes(range(256)) * 300, text, text[:1000], rng.randbytes(5000),
           bytes(rng.choice(b"ACGT") for _ in range(40000)), *binaries]
    out += [rng.randbytes(rng.randrange(1, 3000)) + text[: rng.randrange(0, 3000)] for _ in range(30)]
    return out


def test_decodes_what_zlib_encodes_at_every_level(harness, binaries):
    records, expect = [], []
    for data in samples(binaries):
        for level in range(10):  # 0: stored blocks; small inputs: fixed Huffman; larger: dynamic
            records.append((zlib.compress(data, level), len(data)))
            expect.append(f"ok {fnv1a(data)}")
        z = zlib.compressobj(9, zlib.DEFLATED, 15, 9, zlib.Z_FIXED)  # fixed Huffman codes throughout
        records.append((z.compress(data) + z.flush(), len(data)))
        expect.append(f"ok {fnv1a(data)}")
    assert run(harness, records) == expect


def test_damaged_streams_are_refused_without_out_of_bounds_access(harness, binaries):
    rng = random.Random(99)
    records = []
    for data in samples(binaries)[:12]:
        z = zlib.compress(data, 6)
        records += [(z, len(data) - 1), (z, len(data) + 1), (z[:-1], len(data)), (z[: len(z) // 2], len(data)),
                    (z + b"\0", len(data)), (b"\x78\x9d" + z[2:], len(data)), (b"\x79" + z[1:], len(data))]
        for _ in range(150):
            bad = bytearray(z)
            bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
            records.append((bytes(bad), len(data)))
    results = run(harness, records)
    # a flipped bit may leave a valid stream only if it lands in the unused bits of the last data byte, which
    # decodes to the same output; everything else must be refused (the Adler-32 trailer catches the rest)
    wrong = [r for r, (z, n) in zip(results, records) if r != "err" and r.split()[1] != fnv1a(zlib.decompress(z)[:n])]
    assert not wrong
    assert results.count("err") > 0.9 * len(records)


@pytest.mark.parametrize("size", [1, 4096, 100_000])
def test_random_garbage_is_refused(harness, size):
    rng = random.Random(size)
    records = [(b"\x78\x9c" + rng.randbytes(size), size * 2) for _ in range(50)]
    assert set(run(harness, records)) == {"err"}
