"""The two compressions nvcc uses inside fatbins, decoded in pure Python: LZ4 blocks and Zstandard frames.

nvcc 13.0 compresses fatbin entries by ``-compress-mode``: ``default``/``balance`` compress PTX with zstd (cubins are
stored as is), ``size`` and ``-Xfatbin -compress-all`` compress every entry with zstd, ``speed`` compresses PTX with
LZ4, ``none``/``-no-compress`` nothing (see :mod:`kernelpack.fatbin`). Both decoders follow the formats' specs (the
LZ4 block format; RFC 8878 for zstd: raw, RLE and compressed blocks, Huffman literals with 1 or 4 streams, FSE
sequence tables in every mode, repeat offsets, skippable frames, the xxHash64 content checksum; the entropy coders
are :mod:`kernelpack.entropy`); zstd dictionaries are refused. They are bounded: never more than ``limit`` bytes
out, every read checked, and any malformed input is a :class:`~kernelpack.errors.DecompressError` (never an
IndexError).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .entropy import Fse, Huffman, fse_description, fse_table, huffman_description, huffman_stream, rle_table
from .errors import DecompressError

# ------------------------------------------------------------------------------------------------ LZ4


def lz4_block(src: bytes, size: int) -> bytes:
    """Decode one LZ4 block (no frame) that expands to exactly ``size`` bytes."""
    out = bytearray()
    i, n = 0, len(src)
    while i < n:
        token = src[i]
        i += 1
        lit, i = _lz4_length(src, i, token >> 4)
        if i + lit > n or len(out) + lit > size:
            raise DecompressError(f"LZ4: literals at byte {i} run past the input or the {size}-byte output")
        out += src[i:i + lit]
        i += lit
        if i == n:
            break  # the last sequence has literals only
        if i + 2 > n:
            raise DecompressError(f"LZ4: truncated match offset at byte {i}")
        off = src[i] | src[i + 1] << 8
        i += 2
        match, i = _lz4_length(src, i, token & 15)
        match += 4
        if off == 0 or off > len(out) or len(out) + match > size:
            raise DecompressError(f"LZ4: match (offset {off}, length {match}) outside the output ({len(out)} of "
                                  f"{size} bytes)")
        _copy_match(out, off, match)
    if len(out) != size:
        raise DecompressError(f"LZ4: the block expands to {len(out)} bytes, expected {size}")
    return bytes(out)


def _lz4_length(src: bytes, i: int, n: int) -> tuple[int, int]:
    if n != 15:
        return n, i
    while True:
        if i >= len(src):
            raise DecompressError("LZ4: truncated length")
        b = src[i]
        i += 1
        n += b
        if b != 255:
            return n, i


def _copy_match(out: bytearray, off: int, length: int) -> None:
    start = len(out) - off
    if length <= off:
        out += out[start:start + length]
    else:  # overlapping: the last `off` bytes repeat
        chunk = bytes(out[start:])
        q, r = divmod(length, off)
        out += chunk * q + chunk[:r]


# ------------------------------------------------------------------------------------------------ zstd: tables

_ZSTD_MAGIC = 0xFD2FB528
_MAX_BLOCK = 128 * 1024


# RFC 8878 3.1.1.3.2.2: the predefined distributions and the codes' baselines and extra bits
_LL_DEFAULT = [4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1,
               -1, -1, -1, -1]
_ML_DEFAULT = [1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
               1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1]
_OF_DEFAULT = [1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1]
_LL_BASE = list(range(16)) + [16, 18, 20, 22, 24, 28, 32, 40, 48, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
                              32768, 65536]
_LL_BITS = [0] * 16 + [1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
_ML_BASE = list(range(3, 35)) + [35, 37, 39, 41, 43, 47, 51, 59, 67, 83, 99, 131, 259, 515, 1027, 2051, 4099, 8195,
                                 16387, 32771, 65539]
_ML_BITS = [0] * 32 + [1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
# kind: (default counts, default log, max log, max symbols)
_KINDS = {"literal lengths": (_LL_DEFAULT, 6, 9, 36), "offsets": (_OF_DEFAULT, 5, 8, 32),
          "match lengths": (_ML_DEFAULT, 6, 9, 53)}
_DEFAULTS = {k: fse_table(c, log) for k, (c, log, _, _) in _KINDS.items()}


# ------------------------------------------------------------------------------------------------ zstd: frames


@dataclass
class _State:
    """What a frame's blocks pass on to the next: the Huffman table, the FSE tables and the repeat offsets."""

    start: int
    huffman: Huffman | None = None
    tables: dict[str, Fse] = field(default_factory=dict)
    rep: list[int] = field(default_factory=lambda: [1, 4, 8])


def zstd(src: bytes, limit: int) -> bytes:
    """Decode every frame of ``src`` (skippable frames are skipped) into at most ``limit`` bytes."""
    out = bytearray()
    pos = 0
    while pos < len(src):
        magic = _le(src, pos, 4, "frame magic")
        if 0x184D2A50 <= magic <= 0x184D2A5F:
            pos += 8 + _le(src, pos + 4, 4, "skippable frame size")
            continue
        if magic != _ZSTD_MAGIC:
            raise DecompressError(f"zstd: bad frame magic 0x{magic:08x} at byte {pos}")
        pos = _frame(src, pos + 4, out, limit)
    return bytes(out)


def _le(src: bytes, pos: int, n: int, what: str) -> int:
    if pos + n > len(src):
        raise DecompressError(f"zstd: truncated {what} at byte {pos}")
    return int.from_bytes(src[pos:pos + n], "little")


def _frame(src: bytes, pos: int, out: bytearray, limit: int) -> int:
    fhd = _le(src, pos, 1, "frame header")
    pos += 1
    single, checksum = fhd >> 5 & 1, fhd >> 2 & 1
    if fhd & 0x08:
        raise DecompressError("zstd: reserved frame header bit set")
    pos += 0 if single else 1  # the window size: the whole output is kept anyway
    dict_len = (0, 1, 2, 4)[fhd & 3]
    if _le(src, pos, dict_len, "dictionary id"):
        raise DecompressError("zstd: frames that need a dictionary are not supported")
    pos += dict_len
    fcs_len = (1 if single else 0, 2, 4, 8)[fhd >> 6]
    size = _le(src, pos, fcs_len, "content size") + (256 if fcs_len == 2 else 0) if fcs_len else None
    pos += fcs_len
    if size is not None and len(out) + size > limit:
        raise DecompressError(f"zstd: the frame holds {size} bytes, more than the {limit} allowed")
    st = _State(len(out))
    last = 0
    while not last:
        head = _le(src, pos, 3, "block header")
        last, kind, bsize = head & 1, head >> 1 & 3, head >> 3
        pos += 3
        if kind == 1:
            _grow(out, bsize, limit)
            out += bytes([_le(src, pos, 1, "RLE block")]) * bsize
            pos += 1
            continue
        if pos + bsize > len(src) or bsize > _MAX_BLOCK:
            raise DecompressError(f"zstd: block of {bsize} bytes at byte {pos} runs past the input or the maximum")
        if kind == 0:
            _grow(out, bsize, limit)
            out += src[pos:pos + bsize]
        elif kind == 2:
            _block(src[pos:pos + bsize], out, st, limit)
        else:
            raise DecompressError(f"zstd: reserved block type at byte {pos - 3}")
        pos += bsize
    if size is not None and len(out) - st.start != size:
        raise DecompressError(f"zstd: the frame expands to {len(out) - st.start} bytes, its header says {size}")
    if checksum:
        if xxh64(bytes(out[st.start:])) & 0xFFFFFFFF != _le(src, pos, 4, "checksum"):
            raise DecompressError("zstd: content checksum mismatch")
        pos += 4
    return pos


def _grow(out: bytearray, n: int, limit: int) -> None:
    if len(out) + n > limit:
        raise DecompressError(f"zstd: the data expands past the {limit} bytes allowed")


def _block(b: bytes, out: bytearray, st: _State, limit: int) -> None:
    pos, literals = _literals(b, st)
    seqs = _sequences(b, pos, st)
    lp = 0
    rep = st.rep
    for ll, ml, ov in seqs:
        if lp + ll > len(literals):
            raise DecompressError("zstd: a sequence uses more literals than the block has")
        _grow(out, ll + ml, limit)
        out += literals[lp:lp + ll]
        lp += ll
        if ov > 3:
            off = ov - 3
            rep = [off, rep[0], rep[1]]
        else:
            idx = ov - (1 if ll else 0)
            if idx == 0:
                off = rep[0]
            elif idx == 3:
                off = rep[0] - 1
                rep = [off, rep[0], rep[1]]
            else:
                off = rep[idx]
                rep = [off, rep[0], rep[2] if idx == 1 else rep[1]]
        if off <= 0 or off > len(out) - st.start:
            raise DecompressError(f"zstd: match offset {off} reaches before the frame's start")
        _copy_match(out, off, ml)
    st.rep = rep
    _grow(out, len(literals) - lp, limit)
    out += literals[lp:]


def _literals(b: bytes, st: _State) -> tuple[int, bytes]:
    h0 = _le(b, 0, 1, "literals header")
    kind, fmt = h0 & 3, h0 >> 2 & 3
    if kind in (0, 1):  # raw, RLE
        hsize = (1, 2, 1, 3)[fmt]
        hv = _le(b, 0, hsize, "literals header")
        regen = hv >> 3 if hsize == 1 else hv >> 4
        if kind == 0:
            if hsize + regen > len(b):
                raise DecompressError("zstd: raw literals run past the block")
            return hsize + regen, b[hsize:hsize + regen]
        return hsize + 1, bytes([_le(b, hsize, 1, "RLE literal")]) * regen
    streams, hsize, bits = ((1, 3, 10), (4, 3, 10), (4, 4, 14), (4, 5, 18))[fmt]
    hv = _le(b, 0, hsize, "literals header")
    regen, comp = hv >> 4 & ((1 << bits) - 1), hv >> (4 + bits) & ((1 << bits) - 1)
    if hsize + comp > len(b) or regen > _MAX_BLOCK:
        raise DecompressError("zstd: compressed literals run past the block")
    data = b[hsize:hsize + comp]
    if kind == 2:
        st.huffman, used = huffman_description(data)
        data = data[used:]
    if st.huffman is None:
        raise DecompressError("zstd: treeless literals with no previous Huffman table")
    out = bytearray()
    if streams == 1:
        huffman_stream(data, st.huffman, regen, out)
    else:
        if len(data) < 6:
            raise DecompressError("zstd: truncated literal streams jump table")
        s1, s2, s3 = struct.unpack_from("<3H", data)
        seg = (regen + 3) // 4
        bounds = [6, 6 + s1, 6 + s1 + s2, 6 + s1 + s2 + s3, len(data)]
        if bounds[3] > len(data) or regen < 3 * seg:
            raise DecompressError("zstd: literal streams overrun their section")
        for i in range(4):
            huffman_stream(data[bounds[i]:bounds[i + 1]], st.huffman, seg if i < 3 else regen - 3 * seg, out)
    return hsize + comp, bytes(out)


def _sequences(b: bytes, pos: int, st: _State) -> list[tuple[int, int, int]]:
    n0 = _le(b, pos, 1, "sequences header")
    if n0 == 0:
        return []
    if n0 < 128:
        n, pos = n0, pos + 1
    elif n0 < 255:
        n, pos = ((n0 - 128) << 8) + _le(b, pos + 1, 1, "sequence count"), pos + 2
    else:
        n, pos = _le(b, pos + 1, 2, "sequence count") + 0x7F00, pos + 3
    modes = _le(b, pos, 1, "compression modes")
    pos += 1
    if modes & 3:
        raise DecompressError("zstd: reserved bits set in the sequence compression modes")
    tables = {}
    for kind, mode in zip(_KINDS, (modes >> 6, modes >> 4 & 3, modes >> 2 & 3)):
        _, _, max_log, max_symbols = _KINDS[kind]
        if mode == 0:
            tables[kind] = _DEFAULTS[kind]
        elif mode == 1:
            tables[kind] = rle_table(_le(b, pos, 1, f"RLE {kind} code"))
            pos += 1
        elif mode == 2:
            counts, log, used = fse_description(b[pos:], max_log, max_symbols)
            tables[kind] = fse_table(counts, log)
            pos += used
        elif kind in st.tables:
            tables[kind] = st.tables[kind]
        else:
            raise DecompressError(f"zstd: repeat mode for {kind} with no previous table")
    st.tables.update(tables)
    ll_t, of_t, ml_t = tables["literal lengths"], tables["offsets"], tables["match lengths"]
    return _decode_sequences(b[pos:], n, ll_t, of_t, ml_t)


def _decode_sequences(data: bytes, n: int, ll_t: Fse, of_t: Fse, ml_t: Fse) -> list[tuple[int, int, int]]:
    """The (literals length, match length, offset value) of ``n`` sequences. Each sequence's extra bits (offset,
    match, literals: in that order, backwards) are one read, and so are its three state updates (the hot loop of the
    decoder: kept to plain arithmetic). The stream must end exactly at its start."""
    if not data or data[-1] == 0:
        raise DecompressError("zstd: empty sequences bitstream or no end marker")
    d = bytes(8) + data + bytes(8)
    pos = len(data) * 8 - 9 + data[-1].bit_length() + 64
    base = 64

    def take(k: int) -> int:
        nonlocal pos
        p = pos - k
        if p < base:
            raise DecompressError("zstd: the sequences bitstream ends early")
        pos = p
        return int.from_bytes(d[p >> 3:(p >> 3) + 9], "little") >> (p & 7) & ((1 << k) - 1)

    ll_s, of_s, ml_s = take(ll_t.log), take(of_t.log), take(ml_t.log)
    ll_sym, of_sym, ml_sym = ll_t.symbols, of_t.symbols, ml_t.symbols
    out = []
    for i in range(n):
        of_code, ml_code, ll_code = of_sym[of_s], ml_sym[ml_s], ll_sym[ll_s]
        if of_code > 31 or ml_code >= len(_ML_BASE) or ll_code >= len(_LL_BASE):
            raise DecompressError("zstd: sequence code out of range")
        mlb, llb = _ML_BITS[ml_code], _LL_BITS[ll_code]
        v = take(of_code + mlb + llb)
        out.append((_LL_BASE[ll_code] + (v & ((1 << llb) - 1)), _ML_BASE[ml_code] + (v >> llb & ((1 << mlb) - 1)),
                    (1 << of_code) + (v >> (llb + mlb))))
        if i + 1 < n:
            b1, b2, b3 = ll_t.bits[ll_s], ml_t.bits[ml_s], of_t.bits[of_s]
            v = take(b1 + b2 + b3)
            ll_s = ll_t.base[ll_s] + (v >> (b2 + b3))
            ml_s = ml_t.base[ml_s] + (v >> b3 & ((1 << b2) - 1))
            of_s = of_t.base[of_s] + (v & ((1 << b3) - 1))
    if pos != base:
        raise DecompressError(f"zstd: the sequences bitstream has {pos - base} bits left over")
    return out


# ------------------------------------------------------------------------------------------------ xxHash64

_M64 = (1 << 64) - 1
_P1, _P2, _P3 = 11400714785074694791, 14029467366897019727, 1609587929392839161
_P4, _P5 = 9650029242287828579, 2870177450012600261


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, lane: int) -> int:
    return _rotl((acc + lane * _P2) & _M64, 31) * _P1 & _M64


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 of ``data`` (zstd's content checksum is its low 32 bits)."""
    n, p = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M64, (seed + _P2) & _M64, seed, (seed - _P1) & _M64]
        while p + 32 <= n:
            lanes = struct.unpack_from("<4Q", data, p)
            v = [_round(a, x) for a, x in zip(v, lanes)]
            p += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M64
        for a in v:
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
