"""zstd blocks decoded in pure Python (RFC 8878 section 3.1.1.3: raw, RLE and compressed blocks; Huffman literals
with 1 or 4 streams, FSE sequence tables in every mode, repeat offsets), the fallback where libzstd (``zstandard``) is
not installed. Frames arrive read by :mod:`kernelpack.frontends.prebuilt.zstd_frames`; the output goes into one
preallocated buffer of
the expected size (the bytes object handed on), and no block writes past ``Block_Maximum_Size`` or reaches further
back than the frame's window.

The decoder's loops (sequences, Huffman literals, table cells) draw on a :class:`Budget` proportional to the input, so
no input makes it work much longer than real data of the same size does."""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field

from ...core.errors import DecompressError
from .entropy import Fse, Huffman, fse_description, fse_table, huffman_description, huffman_stream, rle_table
from .zstd_frames import BLOCK_MAX, COMPRESSED, RAW, Frame, xxh64

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

# The work budget, in units of about one Huffman-decoded literal's time: a sequence costs 10, an FSE table cell 1, a
# Huffman table cell 1/8. Real data (nvcc's fatbins, libzstd at levels -5 to 22) needs at most ~8 units per input
# byte; the decoder stops at 64 per byte (plus a base for small inputs' tables), so no input keeps it busy much
# longer than real data of its size would.
WORK_PER_BYTE = 64
WORK_BASE = 1 << 16
SEQUENCE_COST = 10
# The content checksum (pure-Python XXH64, ~50 s per GiB) is verified for the first CHECKSUM_MAX bytes of content of
# one call's frames; past that it is not (nvcc writes no checksums; libzstd, where installed, verifies them all).
CHECKSUM_MAX = 32 << 20


class Budget:
    """Units of decoding work left for one input (see WORK_PER_BYTE), and bytes of content whose checksum may still
    be verified."""

    def __init__(self, input_bytes: int) -> None:
        self.total = self.left = WORK_PER_BYTE * input_bytes + WORK_BASE
        self.hashable = CHECKSUM_MAX

    def spend(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise DecompressError(f"zstd: decoding needs more than the {self.total} units of work allowed for an "
                                  f"input of this size (sequences, Huffman literals, table cells: {WORK_PER_BYTE} "
                                  f"per input byte, ~8 times what real data needs)")


@dataclass
class _State:
    """What a frame's blocks pass on to the next: the Huffman table, the FSE tables and the repeat offsets."""

    huffman: Huffman | None = None
    tables: dict[str, Fse] = field(default_factory=dict)
    rep: list[int] = field(default_factory=lambda: [1, 4, 8])


class Output:
    """``size`` bytes written in place and handed on without a copy: the buffer of a ``BytesIO``, written through its
    view (``getbuffer``), whose ``getvalue`` then returns that very ``bytes`` object (CPython shares it once the view
    is released), so the output's peak is its size, not twice it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._io = io.BytesIO()
        if size:
            self._io.seek(size - 1)
            self._io.write(b"\0")
        self.mv = self._io.getbuffer()

    def result(self) -> bytes:
        self.mv.release()
        return self._io.getvalue()


class Out(Output):
    """The output buffer (preallocated, written in place) and the frame and block being decoded into it."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.pos = 0
        self.frame_start = 0
        self.window = 0
        self.block_end = 0  # where the current block must stop: its maximum, or the end of the buffer

    def room(self, n: int) -> None:
        if self.pos + n > self.block_end:
            limit = (f"the {self.size} bytes expected" if self.block_end == self.size else
                     f"the frame's block maximum of {min(self.window, BLOCK_MAX)} bytes")
            raise DecompressError(f"zstd: a block expands past {limit} (at output byte {self.pos}, {n} more bytes)")

    def put(self, data: bytes | memoryview) -> None:
        n = len(data)
        self.room(n)
        self.mv[self.pos:self.pos + n] = data
        self.pos += n

    def copy(self, off: int, n: int) -> None:
        """Append ``n`` bytes from ``off`` back, within the frame and its window."""
        self.room(n)
        if off > self.pos - self.frame_start or off > self.window:
            raise DecompressError(f"zstd: match offset {off} reaches back past the frame's start or its window of "
                                  f"{self.window} bytes")
        copy_back(self.mv, self.pos, off, n)
        self.pos += n


def copy_back(mv: memoryview, pos: int, off: int, n: int) -> None:
    """Write ``n`` bytes at ``pos`` from ``off`` back (``0 < off <= pos``); an overlapping copy repeats the last
    ``off`` bytes, written in doubling runs from the buffer itself (no temporary the size of the match)."""
    src, done = pos - off, 0
    while done < n:
        k = min(off + done, n - done)
        mv[pos + done:pos + done + k] = mv[src:src + k]
        done += k


def decode_frame(src: bytes, frame: Frame, out: Out, budget: Budget) -> None:
    """Decode one frame's blocks into ``out`` and check its content size and checksum."""
    st = _State()
    out.frame_start, out.window = out.pos, frame.window
    for b in frame.blocks:
        out.block_end = min(out.pos + frame.block_max, out.size)
        if b.kind == RAW:
            out.put(memoryview(src)[b.start:b.start + b.size])
        elif b.kind == COMPRESSED:
            budget.spend(1)
            _block(memoryview(src)[b.start:b.start + b.size].tobytes(), out, st, budget)
        else:
            out.room(b.regen)
            out.mv[out.pos:out.pos + b.regen] = bytes([src[b.start]]) * b.regen
            out.pos += b.regen
    produced = out.pos - out.frame_start
    if frame.size is not None and produced != frame.size:
        raise DecompressError(f"zstd: the frame at byte {frame.start} expands to {produced} bytes, its header says "
                              f"{frame.size}")
    if frame.checksum is not None and produced <= budget.hashable:
        budget.hashable -= produced
        if xxh64(out.mv[out.frame_start:out.pos]) & 0xFFFFFFFF != frame.checksum:
            raise DecompressError(f"zstd: content checksum mismatch in the frame at byte {frame.start}")


def _block(b: bytes, out: Out, st: _State, budget: Budget) -> None:
    pos, literals = _literals(b, out, st, budget)
    seqs = _sequences(b, pos, out, st, budget)
    lp = 0
    rep = st.rep
    for ll, ml, ov in seqs:
        if lp + ll > len(literals):
            raise DecompressError("zstd: a sequence uses more literals than the block has")
        out.put(literals[lp:lp + ll])
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
        if off <= 0:
            raise DecompressError("zstd: a repeat offset of 0")
        out.copy(off, ml)
    st.rep = rep
    out.put(literals[lp:])


def _le(b: bytes, pos: int, n: int, what: str) -> int:
    if pos + n > len(b):
        raise DecompressError(f"zstd: truncated {what}")
    return int.from_bytes(b[pos:pos + n], "little")


def _literals(b: bytes, out: Out, st: _State, budget: Budget) -> tuple[int, bytes]:
    h0 = _le(b, 0, 1, "literals header")
    kind, fmt = h0 & 3, h0 >> 2 & 3
    if kind in (0, 1):  # raw, RLE
        hsize = (1, 2, 1, 3)[fmt]
        hv = _le(b, 0, hsize, "literals header")
        regen = hv >> 3 if hsize == 1 else hv >> 4
        out.room(regen)
        if kind == 0:
            if hsize + regen > len(b):
                raise DecompressError("zstd: raw literals run past the block")
            return hsize + regen, b[hsize:hsize + regen]
        return hsize + 1, bytes([_le(b, hsize, 1, "RLE literal")]) * regen
    streams, hsize, bits = ((1, 3, 10), (4, 3, 10), (4, 4, 14), (4, 5, 18))[fmt]
    if len(b) < 5:
        raise DecompressError("zstd: a compressed block too short for its compressed literals")
    hv = _le(b, 0, hsize, "literals header")
    regen, comp = hv >> 4 & ((1 << bits) - 1), hv >> (4 + bits) & ((1 << bits) - 1)
    out.room(regen)
    if streams == 4 and regen < 6:
        raise DecompressError(f"zstd: {regen} Huffman-coded literals in 4 streams (at least 6)")
    if hsize + comp > len(b):
        raise DecompressError("zstd: compressed literals run past the block")
    data = b[hsize:hsize + comp]
    if kind == 2:
        st.huffman, used = huffman_description(data)
        budget.spend(len(st.huffman.symbols) // 8 + 32)  # the table's cells and its weights
        data = data[used:]
    if st.huffman is None:
        raise DecompressError("zstd: treeless literals with no previous Huffman table")
    budget.spend(regen)
    lits = bytearray()
    if streams == 1:
        huffman_stream(data, st.huffman, regen, lits)
    else:
        if len(data) < 6:
            raise DecompressError("zstd: truncated literal streams jump table")
        s1, s2, s3 = struct.unpack_from("<3H", data)
        seg = (regen + 3) // 4
        bounds = [6, 6 + s1, 6 + s1 + s2, 6 + s1 + s2 + s3, len(data)]
        if bounds[3] > len(data):
            raise DecompressError("zstd: literal streams overrun their section")
        for i in range(4):
            huffman_stream(data[bounds[i]:bounds[i + 1]], st.huffman, seg if i < 3 else regen - 3 * seg, lits)
    return hsize + comp, bytes(lits)


def _sequences(b: bytes, pos: int, out: Out, st: _State, budget: Budget) -> list[tuple[int, int, int]]:
    n0 = _le(b, pos, 1, "sequences header")
    if n0 < 128:
        n, pos = n0, pos + 1
    elif n0 < 255:
        n, pos = ((n0 - 128) << 8) + _le(b, pos + 1, 1, "sequence count"), pos + 2
    else:
        n, pos = _le(b, pos + 1, 2, "sequence count") + 0x7F00, pos + 3
    if n == 0:
        if pos != len(b):
            raise DecompressError(f"zstd: {len(b) - pos} bytes after a block's sequences section of no sequences")
        return []
    if 3 * n > out.block_end - out.pos:  # every sequence's match is at least 3 bytes
        raise DecompressError(f"zstd: {n} sequences cannot fit the {out.block_end - out.pos} bytes the block may "
                              f"hold")
    budget.spend(SEQUENCE_COST * n)
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
            symbol = _le(b, pos, 1, f"RLE {kind} code")
            if symbol >= max_symbols:
                raise DecompressError(f"zstd: RLE {kind} code {symbol} out of range")
            tables[kind] = rle_table(symbol)
            pos += 1
        elif mode == 2:
            counts, log, used = fse_description(b[pos:], max_log, max_symbols)
            budget.spend(1 << log)
            tables[kind] = fse_table(counts, log)
            pos += used
        elif kind in st.tables:
            tables[kind] = st.tables[kind]
        else:
            raise DecompressError(f"zstd: repeat mode for {kind} with no previous table")
    st.tables.update(tables)
    return _decode_sequences(b[pos:], n, tables["literal lengths"], tables["offsets"], tables["match lengths"])


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
