"""The fatbin decoders' limits (issue 25 item 2), each with both decoders -- the libraries (zstandard, lz4) and the
pure-Python fallback: decompression bombs are refused before any output is allocated, the fallback's work stops on a
budget proportional to its input, what the reference decoders refuse is refused, every failure is a FatbinError
(an allocation too), and mutated and generated data decode as libzstd and liblz4 decode them.

Memory is held by an address-space cap (RLIMIT_AS) and hangs by a time box (fuzz_support.bounded), in the process or
in a child process for the command line; no assertion is on time."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import fatbin_bombs as fb
import fuzz_decoders as fd
import fuzz_support as fz
from kernelpack import prebuilt
from kernelpack.core.errors import CubinError, DecompressError
from kernelpack.frontends.prebuilt import zstd_blocks, zstd_frames
from kernelpack.frontends.prebuilt.decompress import LZ4_MAX_RATIO, ZSTD_MAX_RATIO, decoders, lz4_block, zstd
from kernelpack.frontends.prebuilt.fatbin import FatbinError, read_fatbin

HEADROOM = 64 << 20  # address space a refusal may add
SAMPLE_TEXT = b"".join(b"ld.global.f32 %r" + str(i % 97).encode() + b", [%rd" + str(i % 13).encode() + b"];\n"
                       for i in range(4000))


def zstandard_frame(data: bytes) -> bytes:
    """``data`` as libzstd compresses it (level 3); pytest.skip without zstandard."""
    zstandard = pytest.importorskip("zstandard")
    return bytes(zstandard.ZstdCompressor(level=3).compress(data))


@pytest.fixture(params=["library", "python"])
def decoder(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "library" and not fd.available():
        pytest.skip("zstandard / lz4 not installed (pip install 'kernelpack[prebuilt]')")
    with decoders(request.param):
        yield request.param


def _one_entry(frame: bytes, size: int, flags: int = fb.ZSTD) -> bytes:
    return fb.fatbin([(frame, flags, size)])


# ------------------------------------------------------------------------------------------------ memory


@pytest.mark.parametrize("blocks, claim", [(500, "1048575500"), (2048, "4294965248")])
def test_a_small_fatbin_claiming_gibibytes_is_refused_before_anything_is_allocated(decoder: str, blocks: int,
                                                                                   claim: str) -> None:
    """2 KiB claiming 1 GiB (reached 2 GiB of memory) and 8 KiB claiming 4 GiB (peaked near 8 GiB): more than zstd
    can expand those bytes to, whatever the blocks say."""
    frame, size = fb.rle_bomb(blocks)
    data = _one_entry(frame, min(size, 4 << 30))
    with fz.bounded(10, HEADROOM), pytest.raises(FatbinError, match=(
            rf"k\.fatbin: entry 1 \(byte 16\): its header says {len(frame)} zstd-compressed bytes expand to {claim} "
            rf"bytes, more than zstd can expand them to \({ZSTD_MAX_RATIO} times")):
        read_fatbin(data, "k.fatbin")
    with fz.bounded(10, HEADROOM), pytest.raises(CubinError, match="more than zstd can expand them to"):
        prebuilt.compile(data, {"k": "int n"})


def test_rle_blocks_past_the_block_maximum_are_refused_before_they_are_written(decoder: str) -> None:
    """64 RLE blocks of 2 MiB after 4 KiB of raw data, in a frame with a 128 MiB window: within zstd's ratio for
    their size, but a block holds at most 128 KiB (before: each was written whole)."""
    blocks = [fb.block("raw", bytes(4096))] + [fb.block("rle", b"z", rle_size=(2 << 20) - 1, last=i == 63)
                                              for i in range(64)]
    frame = fb.frame(blocks, window_log=27)
    with fz.bounded(10, HEADROOM), pytest.raises(DecompressError, match=(
            r"the block at byte 4105 holds 2097151 bytes, more than the frame's block maximum of 131072")):
        zstd(frame, 4096 + 64 * ((2 << 20) - 1))


def test_a_frame_stating_no_size_is_stopped_at_the_size_expected(decoder: str) -> None:
    """2,000 compressed blocks of 128 KiB of RLE literals (262 MB from 16 KB) in a frame that states no content size,
    200,000 bytes expected: libzstd would decode them all (its buffer is its window), so it is fed a block at a time
    and stopped."""
    frame = fb.frame([fb.rle_literals_block(last=i == 1999) for i in range(2000)], window_log=17)
    with fz.bounded(30, HEADROOM), pytest.raises(DecompressError, match="expands past the 200000 bytes expected"):
        zstd(frame, 200_000)


def test_the_entries_of_one_file_expand_to_the_limit_together(decoder: str) -> None:
    """Each entry may be within the limit and all of them not: the total is held too (KERNELPACK_MAX_FILE_BYTES)."""
    frame, size = fb.rle_bomb(4, 1 << 17)  # 512 KiB of valid RLE blocks
    data = fb.fatbin([(frame, fb.ZSTD, size)] * 3, kind=2)  # cubins (PTX would lose its trailing NULs)
    assert [len(e.data) for e in read_fatbin(data, "k.fatbin", limit=3 * size)] == [size] * 3
    with pytest.raises(FatbinError, match=(r"entry 3 \(byte 208\): its zstd-compressed payload expands to 512\.0 KiB "
                                           r"\(524288 bytes\), past the 1\.5 MiB \(1572863 bytes\) the compressed "
                                           r"entries of one file may expand to together \(1\.0 MiB \(1048576 bytes\) "
                                           r"so far; KERNELPACK_MAX_FILE_BYTES\)")):
        read_fatbin(data, "k.fatbin", limit=3 * size - 1)


def test_an_allocation_that_fails_is_a_fatbin_error(decoder: str) -> None:
    """256 MiB from 8 KiB of 128 KiB RLE blocks is valid zstd; with less memory than that it is refused, naming the
    entry and the size (before: a bare MemoryError)."""
    size = 2040 << 17
    frame = fb.frame([fb.block("rle", b"a", rle_size=1 << 17, last=i == 2039) for i in range(2040)], size=size,
                     window_log=17)
    with fz.bounded(10, HEADROOM), pytest.raises(FatbinError, match=(
            rf"k\.fatbin: entry 1 \(byte 16\): cannot (allocate the {size} bytes it expands to|expand its "
            rf"zstd-compressed payload: zstd: cannot allocate the {size} bytes)")):
        read_fatbin(_one_entry(frame, size, fb.ZSTD), "k.fatbin")


def test_the_output_is_allocated_once_and_handed_on_without_a_copy(decoder: str) -> None:
    """64 MiB of valid RLE blocks decode within 1.5 times their size of address space (before: the output grew, then
    was copied: twice its size)."""
    size = 512 << 17
    frame = fb.frame([fb.block("rle", b"k", rle_size=1 << 17, last=i == 511) for i in range(512)], size=size,
                     window_log=17)
    with fz.bounded(30, size + size // 2):
        out = zstd(frame, size)
    assert len(out) == size and out[:1] == out[-1:] == b"k"


def test_prebuilt_reports_an_entry_too_large_for_the_memory_left_as_a_cubin_error(decoder: str) -> None:
    """127 MiB of valid PTX-kind data: decoded, its text is another 127 MiB; under a 200 MiB cap the prebuilt
    frontend names the file (before: MemoryError)."""
    size = 1016 << 17
    frame = fb.frame([fb.block("rle", b"a", rle_size=1 << 17, last=i == 1015) for i in range(1016)], size=size,
                     window_log=17)
    with fz.bounded(30, 200 << 20), pytest.raises(CubinError, match=(
            r"bytes #1(: not enough memory to read the binaries it holds|: entry 1 \(byte 16\): cannot expand)")):
        prebuilt.compile(_one_entry(frame, size), {"k": "int n"})


def test_the_command_line_reports_a_bomb_as_a_user_error(tmp_path: Path) -> None:
    """``kernelpack build`` of a [[cubin]] entry holding the 8 KiB fatbin claiming 4 GiB, under a 3 GiB address-space
    cap: one error line naming the file, the entry and the limit (before: a MemoryError traceback)."""
    frame, size = fb.rle_bomb(2048)
    (tmp_path / "k.fatbin").write_bytes(_one_entry(frame, min(size, 4 << 30)))
    (tmp_path / "kernelpack.toml").write_text('[library]\nname = "bomb"\narchs = ["sm_90a"]\n\n[[cubin]]\n'
                                              'files = ["k.fatbin"]\nkernels = { k = "int n" }\n')

    def cap() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    proc = subprocess.run([sys.executable, "-m", "kernelpack.cli", "build"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, preexec_fn=cap, env=dict(os.environ, KERNELPACK_CACHE_DIR="off"))
    assert proc.returncode == 1, proc.stderr
    assert "MemoryError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "k.fatbin: entry 1 (byte 16): its header says 8205 zstd-compressed bytes expand to 4294965248" in proc.stderr


# ------------------------------------------------------------------------------------------------ work


def _sequences_decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    counts: list[int] = []
    real = zstd_blocks._decode_sequences

    def counting(data: bytes, n: int, *tables: zstd_blocks.Fse) -> list[tuple[int, int, int]]:
        counts.append(n)
        return real(data, n, *tables)

    monkeypatch.setattr(zstd_blocks, "_decode_sequences", counting)
    return counts


def test_a_block_stating_more_sequences_than_it_can_hold_is_refused_unread(decoder: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's 12-byte block: 98,047 sequences that cost no bits, 294,141 bytes from one block (3.4 s per 137
    bytes before; ~175 KB of them took an hour). Each sequence adds at least 3 bytes: refused before one is read."""
    counts = _sequences_decoded(monkeypatch)
    frame, size = fb.cpu_bomb(10)
    with fz.bounded(10, HEADROOM), pytest.raises(DecompressError, match=(
            r"the block at byte 24 states 98047 sequences, more than a block of at most 131072 bytes can hold")):
        zstd(frame, size)
    assert counts == []


def test_the_sequences_of_an_input_are_bounded_by_its_size(decoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks within every limit of the format (43,690 zero-bit sequences, 131,070 bytes from 12 bytes): 175 KB of
    them state 637 million sequences (10 s of libzstd, hours of Python). Read from the block headers and refused
    before decoding: at most 4 per input byte (real data states less than 1)."""
    counts = _sequences_decoded(monkeypatch)
    frame, size = fb.cpu_bomb(400, 43_690, window_log=17)  # 4.8 KB
    most = zstd_frames.SEQUENCES_PER_BYTE * len(frame) + zstd_frames.SEQUENCES_BASE
    with fz.bounded(10, HEADROOM), pytest.raises(DecompressError, match=(
            rf"the blocks state \d+ sequences or more, above the {most} allowed for {len(frame)} bytes of input")):
        zstd(frame, size)
    assert counts == []
    frame, size = fb.cpu_bomb(1, 2000, window_log=17)  # a block of 2,000 such sequences is within it: decoded
    assert len(zstd(frame, size)) == size


def test_the_fallback_stops_on_its_work_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure-Python decoder's work (sequences, Huffman literals, table cells) is drawn from a budget of its
    input's size: with 1 unit per byte, real text stops halfway."""
    text = SAMPLE_TEXT
    frame = zstandard_frame(text)
    counts = _sequences_decoded(monkeypatch)
    monkeypatch.setattr(zstd_blocks, "WORK_PER_BYTE", 1)
    monkeypatch.setattr(zstd_blocks, "WORK_BASE", 0)
    with decoders("python"), pytest.raises(DecompressError, match=(
            rf"decoding needs more than the {len(frame)} units of work allowed for an input of this size")):
        zstd(frame, len(text))
    assert sum(counts) * zstd_blocks.SEQUENCE_COST <= len(frame)
    monkeypatch.undo()
    with decoders("python"):
        assert zstd(frame, len(text)) == text


def test_the_fallback_verifies_checksums_up_to_its_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pure-Python XXH64 costs ~60 s per GiB (~2 min before): the fallback verifies the first CHECKSUM_MAX bytes of
    content of a call's frames, libzstd every frame."""
    text = bytes(range(256)) * 8
    bad = fb.frame([fb.block("raw", text, last=True)], size=len(text), checksum=b"\0\0\0\0")
    monkeypatch.setattr(zstd_blocks, "CHECKSUM_MAX", len(text))
    with decoders("python"), pytest.raises(DecompressError, match="content checksum mismatch"):
        zstd(bad, len(text))
    monkeypatch.setattr(zstd_blocks, "CHECKSUM_MAX", len(text) - 1)
    with decoders("python"):
        assert zstd(bad, len(text)) == text
    if fd.available():
        with decoders("library"), pytest.raises(DecompressError, match="checksum"):
            zstd(bad, len(text))


# ------------------------------------------------------------------------------------------------ the format's rules

ZSTD_LENIENT = fb.lenient_zstd()
LZ4_LENIENT = fb.lenient_lz4()


@pytest.mark.parametrize("case", list(ZSTD_LENIENT))
def test_what_libzstd_refuses_is_refused(decoder: str, case: str) -> None:
    frame, size = ZSTD_LENIENT[case]
    assert not fd.available() or fd.reference("zstd", frame, size) is None
    with fz.bounded(10, 2 * size + HEADROOM), pytest.raises(DecompressError):
        zstd(frame, size)
    with fz.bounded(10, 2 * size + HEADROOM), pytest.raises(FatbinError, match="cannot expand|expand to"):
        read_fatbin(_one_entry(frame, size), "k.fatbin")


@pytest.mark.parametrize("case", [c for c in LZ4_LENIENT if "no offset" not in c])
def test_what_liblz4_refuses_is_refused(decoder: str, case: str) -> None:
    block, size = LZ4_LENIENT[case]
    assert not fd.available() or fd.reference("lz4", block, size) is None
    with pytest.raises(DecompressError):
        lz4_block(block, size)


def test_a_last_lz4_sequence_announcing_a_match_is_refused_by_the_fallback() -> None:
    """The block format's last sequence holds literals only; liblz4 ignores the match nibble of that last token (so
    the library decoder accepts it, with the same bytes), the fallback holds the rule."""
    block, size = LZ4_LENIENT["a token announcing a match with no offset"]
    with decoders("python"), pytest.raises(DecompressError, match="must hold literals only"):
        lz4_block(block, size)
    if fd.available():
        assert fd.reference("lz4", block, size) == b"a"
        with decoders("library"):
            assert lz4_block(block, size) == b"a"


def test_frames_and_blocks_at_the_format_limits(decoder: str) -> None:
    """Exactly 128 KiB in a block is allowed, one byte more is not; a window of 128 MiB is, the next one is not."""
    most = fb.frame([fb.block("rle", b"a", rle_size=1 << 17, last=True)], size=1 << 17)
    assert zstd(most, 1 << 17) == b"a" * (1 << 17)
    over = fb.frame([fb.block("rle", b"a", rle_size=(1 << 17) + 1, last=True)], size=(1 << 17) + 1)
    with pytest.raises(DecompressError, match="more than the frame's block maximum of 131072"):
        zstd(over, (1 << 17) + 1)
    assert zstd(fb.frame([fb.block("raw", b"w", last=True)], window_log=27), 1) == b"w"
    with pytest.raises(DecompressError, match="needs a window of 150994944 bytes, more than the 134217728 allowed"):
        zstd(fb.frame([fb.block("raw", b"w", last=True)], window_log=27, mantissa=1), 1)


def test_ratio_ceilings_are_the_formats_own(decoder: str) -> None:
    """What no zstd or LZ4 data can expand to is refused before decoding, by the module's API too."""
    frame, size = fb.rle_bomb(1, 1 << 17)
    assert len(zstd(frame, size)) == size
    with pytest.raises(DecompressError, match=rf"cannot expand to the {ZSTD_MAX_RATIO * len(frame) + 1} bytes"):
        zstd(frame, ZSTD_MAX_RATIO * len(frame) + 1)
    with pytest.raises(DecompressError, match=rf"{LZ4_MAX_RATIO} times the input's 3 bytes"):
        lz4_block(b"\x10a\x00", 3 * LZ4_MAX_RATIO + 1)


def test_a_fatbin_zstd_frame_must_state_its_content_size(decoder: str) -> None:
    """nvcc's frames always do; without it libzstd would size its own buffer from the window."""
    frame = fb.frame([fb.block("raw", b"data", last=True)], window_log=20)
    assert zstd(frame, 4) == b"data"
    with pytest.raises(FatbinError, match="does not state its content size"):
        read_fatbin(_one_entry(frame, 4), "k.fatbin")


# ------------------------------------------------------------------------------------------------ the references


@pytest.mark.skipif(not fd.available(), reason="zstandard / lz4 not installed (the reference decoders)")
@pytest.mark.parametrize("fmt", fd.FORMATS)
def test_mutated_and_generated_inputs_decode_as_the_reference_libraries_decode_them(fmt: str) -> None:
    """A reduced campaign (scripts/fuzz.py zstd lz4 runs the long one): no input accepted that the reference
    refuses, the same bytes where both accept."""
    with fz.bounded(60, 1 << 30):
        counts = fd.campaign(fmt, 400, seed=25)
    assert counts["agreed"] > 50 and counts["refused"] > 50, counts


def test_both_decoders_give_the_same_bytes_for_valid_frames_of_every_shape() -> None:
    if not fd.available():
        pytest.skip("zstandard / lz4 not installed")
    for fmt in fd.FORMATS:
        for src, size in fd.corpus()[fmt]:
            got = {d: fd.ours(fmt, src, size, d) for d in ("library", "python")}
            assert got["library"] == got["python"] == fd.reference(fmt, src, size), (fmt, size, src[:16].hex())


def test_a_skippable_frame_is_skipped_only_whole(decoder: str) -> None:
    frame = fb.frame([fb.block("raw", b"data", last=True)], size=4)
    skip = struct.pack("<II", 0x184D2A5F, 3) + b"xyz"
    assert zstd(skip + frame + skip, 4) == b"data"
    with pytest.raises(DecompressError, match="skippable frame at byte 0 runs 1 bytes past the input's end"):
        zstd(skip[:-1], 0)
