"""Hand-made fatbins and compressed payloads for the decoders' limits (tests/test_fatbin_limits.py, the ``zstd`` and
``lz4`` targets of scripts/fuzz.py, scripts/fatbin_bombs.py): a fatbin writer, a zstd frame writer (raw, RLE and
compressed blocks; sequences with RLE-mode tables, whose bits are only the extra bits, so any sequence is easy to
spell) and the bombs and lenient inputs of issue 25 item 2, each as it was reported."""

from __future__ import annotations

import struct
from collections.abc import Sequence

FATBIN_MAGIC = 0xBA55ED50
ZSTD_MAGIC = 0xFD2FB528
LZ4, ZSTD = 0x2000, 0x8000
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")


def fatbin(entries: Sequence[tuple[bytes, int, int]], kind: int = 1, sm: int = 90) -> bytes:
    """A fatbin container of ``(payload, flags, uncompressed size)`` entries (PTX for sm_90 by default)."""
    body = b""
    for payload, flags, usize in entries:
        padded = payload + bytes(-len(payload) % 8)
        body += _ENTRY.pack(kind, 0x0101, _ENTRY.size, len(padded), len(payload) if flags else 0, 0, 0, 8, sm, 0, 0,
                            flags | 0x11, 0, usize) + padded
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


# ------------------------------------------------------------------------------------------------ zstd frames


def frame(blocks: Sequence[bytes], *, size: int | None = None, window_log: int | None = None, mantissa: int = 0,
          checksum: bytes | None = None) -> bytes:
    """A zstd frame: single segment (the window is the content) unless ``window_log`` is given; ``size`` the content
    size field (8 bytes), if any; ``checksum`` its 4 bytes, if any. ``blocks``: from :func:`block`."""
    single = window_log is None
    fcs_flag = 3 if size is not None else 0
    if single and size is None:
        raise ValueError("a single-segment frame states its size")
    fhd = fcs_flag << 6 | single << 5 | (checksum is not None) << 2
    head = struct.pack("<IB", ZSTD_MAGIC, fhd)
    if not single:
        assert window_log is not None
        head += bytes([(window_log - 10) << 3 | mantissa])
    if size is not None:
        head += struct.pack("<Q", size)
    return head + b"".join(blocks) + (checksum or b"")


def block(kind: str, body: bytes = b"", *, last: bool = False, rle_size: int = 0) -> bytes:
    """A block header and body: ``raw`` (body), ``rle`` (one byte repeated ``rle_size`` times), ``compressed``."""
    code = {"raw": 0, "rle": 1, "compressed": 2}[kind]
    size = rle_size if kind == "rle" else len(body)
    return (size << 3 | code << 1 | last).to_bytes(3, "little") + body


def raw_literals(data: bytes) -> bytes:
    """A literals section holding ``data`` as is (sizes below 4096)."""
    n = len(data)
    return (bytes([n << 3]) if n < 32 else (n << 4 | 0b0100).to_bytes(2, "little")) + data


def sequences(seqs: Sequence[tuple[int, int, int, int]], count: int | None = None) -> bytes:
    """A sequences section of ``(literal length code, offset code, match length code, offset extra bits)``: every
    sequence shares the first one's three codes (RLE-mode tables), so the bitstream holds only the offsets' extra bits
    (codes with extra bits of their own for literal or match lengths are not spelled). ``count`` overrides the stated
    number of sequences (the bitstream still holds ``len(seqs)``)."""
    n = len(seqs) if count is None else count
    head = bytes([n]) if n < 128 else (bytes([(n >> 8) + 128, n & 255]) if n < 0x7F00 else
                                       b"\xff" + struct.pack("<H", n - 0x7F00))
    ll, of, ml, _ = seqs[0]
    bits, width = 1, 0  # the end marker, then each sequence's offset bits below it (the first sequence's highest)
    for _, of_code, _, extra in seqs:
        bits, width = bits << of_code | extra, width + of_code
    return head + bytes([0b01010100, ll, of, ml]) + bits.to_bytes(width // 8 + 1, "little")


def offset_sequence(offset: int) -> tuple[int, int, int, int]:
    """One sequence: no literals, a match of 3 bytes at ``offset`` (> 0) back."""
    value = offset + 3
    code = value.bit_length() - 1
    return 0, code, 0, value - (1 << code)


# ------------------------------------------------------------------------------------------------ the inputs


def rle_bomb(blocks: int, block_size: int = (1 << 21) - 1) -> tuple[bytes, int]:
    """A frame of ``blocks`` RLE blocks of ``block_size`` bytes each (above the format's 128 KiB block maximum by
    default), and the size it claims."""
    total = blocks * block_size
    body = [block("rle", b"\0", rle_size=block_size, last=i == blocks - 1) for i in range(blocks)]
    return frame(body, size=total), total


def zero_bit_sequences_block(count: int = 98_047, last: bool = False) -> bytes:
    """A 12-byte compressed block declaring ``count`` sequences of 3 bytes at repeat offset 1 that cost no bits (the
    issue's: the most a sequences header can state, 98,047, three times the format's 128 KiB block maximum)."""
    return block("compressed", b"\x00" + sequences([(0, 0, 0, 0)], count), last=last)


def rle_literals_block(n: int = 1 << 17, last: bool = False) -> bytes:
    """A compressed block of 8 bytes whose literals are one byte repeated ``n`` times, and no sequences."""
    return block("compressed", (n << 4 | 0b1101).to_bytes(3, "little") + b"L\x00", last=last)


def cpu_bomb(blocks: int, per_block: int = 98_047, window_log: int | None = None) -> tuple[bytes, int]:
    """A frame of 8 raw bytes, then ``blocks`` zero-bit-sequence blocks; and the size it expands to. With
    ``per_block=43_690, window_log=17`` every block is within the format's limits (131,070 bytes from 12)."""
    body = [block("raw", b"abcdefgh")] + [zero_bit_sequences_block(per_block, i == blocks - 1) for i in range(blocks)]
    size = 8 + blocks * per_block * 3
    return frame(body, size=size, window_log=window_log), size


_MIB2 = (2 << 20) - 1  # the largest block size a block header holds


def lenient_zstd() -> dict[str, tuple[bytes, int]]:
    """What the hand-written decoder accepted and libzstd refuses: name -> (frame, size)."""
    text = bytes(range(32, 127)) * 4000  # 380,000 bytes
    history = [block("raw", text[i:i + 1000]) for i in range(0, 300_000, 1000)]
    far = offset_sequence(200_000)  # past a 1 KiB window, and past what libzstd's streaming decoder keeps
    return {
        "trailing bytes after a 0-sequence block": (
            frame([block("compressed", raw_literals(b"hello") + b"\x00" + b"junk", last=True)], size=5,
                  window_log=10), 5),
        "a 2 MiB RLE block in a 1 KiB window": (
            frame([block("raw", text[:1000]), block("rle", b"z", rle_size=_MIB2, last=True)], window_log=10,
                  size=1000 + _MIB2), 1000 + _MIB2),
        "a 1.5 TiB window": (frame([block("raw", b"tiny", last=True)], window_log=40, mantissa=4), 4),
        "a match offset beyond the window": (
            frame([*history, block("compressed", raw_literals(b"") + sequences([far]), last=True)], window_log=10),
            300_003),
        "a truncated skippable frame": (
            frame([block("raw", b"data", last=True)], size=4) + struct.pack("<II", 0x184D2A50, 100) + bytes(10), 4),
    }


def lenient_lz4() -> dict[str, tuple[bytes, int]]:
    """What the hand-written LZ4 decoder accepted and liblz4 refuses (or a strict reading of the block format does)."""
    return {
        "a token announcing a match with no offset": (bytes([0x1F]) + b"a", 1),
        "a match into the last 5 bytes": (  # 13 literals, a match of 19 at offset 1 ending 4 bytes before the end
            bytes([0xDF]) + b"abcdefghijklm" + b"\x01\x00\x00" + bytes([0x40]) + b"wxyz", 36),
        "an empty block": (b"", 0),
    }
