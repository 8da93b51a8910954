"""Differential fuzzing of kernelpack's zstd and LZ4 decoders against the reference libraries (libzstd through
``zstandard``, liblz4 through ``lz4``), shared by tests/test_fatbin_limits.py (a few hundred inputs) and the ``zstd``
and ``lz4`` targets of scripts/fuzz.py (campaigns).

Inputs are real compressed data -- the seed cubins and PTX-like text compressed by the libraries at many levels,
hand-made frames (raw, RLE and compressed blocks, windows, checksums, skippable and several frames) -- mutated
(bit flips, byte sets, length fields set to edge values, truncations, splices), with the expected size sometimes off
by a little. Each input goes through both of kernelpack's decoders and the reference. Findings: an input a kernelpack
decoder accepts that the reference refuses, or different bytes where both accept. An input kernelpack refuses and the
reference accepts is counted (``stricter``), not a finding: kernelpack holds the format's limits where libzstd is
lenient (offsets within the window, block sizes), and refuses what nvcc never writes.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from hypothesis import strategies as st

import fatbin_bombs as fb
import fuzz_support as fz
from kernelpack.core.errors import DecompressError
from kernelpack.frontends.prebuilt.decompress import decoders, library, lz4_block, zstd
from kernelpack.frontends.prebuilt.zstd_frames import MAX_WINDOW

FORMATS = ("zstd", "lz4")


class Disagreement(Exception):
    """A kernelpack decoder accepted what the reference refuses, or both accepted and the bytes differ."""


def available() -> bool:
    return library("zstd") is not None and library("lz4") is not None


def reference(fmt: str, src: bytes, size: int) -> bytes | None:
    """What the reference library makes of ``src`` when exactly ``size`` bytes are expected (None: refused). zstd:
    libzstd streaming frame after frame, as the zstd CLI reads them, with kernelpack's window limit."""
    if fmt == "lz4":
        import lz4.block

        try:
            out = lz4.block.decompress(src, uncompressed_size=size)
        except lz4.block.LZ4BlockError:
            return None
        return out if len(out) == size else None
    import zstandard

    dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
    parts, rest = [], src
    try:
        while rest:
            obj = dctx.decompressobj()
            parts.append(obj.decompress(rest))
            if not obj.eof:
                return None
            rest = obj.unused_data
            if sum(map(len, parts)) > size:
                return None
    except zstandard.ZstdError:
        return None
    out = b"".join(parts)
    return out if len(out) == size else None


def ours(fmt: str, src: bytes, size: int, decoder: str) -> bytes | None:
    with decoders(decoder):
        try:
            return zstd(src, size) if fmt == "zstd" else lz4_block(src, size)
        except DecompressError:
            return None


def compare(fmt: str, src: bytes, size: int) -> str:
    """``agreed`` (both decoders give the reference's bytes), ``refused`` (all refuse) or ``stricter`` (kernelpack
    refuses what the reference accepts); a :class:`Disagreement` otherwise."""
    want = reference(fmt, src, size)
    stricter = False
    for decoder in ("library", "python"):
        got = ours(fmt, src, size, decoder)
        if got is not None and want is None:
            raise Disagreement(f"{fmt}: the {decoder} decoder accepted what the reference refuses "
                               f"(size {size}, input {src.hex()[:160]})")
        if got is not None and got != want:
            raise Disagreement(f"{fmt}: the {decoder} decoder gave other bytes than the reference (size {size})")
        stricter |= got is None and want is not None
    return "stricter" if stricter else "agreed" if want is not None else "refused"


# ------------------------------------------------------------------------------------------------ the corpus


@cache
def corpus(cubins: tuple[bytes, ...] = ()) -> dict[str, tuple[tuple[bytes, int], ...]]:
    """Compressed inputs and their sizes, per format: ``cubins`` (real ones) and text shaped like PTX, through the
    libraries at many levels, plus hand-made zstd frames reaching every block kind and frame field."""
    import lz4.block
    import zstandard

    rng = random.Random(25)
    words = [b"ld.global.f32 ", b"%r", b"add.s32 ", b"\n\t", b"mov.u64 ", b"{", b"}", b";", b".reg .b32 "]
    texts = [b"".join(rng.choice(words) + str(rng.randrange(100)).encode() for _ in range(n)) for n in (40, 400, 4000)]
    datas = [*texts, *(c[:20000] for c in cubins[:3]), bytes(5000), rng.randbytes(3000), b"x", b"abc" * 700]
    z: list[tuple[bytes, int]] = []
    for d in datas:
        for level in (-5, 1, 3, 9, 19):
            for chk in (False, True):
                z.append((zstandard.ZstdCompressor(level=level, write_checksum=chk).compress(d), len(d)))
        z.append((zstandard.ZstdCompressor(level=3, write_content_size=False).compress(d), len(d)))
    z += list(_frames(rng))
    lz: list[tuple[bytes, int]] = []
    for d in datas:
        for mode, arg in (("default", 0), ("fast", 1), ("fast", 30), ("high_compression", 9)):
            kw = {"compression": arg} if mode == "high_compression" else {"acceleration": arg} if arg else {}
            lz.append((lz4.block.compress(d, mode=mode, store_size=False, **kw), len(d)))
    return {"zstd": tuple(z), "lz4": tuple(lz)}


def _frames(rng: random.Random) -> list[tuple[bytes, int]]:
    text = bytes(range(32, 127)) * 60
    out = []
    for _ in range(30):
        window = rng.choice([None, 10, 12, 20])
        most = 900 if window is None else min(900, 1 << window)
        blocks, size = [fb.block("raw", text[:8])], 8
        for _ in range(rng.randrange(0, 4)):
            kind = rng.choice(["raw", "rle", "seq"])
            if kind == "raw":
                n = rng.randrange(0, most)
                blocks.append(fb.block("raw", text[:n]))
            elif kind == "rle":
                n = rng.randrange(0, most)
                blocks.append(fb.block("rle", b"q", rle_size=n))
            else:
                back = fb.offset_sequence(rng.randrange(1, min(size, 1 << (window or 30)) + 1))
                blocks.append(fb.block("compressed", fb.raw_literals(b"lit") + fb.sequences([back])))
                n = 6
            size += n
        blocks[-1] = bytes([blocks[-1][0] | 1]) + blocks[-1][1:]
        stated = size if window is None or rng.random() < 0.7 else None
        crc = struct.pack("<I", 0) if rng.random() < 0.2 else None
        frame = fb.frame(blocks, size=stated, window_log=window, checksum=crc)
        if rng.random() < 0.2:
            frame = struct.pack("<II", 0x184D2A5A, 3) + b"abc" + frame
        out.append((frame, size))
    return out


# ------------------------------------------------------------------------------------------------ generated inputs
# Blocks built field by field (literals raw, RLE or Huffman-coded in 1 or 4 streams; sequences with RLE-mode tables
# whose every extra bit is spelled), so that most decode, and then perturbed: header fields change within their
# encodings, so the decoders' rules for each field meet the reference's.


PERTURB = 0.3  # the share of generated blocks with one bit flipped


def generated(fmt: str, rng: random.Random) -> tuple[bytes, int]:
    return _zstd_frame(rng) if fmt == "zstd" else _lz4_block(rng)


def _zstd_frame(rng: random.Random) -> tuple[bytes, int]:
    history = bytes(rng.choice(b"abcdefgh") for _ in range(rng.randrange(1, 300)))
    blocks, size, table = [fb.block("raw", history)], len(history), None
    for _ in range(rng.randrange(1, 4)):
        alphabet = b"abcdefghijklmnopqrstuvwxyz"[:rng.randrange(2, 27)]
        lits = bytes(rng.choice(alphabet) for _ in range(rng.randrange(300)))
        section, table = _literals(rng, lits, table)
        seqs, mls = _sequence_values(rng, len(lits), size)
        body = section + _sequences(rng, seqs)
        if rng.random() < PERTURB:
            i = rng.randrange(len(body))
            body = body[:i] + bytes([body[i] ^ 1 << rng.randrange(8)]) + body[i + 1:]
        blocks.append(fb.block("compressed", body))
        size += len(lits) + mls
    blocks[-1] = bytes([blocks[-1][0] | 1]) + blocks[-1][1:]
    window = rng.choice([None, None, 10, 17])
    return fb.frame(blocks, size=size if window is None or rng.random() < 0.5 else None, window_log=window), size


def _literals(rng: random.Random, lits: bytes, table: Any) -> tuple[bytes, Any]:
    from kernelpack.frontends.prebuilt.entropy import huffman_table

    n = len(lits)
    how = rng.choice(["raw", "rle", "huffman", "huffman", "treeless" if table else "huffman"])
    if how == "raw" or len(set(lits)) < 2 and how != "rle":
        return _lit_header(rng, 0, n, 0) + lits, table
    if how == "rle":
        return _lit_header(rng, 1, n, 0) + lits[:1].ljust(1, b"a"), table
    symbols = sorted(set(lits))
    if how == "huffman" or any(s not in table[1] for s in symbols):
        weights = _weights(rng, symbols)
        table = (huffman_table(weights), symbols, weights)
        desc = bytes([127 + len(weights)]) + bytes(
            (weights[i] << 4) | (weights[i + 1] if i + 1 < len(weights) else 0) for i in range(0, len(weights), 2))
    else:
        desc = b""
    streams = 1 if n < 6 or rng.random() < 0.4 else 4
    seg = (n + 3) // 4
    parts = [lits] if streams == 1 else [lits[:seg], lits[seg:2 * seg], lits[2 * seg:3 * seg], lits[3 * seg:]]
    coded = [_huffman(table[0], p) for p in parts]
    body = desc + (b"" if streams == 1 else struct.pack("<3H", *map(len, coded[:3]))) + b"".join(coded)
    return _lit_header(rng, 2 if desc else 3, n, len(body), streams) + body, table


def _lit_header(rng: random.Random, kind: int, regen: int, comp: int, streams: int = 1) -> bytes:
    if kind in (0, 1):
        fmt = rng.choice([f for f, most in ((0, 31), (1, 4095), (3, 1 << 20)) if regen <= most])
        if fmt == 0:
            return bytes([regen << 3 | kind])
        return (regen << 4 | fmt << 2 | kind).to_bytes(2 if fmt == 1 else 3, "little")
    fits = [(f, h, b) for f, h, b in ((0, 3, 10), (1, 3, 10), (2, 4, 14), (3, 5, 18))
            if (f == 0) == (streams == 1) and max(regen, comp) < 1 << b]
    fmt, hsize, bits = rng.choice(fits)
    return (kind | fmt << 2 | regen << 4 | comp << (4 + bits)).to_bytes(hsize, "little")


def _weights(rng: random.Random, symbols: list[int]) -> list[int]:
    """Huffman weights (the last symbol's left implied) of a random complete prefix code over ``symbols``."""
    depths = [0]
    while len(depths) < len(symbols):
        i = rng.randrange(len(depths))
        if depths[i] < 11:
            depths[i:i + 1] = [depths[i] + 1, depths[i] + 1]
    most = max(depths)
    by_symbol = dict(zip(symbols, rng.sample(depths, len(depths))))
    return [most + 1 - by_symbol[s] if s in by_symbol else 0 for s in range(symbols[-1])]


def _huffman(table: Any, data: bytes) -> bytes:
    """``data`` coded backwards with the decoder's own table (each symbol's code: the first cell holding it)."""
    codes = {}
    for v in range(len(table.symbols) - 1, -1, -1):
        codes[table.symbols[v]] = (v >> (table.max_bits - table.bits[v]), table.bits[v])
    bits, width = 1, 0
    for s in data:
        code, n = codes[s]
        bits, width = bits << n | code, width + n
    return bits.to_bytes(width // 8 + 1, "little")


_LL_BITS = [0] * 16 + [1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
_ML_BITS = [0] * 32 + [1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
_LL_BASE = list(range(16)) + [16, 18, 20, 22, 24, 28, 32, 40, 48, 64, 128, 256, 512, 1024, 2048]
_ML_BASE = list(range(3, 35)) + [35, 37, 39, 41, 43, 47, 51, 59, 67, 83, 99, 131, 259, 515, 1027, 2051]


def _sequence_values(rng: random.Random, lits: int, produced: int) -> tuple[list[tuple[int, ...]], int]:
    """Sequences sharing one code per field, their extra bits random: (ll code, of code, ml code, ll, ml, of
    extra), and the bytes their matches add."""
    count = rng.choice([0, 1, 2, rng.randrange(1, 40)])
    ll_code = rng.randrange(min(len(_LL_BASE), 20))
    ml_code = rng.randrange(min(len(_ML_BASE), 40))
    of_code = rng.randrange(0, max(2, (produced + 3).bit_length()))
    out, mls = [], 0
    for _ in range(count):
        ll = rng.randrange(1 << _LL_BITS[ll_code])
        ml = rng.randrange(1 << _ML_BITS[ml_code])
        out.append((ll_code, of_code, ml_code, ll, ml, rng.randrange(1 << of_code) if of_code else 0))
        mls += _ML_BASE[ml_code] + ml
    return out, mls


def _sequences(rng: random.Random, seqs: list[tuple[int, ...]]) -> bytes:
    n = len(seqs)
    forms = [f for f, most in ((1, 127), (2, 0x7EFF), (3, 0x7F00 + 0xFFFF)) if n <= most and (f != 3 or n >= 0x7F00)]
    form = rng.choice(forms)
    head = bytes([n]) if form == 1 else bytes([(n >> 8) + 128, n & 255]) if form == 2 else \
        b"\xff" + struct.pack("<H", n - 0x7F00)
    if n == 0:
        return head
    ll_code, of_code, ml_code = seqs[0][:3]
    bits, width = 1, 0
    for _, _, _, ll, ml, of in seqs:
        llb, mlb = _LL_BITS[ll_code], _ML_BITS[ml_code]
        bits, width = bits << (of_code + mlb + llb) | of << (mlb + llb) | ml << llb | ll, width + of_code + mlb + llb
    return head + bytes([0b01010100, ll_code, of_code, ml_code]) + bits.to_bytes(width // 8 + 1, "little")


def _lz4_block(rng: random.Random) -> tuple[bytes, int]:
    out, size = bytearray(), 0
    for i in range(rng.randrange(0, 5) + 1):
        last = i == 0 and rng.random() < 0.3 or rng.random() < 0.25
        lit = rng.choice([0, 1, 4, 5, 8, 14, 15, 16, rng.randrange(300)])
        token_match = 0 if last else rng.choice([0, 3, 14, 15])
        ml = token_match + 4 + (rng.choice([0, 1, 254, 255, 300]) if token_match == 15 else 0)
        out.append(min(lit, 15) << 4 | (rng.choice([0, 0, 0, 1]) if last else token_match))
        out += _lz4_len(lit)
        out += bytes(rng.choice(b"xyz") for _ in range(lit))
        size += lit
        if last:
            return bytes(out), size
        off = rng.choice([0, 1, 2, size, size + 1, rng.randrange(1, size + 2)])
        out += struct.pack("<H", min(off, 0xFFFF))
        if token_match == 15:
            out += _lz4_len(ml - 19 + 15)
        size += ml
    return bytes(out), size


def _lz4_len(n: int) -> bytes:
    """The extension bytes of a length whose nibble is 15 (none below 15)."""
    if n < 15:
        return b""
    n -= 15
    return b"\xff" * (n // 255) + bytes([n % 255])


# ------------------------------------------------------------------------------------------------ targets

SIZE_DELTA = st.sampled_from([0, 0, 0, 0, 0, 1, -1, 7, -8, 1 << 20])
STRATEGY = st.tuples(st.booleans(), st.integers(0, 2**32), st.lists(fz.EDIT, min_size=0, max_size=3), SIZE_DELTA)


def run(fmt: str, cubins: tuple[bytes, ...], args: tuple[bool, int, list[Any], int]) -> str:
    """One fuzz input: a corpus entry mutated, or a generated one (seeded by ``which``), perhaps mutated too;
    compared (raises DecompressError when all refuse, for the counts)."""
    made, which, edits, delta = args
    items = corpus(cubins)[fmt]
    src, size = generated(fmt, random.Random(which)) if made else items[which % len(items)]
    other = items[(which + 1) % len(items)][0]
    verdict = compare(fmt, fz.apply(src, edits[:1] if made else edits, other), max(0, size + delta))
    if verdict == "refused":
        raise DecompressError("refused by all")
    return verdict


def target(fmt: str) -> Callable[[fz.Seeds, Any], str]:
    return lambda seeds, args: run(fmt, seeds.cubins, args)


def campaign(fmt: str, inputs: int, seed: int = 0, cubins: tuple[bytes, ...] = ()) -> dict[str, int]:
    """A seeded run without hypothesis (for the suite): counts of agreed / refused / stricter."""
    rng = random.Random(seed)
    counts = {"agreed": 0, "refused": 0, "stricter": 0}
    for _ in range(inputs):
        edits = [_edit(rng) for _ in range(rng.randrange(0, 4))]
        try:
            args = (rng.random() < 0.5, rng.randrange(1 << 32), edits, rng.choice([0, 0, 0, 0, 1, -1]))
            counts[run(fmt, cubins, args)] += 1
        except DecompressError:
            counts["refused"] += 1
    return counts


def _edit(rng: random.Random) -> tuple[Any, ...]:
    kind = rng.choice(["flip", "flip", "set", "field", "truncate", "splice"])
    pos = rng.randrange(1 << 31)
    if kind == "flip":
        return kind, pos, rng.randrange(8)
    if kind == "set":
        return kind, pos, rng.randrange(256)
    if kind == "field":
        return kind, pos, rng.choice([2, 4, 8]), rng.choice([0, 1, 0xFF, 0xFFFF, 0x7FFFFFFF, rng.randrange(1 << 32)])
    if kind == "truncate":
        return kind, pos
    return kind, pos, rng.randrange(1 << 31), rng.randrange(1 << 31)
