"""zstd's entropy coders, decoded (RFC 8878 section 4): FSE tables (their descriptions, their decoding tables) and
Huffman-coded literals. :mod:`kernelpack.frontends.prebuilt.decompress` reads zstd frames with them; every read is
bounds-checked and
malformed input is a :class:`~kernelpack.core.errors.DecompressError`."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.errors import DecompressError


class BackBits:
    """A zstd backward bitstream: read from the end; the last byte's highest set bit marks where the data starts.
    Bits read past the beginning are zeros (``left`` goes negative), as the format's decoders expect."""

    def __init__(self, data: bytes, what: str) -> None:
        if not data or data[-1] == 0:
            raise DecompressError(f"zstd: {what}: empty bitstream or no end marker")
        self.data = data
        self.left = len(data) * 8 - 9 + data[-1].bit_length()

    def read(self, n: int) -> int:
        if n == 0:
            return 0
        self.left -= n
        pos = self.left
        if pos >= 0:
            v = int.from_bytes(self.data[pos >> 3:(pos + n + 7) >> 3], "little") >> (pos & 7)
            return v & ((1 << n) - 1)
        k = n + pos
        if k <= 0:
            return 0
        return (int.from_bytes(self.data[:(k + 7) >> 3], "little") & ((1 << k) - 1)) << -pos


class FwdBits:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, n: int) -> int:
        end = self.pos + n
        if end > len(self.data) * 8:
            raise DecompressError("zstd: truncated FSE table description")
        v = int.from_bytes(self.data[self.pos >> 3:(end + 7) >> 3], "little") >> (self.pos & 7)
        self.pos = end
        return v & ((1 << n) - 1)




@dataclass(frozen=True)
class Fse:
    log: int
    symbols: tuple[int, ...]
    bits: tuple[int, ...]
    base: tuple[int, ...]


def fse_description(data: bytes, max_log: int, max_symbols: int) -> tuple[list[int], int, int]:
    """(normalized counts, accuracy log, bytes used) of an FSE table description."""
    r = FwdBits(data)
    log = r.read(4) + 5
    if log > max_log:
        raise DecompressError(f"zstd: FSE accuracy log {log} above the maximum {max_log}")
    remaining = 1 << log
    counts: list[int] = []
    while remaining > 0 and len(counts) < 256:
        bits = (remaining + 1).bit_length()
        val = r.read(bits)
        lower = (1 << (bits - 1)) - 1
        threshold = (1 << bits) - 1 - (remaining + 1)
        if (val & lower) < threshold:
            r.pos -= 1
            val &= lower
        elif val > lower:
            val -= threshold
        count = val - 1
        remaining -= abs(count)
        counts.append(count)
        if count == 0:
            while True:
                repeat = r.read(2)
                counts += [0] * repeat
                if repeat != 3:
                    break
    if remaining != 0 or len(counts) > max_symbols:
        raise DecompressError(f"zstd: corrupt FSE table description ({len(counts)} symbols, {remaining} left over)")
    return counts, log, (r.pos + 7) // 8


def fse_table(counts: list[int], log: int) -> Fse:
    size = 1 << log
    symbols = [0] * size
    next_desc = [0] * len(counts)
    high = size
    for s, c in enumerate(counts):
        if c == -1:
            high -= 1
            symbols[high] = s
            next_desc[s] = 1
    step, mask, pos = (size >> 1) + (size >> 3) + 3, size - 1, 0
    for s, c in enumerate(counts):
        if c <= 0:
            continue
        next_desc[s] = c
        for _ in range(c):
            symbols[pos] = s
            pos = (pos + step) & mask
            while pos >= high:
                pos = (pos + step) & mask
    if pos != 0:
        raise DecompressError("zstd: corrupt FSE table (the symbols do not fill it)")
    bits, base = [0] * size, [0] * size
    for i in range(size):
        d = next_desc[symbols[i]]
        next_desc[symbols[i]] += 1
        bits[i] = log - (d.bit_length() - 1)
        base[i] = (d << bits[i]) - size
    return Fse(log, tuple(symbols), tuple(bits), tuple(base))


def rle_table(symbol: int) -> Fse:
    return Fse(0, (symbol,), (0,), (0,))



@dataclass(frozen=True)
class Huffman:
    max_bits: int
    symbols: tuple[int, ...]
    bits: tuple[int, ...]


def huffman_description(data: bytes) -> tuple[Huffman, int]:
    """The literals' Huffman table and the bytes its description used."""
    if not data:
        raise DecompressError("zstd: missing Huffman table description")
    head = data[0]
    if head < 128:
        if 1 + head > len(data):
            raise DecompressError("zstd: truncated Huffman weights")
        weights, used = fse_weights(data[1:1 + head]), 1 + head
    else:
        n = head - 127
        used = 1 + (n + 1) // 2
        if used > len(data):
            raise DecompressError("zstd: truncated Huffman weights")
        weights = [(data[1 + i // 2] >> 4) if i % 2 == 0 else data[1 + i // 2] & 15 for i in range(n)]
    return huffman_table(weights), used


def fse_weights(data: bytes) -> list[int]:
    counts, log, used = fse_description(data, 6, 256)
    table = fse_table(counts, log)
    r = BackBits(data[used:], "Huffman weights")
    s1, s2 = r.read(log), r.read(log)
    out: list[int] = []
    while len(out) < 255:
        out.append(table.symbols[s1])
        s1 = table.base[s1] + r.read(table.bits[s1])
        if r.left < 0:
            out.append(table.symbols[s2])
            return out
        out.append(table.symbols[s2])
        s2 = table.base[s2] + r.read(table.bits[s2])
        if r.left < 0:
            out.append(table.symbols[s1])
            return out
    raise DecompressError("zstd: more than 255 Huffman weights")


def huffman_table(weights: list[int]) -> Huffman:
    if any(w > 11 for w in weights):
        raise DecompressError("zstd: Huffman weight above 11")
    total = sum(1 << (w - 1) for w in weights if w)
    if total == 0:
        raise DecompressError("zstd: Huffman weights are all zero")
    max_bits = total.bit_length()
    left = (1 << max_bits) - total
    if left & (left - 1) or max_bits > 11:
        raise DecompressError("zstd: Huffman weights do not complete a prefix code")
    weights = [*weights, left.bit_length()]
    if weights.count(1) < 2 or weights.count(1) % 2:  # the two longest codes come in pairs (libzstd holds this too)
        raise DecompressError(f"zstd: Huffman weights with {weights.count(1)} symbols of weight 1 (at least 2, an "
                              f"even number)")
    nbits = [max_bits + 1 - w if w else 0 for w in weights]
    count = [0] * (max_bits + 1)
    for b in nbits:
        count[b] += 1
    size = 1 << max_bits
    rank = [0] * (max_bits + 1)
    bits = [0] * size
    for i in range(max_bits, 0, -1):
        rank[i - 1] = rank[i] + count[i] * (1 << (max_bits - i))
        bits[rank[i]:rank[i - 1]] = [i] * (rank[i - 1] - rank[i])
    symbols = [0] * size
    for s, b in enumerate(nbits):
        if b:
            n = 1 << (max_bits - b)
            symbols[rank[b]:rank[b] + n] = [s] * n
            rank[b] += n
    return Huffman(max_bits, tuple(symbols), tuple(bits))


def huffman_stream(data: bytes, table: Huffman, count: int, out: bytearray) -> None:
    """Decode ``count`` literals. The decoder's state is the next ``max_bits`` bits of the backward stream, so each
    symbol is one peek at the current position (the hot loop of the decoder: kept to plain indexing)."""
    if not data or data[-1] == 0:
        raise DecompressError("zstd: empty Huffman stream or no end marker")
    mb, mask, symbols, bits = table.max_bits, (1 << table.max_bits) - 1, table.symbols, table.bits
    d = b"\0\0\0" + data + b"\0\0"  # zeros below the start (read past it: the format's rule) and above the end
    pos = len(data) * 8 - 9 + data[-1].bit_length() + 24
    for _ in range(count):
        p = pos - mb
        if p < 0:
            raise DecompressError("zstd: a Huffman stream ends before its literals do")
        i = p >> 3
        v = (d[i] | d[i + 1] << 8 | d[i + 2] << 16) >> (p & 7) & mask
        out.append(symbols[v])
        pos -= bits[v]
    if pos != 24:
        raise DecompressError("zstd: a Huffman stream does not end where its literals do")
