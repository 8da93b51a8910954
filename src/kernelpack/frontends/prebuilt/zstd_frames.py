"""zstd frames read down to their block headers, without decoding a block (RFC 8878 section 3.1): the frame header
(window, content size, checksum flag; dictionaries refused), every block's kind and size, skippable frames. Both zstd
decoders (libzstd through ``zstandard``, and :mod:`kernelpack.frontends.prebuilt.zstd_blocks`) start here, so the
format's limits are
checked once, before any output is allocated: a block holds at most ``Block_Maximum_Size = min(Window_Size, 128 KiB)``
bytes (its stored size, and for raw and RLE blocks what it expands to), a window is at most :data:`MAX_WINDOW`, frames
end where their last block (and checksum) does, the content sizes frames state add up to the size expected, and the
sequences compressed blocks state stay within what real data of the input's size states (:data:`SEQUENCES_PER_BYTE`)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ...core.errors import DecompressError

MAGIC = 0xFD2FB528
BLOCK_MAX = 128 << 10
MAX_WINDOW = 1 << 27  # libzstd's default limit (ZSTD_WINDOWLOG_LIMIT_DEFAULT) and the zstd CLI's
RAW, RLE, COMPRESSED = 0, 1, 2
# The sequences the blocks of one input may state, read from their headers before anything is decoded: real data
# (nvcc's fatbins, libzstd at levels -5 to 22) states at most 0.66 per input byte; each costs libzstd a few ns and
# the pure-Python decoder a few us, so this bounds both decoders' work by the input's size.
SEQUENCES_PER_BYTE = 4
SEQUENCES_BASE = 1 << 13


@dataclass(frozen=True)
class Block:
    kind: int  # RAW | RLE | COMPRESSED
    start: int  # where its content starts in the input
    size: int  # bytes of content in the input (1 for RLE)
    regen: int  # what it expands to: exact for raw and RLE blocks, at most this for a compressed block
    sequences: int = 0  # what a compressed block's sequences section states (0 where its headers do not fit)


@dataclass(frozen=True)
class Frame:
    start: int
    end: int  # one past its last byte (checksum included)
    window: int  # Window_Size (the content size for a single-segment frame)
    size: int | None  # Frame_Content_Size, when stated
    checksum: int | None  # the low 32 bits of the content's XXH64, when present
    blocks: tuple[Block, ...]

    @property
    def block_max(self) -> int:
        return min(self.window, BLOCK_MAX)


def frames(src: bytes, size: int, need_size: bool = False) -> list[Frame]:
    """The zstd frames of ``src`` (skippable frames left out), checked to expand to exactly ``size`` bytes as far as
    their headers tell. ``need_size``: every frame must state its content size (nvcc's always do)."""
    out: list[Frame] = []
    pos = stated = sequences = 0
    most = SEQUENCES_PER_BYTE * len(src) + SEQUENCES_BASE
    while pos < len(src):
        magic = _le(src, pos, 4, "frame magic")
        if 0x184D2A50 <= magic <= 0x184D2A5F:
            end = pos + 8 + _le(src, pos + 4, 4, "skippable frame size")
            if end > len(src):
                raise DecompressError(f"zstd: the skippable frame at byte {pos} runs {end - len(src)} bytes past the "
                                      f"input's end")
            pos = end
            continue
        if magic != MAGIC:
            raise DecompressError(f"zstd: bad frame magic 0x{magic:08x} at byte {pos}")
        f = _frame(src, pos, size - stated)
        if need_size and f.size is None:
            raise DecompressError(f"zstd: the frame at byte {pos} does not state its content size")
        stated += f.size if f.size is not None else sum(b.regen for b in f.blocks if b.kind != COMPRESSED)
        if stated > size:
            raise DecompressError(f"zstd: the frames expand to more than the {size} bytes expected")
        sequences += sum(b.sequences for b in f.blocks)
        if sequences > most:
            raise DecompressError(f"zstd: the blocks state {sequences} sequences or more, above the {most} allowed "
                                  f"for {len(src)} bytes of input ({SEQUENCES_PER_BYTE} per byte; real data states "
                                  f"less than 1)")
        out.append(f)
        pos = f.end
    if stated < size and all(f.size is not None for f in out):
        raise DecompressError(f"zstd: the frames hold {stated} bytes, {size} expected")
    return out


def _frame(src: bytes, start: int, room: int) -> Frame:
    pos = start + 4
    fhd = _le(src, pos, 1, "frame header")
    pos += 1
    single, checksum, dict_len = fhd >> 5 & 1, fhd >> 2 & 1, (0, 1, 2, 4)[fhd & 3]
    if fhd & 0x08:
        raise DecompressError(f"zstd: reserved bit set in the frame header at byte {start}")
    window = 0
    if not single:
        wd = _le(src, pos, 1, "window descriptor")
        pos += 1
        base = 1 << (10 + (wd >> 3))
        window = base + (base >> 3) * (wd & 7)
    if _le(src, pos, dict_len, "dictionary id"):
        raise DecompressError("zstd: frames that need a dictionary are not supported")
    pos += dict_len
    fcs_len = (1 if single else 0, 2, 4, 8)[fhd >> 6]
    size = _le(src, pos, fcs_len, "content size") + (256 if fcs_len == 2 else 0) if fcs_len else None
    pos += fcs_len
    if size is not None and size > room:
        raise DecompressError(f"zstd: the frame at byte {start} holds {size} bytes, more than the {room} expected")
    if single:
        window = size or 0  # a single-segment frame always states its size (fcs_len >= 1): its window
    if window > MAX_WINDOW:
        raise DecompressError(f"zstd: the frame at byte {start} needs a window of {window} bytes, more than the "
                              f"{MAX_WINDOW} allowed")
    blocks, pos = _blocks(src, pos, min(window, BLOCK_MAX), room if size is None else size)
    crc = None
    if checksum:
        crc = _le(src, pos, 4, "content checksum")
        pos += 4
    return Frame(start, pos, window, size, crc, tuple(blocks))


def _blocks(src: bytes, pos: int, block_max: int, room: int) -> tuple[list[Block], int]:
    out: list[Block] = []
    known = 0
    while True:
        head = _le(src, pos, 3, "block header")
        last, kind, bsize = head & 1, head >> 1 & 3, head >> 3
        pos += 3
        if kind == 3:
            raise DecompressError(f"zstd: reserved block type at byte {pos - 3}")
        if bsize > block_max:
            raise DecompressError(f"zstd: the block at byte {pos - 3} holds {bsize} bytes, more than the frame's "
                                  f"block maximum of {block_max}")
        stored = 1 if kind == RLE else bsize
        if pos + stored > len(src):
            raise DecompressError(f"zstd: the block at byte {pos - 3} runs past the input's end")
        if kind != COMPRESSED:
            known += bsize
            if known > room:
                raise DecompressError(f"zstd: the blocks expand to more than the {room} bytes expected")
            out.append(Block(kind, pos, stored, bsize))
        else:
            n = _sequence_count(src, pos, pos + bsize)
            if 3 * n > block_max:  # every sequence adds a match of 3 bytes or more
                raise DecompressError(f"zstd: the block at byte {pos - 3} states {n} sequences, more than a block of "
                                      f"at most {block_max} bytes can hold ({block_max // 3})")
            out.append(Block(kind, pos, stored, block_max, n))
        pos += stored
        if last:
            return out, pos


def _sequence_count(src: bytes, pos: int, end: int) -> int:
    """The number of sequences the compressed block ``src[pos:end]`` states: past its literals section (raw, RLE or
    Huffman-coded, its size in its header), the sequences header. 0 where the headers do not fit the block (the
    decoders refuse it)."""
    if pos >= end:
        return 0
    kind, fmt = src[pos] & 3, src[pos] >> 2 & 3
    hsize, bits = ((1, 0), (2, 0), (1, 0), (3, 0))[fmt] if kind < 2 else ((3, 10), (3, 10), (4, 14), (5, 18))[fmt]
    if pos + hsize > end:
        return 0
    hv = int.from_bytes(src[pos:pos + hsize], "little")
    if kind == 0:  # raw literals: their bytes follow the header
        at = pos + hsize + (hv >> (3 if hsize == 1 else 4))
    else:  # RLE: one byte; Huffman-coded: the compressed size the header states
        at = pos + hsize + (1 if kind == 1 else hv >> (4 + bits) & ((1 << bits) - 1))
    if at >= end:
        return 0
    b0 = src[at]
    if b0 < 128:
        return b0
    if b0 < 255:
        return ((b0 - 128) << 8) + src[at + 1] if at + 1 < end else 0
    return int.from_bytes(src[at + 1:at + 3], "little") + 0x7F00 if at + 2 < end else 0


def _le(src: bytes, pos: int, n: int, what: str) -> int:
    if pos + n > len(src):
        raise DecompressError(f"zstd: truncated {what} at byte {pos}")
    return int.from_bytes(src[pos:pos + n], "little")


# ------------------------------------------------------------------------------------------------ XXH64

_M64 = (1 << 64) - 1
_P1, _P2, _P3 = 11400714785074694791, 14029467366897019727, 1609587929392839161
_P4, _P5 = 9650029242287828579, 2870177450012600261


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, lane: int) -> int:
    return _rotl((acc + lane * _P2) & _M64, 31) * _P1 & _M64


def xxh64(data: bytes | bytearray | memoryview, seed: int = 0) -> int:
    """XXH64 of ``data`` (zstd's content checksum is its low 32 bits). The stripe loop is kept to plain arithmetic
    on locals (~3x the straightforward version's speed)."""
    n, p = len(data), 0
    if n >= 32:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _M64, (seed + _P2) & _M64, seed, (seed - _P1) & _M64
        m, p1, p2 = _M64, _P1, _P2
        for a, b, c, d in struct.iter_unpack("<4Q", memoryview(data)[:n - n % 32]):
            v1 = (v1 + a * p2) & m
            v1 = ((v1 << 31 | v1 >> 33) & m) * p1 & m
            v2 = (v2 + b * p2) & m
            v2 = ((v2 << 31 | v2 >> 33) & m) * p1 & m
            v3 = (v3 + c * p2) & m
            v3 = ((v3 << 31 | v3 >> 33) & m) * p1 & m
            v4 = (v4 + d * p2) & m
            v4 = ((v4 << 31 | v4 >> 33) & m) * p1 & m
        p = n - n % 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M64
        for a in (v1, v2, v3, v4):
            h = ((h ^ _round(0, a)) * _P1 + _P4) & _M64
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while p + 8 <= n:
        h = (_rotl(h ^ _round(0, struct.unpack_from("<Q", data, p)[0]), 27) * _P1 + _P4) & _M64
        p += 8
    if p + 4 <= n:
        h = (_rotl(h ^ (struct.unpack_from("<I", data, p)[0] * _P1 & _M64), 23) * _P2 + _P3) & _M64
        p += 4
    while p < n:
        h = _rotl(h ^ (data[p] * _P5 & _M64), 11) * _P1 & _M64
        p += 1
    h = (h ^ (h >> 33)) * _P2 & _M64
    h = (h ^ (h >> 29)) * _P3 & _M64
    return h ^ (h >> 32)
