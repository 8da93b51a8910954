"""The LZ4 block and zstd frame decoders (the libraries and the pure-Python fallback, every test with both) against
the reference tools' output (the lz4 and zstd CLIs, where installed), on data shaped to reach every block and table
mode; malformed input only ever raises DecompressError."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
from collections.abc import Iterator

import pytest

from kernelpack.core.errors import DecompressError
from kernelpack.frontends.prebuilt.decompress import decoders, library, lz4_block, xxh64, zstd

ZSTD = shutil.which("zstd")
LZ4 = shutil.which("lz4")


def _samples() -> dict[str, bytes]:
    rng = random.Random(7)
    words = [b"ld.global.f32 ", b"%r", b"add.s32 ", b"\n", b"mov.u64 ", b"{", b"}", b";"]
    text = b"".join(rng.choice(words) + str(rng.randrange(100)).encode() for _ in range(40000))
    return {
        "empty": b"",
        "one byte": b"a",
        "one run": b"x" * 300_000,  # RLE blocks
        "random": rng.randbytes(70_000),  # raw blocks
        "text": text,  # Huffman literals (4 streams), FSE sequences, repeat tables across blocks
        "mixed": b"".join(rng.choice([b"abc", rng.randbytes(5), b"\0" * 30, b"hello world "]) for _ in range(30000)),
        "short literals": bytes(range(256)) * 3,  # a direct (4-bit) Huffman table description
    }


SAMPLES = _samples()


@pytest.fixture(autouse=True, params=["library", "python"])
def decoder(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test runs against both decoders: zstandard / lz4 where installed, and the pure-Python fallback."""
    if request.param == "library" and (library("zstd") is None or library("lz4") is None):
        pytest.skip("zstandard / lz4 not installed (pip install 'kernelpack[prebuilt]')")
    with decoders(request.param):
        yield request.param


def _zstd_cli(data: bytes, *args: str) -> bytes:
    assert ZSTD is not None
    return subprocess.run([ZSTD, "-c", "-q", *args], input=data, capture_output=True, check=True).stdout


@pytest.mark.skipif(ZSTD is None, reason="no zstd command to make reference frames")
@pytest.mark.parametrize("name", list(SAMPLES))
@pytest.mark.parametrize("level", ["--fast=5", "-1", "-3", "-9", "-19", "--ultra -22 --long=27"])
def test_zstd_decodes_what_the_reference_encoder_wrote(name: str, level: str) -> None:
    data = SAMPLES[name]
    frame = _zstd_cli(data, *level.split())
    assert zstd(frame, len(data)) == data


@pytest.mark.skipif(ZSTD is None, reason="no zstd command to make reference frames")
def test_zstd_frames_with_and_without_size_several_frames_and_skippable_frames(tmp_path) -> None:
    a, b = SAMPLES["text"][:50_000], SAMPLES["mixed"][:20_000]
    streamed = _zstd_cli(a, "--no-check", "-3")  # from a pipe: no content size, a window descriptor
    (tmp_path / "b").write_bytes(b)
    assert ZSTD is not None
    sized = subprocess.run([ZSTD, "-c", "-q", "-19", str(tmp_path / "b")], capture_output=True, check=True).stdout
    assert sized[4] & 0xC0 or sized[4] & 0x20, "a file's frame states its size"
    skippable = struct.pack("<II", 0x184D2A53, 5) + b"hello"
    assert zstd(streamed + skippable + sized, len(a) + len(b)) == a + b


@pytest.mark.skipif(ZSTD is None, reason="no zstd command to make reference frames")
def test_zstd_refuses_output_past_the_limit_and_a_bad_checksum() -> None:
    data = SAMPLES["text"][:10_000]
    frame = _zstd_cli(data, "-3")
    with pytest.raises(DecompressError, match="9999"):
        zstd(frame, 9999)
    bad = bytearray(frame)
    bad[-1] ^= 0xFF  # the checksum's last byte
    with pytest.raises(DecompressError, match="checksum"):
        zstd(bytes(bad), len(data))


@pytest.mark.skipif(ZSTD is None, reason="no zstd command to make reference frames")
def test_garbled_zstd_raises_decompress_error_only() -> None:
    rng = random.Random(3)
    frame = _zstd_cli(SAMPLES["text"][:40_000], "-9", "--no-check")
    for _ in range(300):
        bad = bytearray(frame[:rng.randrange(len(frame))] if rng.random() < 0.3 else frame)
        for _ in range(rng.randrange(1, 4)):
            if bad:
                bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
        try:
            zstd(bytes(bad), 40_000)
        except DecompressError:
            pass


def test_zstd_refuses_dictionaries_reserved_bits_and_bad_magic() -> None:
    with pytest.raises(DecompressError, match="dictionary"):
        zstd(struct.pack("<I", 0xFD2FB528) + bytes([0x21, 0x05]) + b"\0" * 8, 100)
    with pytest.raises(DecompressError, match="reserved"):
        zstd(struct.pack("<I", 0xFD2FB528) + bytes([0x28]) + b"\0" * 8, 100)
    with pytest.raises(DecompressError, match="bad frame magic"):
        zstd(b"\x28\xb5\x2f\xfe" + b"\0" * 8, 100)
    with pytest.raises(DecompressError, match="truncated"):
        zstd(struct.pack("<I", 0xFD2FB528), 100)


def _lz4_blocks(frame: bytes) -> list[tuple[bytes, bool]]:
    """The blocks of an LZ4 frame (as the lz4 CLI writes it): (data, stored uncompressed)."""
    assert struct.unpack_from("<I", frame)[0] == 0x184D2204
    flg = frame[4]
    pos = 7 + (8 if flg & 0x08 else 0)
    out = []
    while True:
        size = struct.unpack_from("<I", frame, pos)[0]
        pos += 4
        if size == 0:
            return out
        n = size & 0x7FFFFFFF
        out.append((frame[pos:pos + n], bool(size >> 31)))
        pos += n + (4 if flg & 0x10 else 0)


@pytest.mark.skipif(LZ4 is None, reason="no lz4 command to make reference blocks")
@pytest.mark.parametrize("name", [n for n in SAMPLES if SAMPLES[n]])
@pytest.mark.parametrize("level", ["-1", "-9", "--fast=3"])
def test_lz4_decodes_blocks_of_the_reference_encoder(name: str, level: str) -> None:
    data = SAMPLES[name][:3_000_000]
    frame = subprocess.run([LZ4, "-c", "-q", "-B4", "-BI", "--no-frame-crc", level], input=data, capture_output=True,
                           check=True).stdout
    got = b""
    for block, raw in _lz4_blocks(frame):
        got += block if raw else lz4_block(block, min(64 * 1024, len(data) - len(got)))
    assert got == data


def test_lz4_handles_overlapping_matches_and_long_lengths_and_refuses_garbage() -> None:
    # "ab" then a match of 19 bytes at offset 2 (overlapping), then the literals "cdefgh" (a block ends with at least
    # 5 literals)
    block = bytes([0x2F, *b"ab", 2, 0, 0, 0x60, *b"cdefgh"])
    assert lz4_block(block, 2 + 19 + 6) == b"ab" * 10 + b"a" + b"cdefgh"
    long_lits = bytes([0xF0, 255, 10]) + b"z" * (15 + 255 + 10)
    assert lz4_block(long_lits, 280) == b"z" * 280
    for bad, size in [(bytes([0x10, *b"a", 5, 0]), 10), (bytes([0x10, *b"a", 0, 0]), 10), (bytes([0x50, *b"ab"]), 5),
                      (bytes([0xF0, 255]), 300), (bytes([0x10, *b"a", 1]), 10), (b"\x10a", 5)]:
        with pytest.raises(DecompressError):
            lz4_block(bad, size)


def test_xxh64_known_values() -> None:
    assert xxh64(b"") == 0xEF46DB3751D8E999
    assert xxh64(b"abc") == 0x44BC2CF5AD770999
    assert xxh64(b"Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1
