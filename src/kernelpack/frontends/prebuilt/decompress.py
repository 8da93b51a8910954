"""The two compressions nvcc uses inside fatbins, decoded: LZ4 blocks and Zstandard frames.

nvcc 13.0 compresses fatbin entries by ``-compress-mode``: ``default``/``balance`` compress PTX with zstd (cubins are
stored as is), ``size`` and ``-Xfatbin -compress-all`` compress every entry with zstd, ``speed`` compresses PTX with
LZ4, ``none``/``-no-compress`` nothing (see :mod:`kernelpack.frontends.prebuilt.fatbin`).

Two decoders each: the formats' own libraries where installed (``zstandard`` for libzstd, ``lz4`` for liblz4; the
``prebuilt`` extra), faster and kept by the formats' community, and pure-Python ones as the fallback (LZ4 here, zstd
in :mod:`kernelpack.frontends.prebuilt.zstd_blocks` with :mod:`kernelpack.frontends.prebuilt.entropy`; zstd
dictionaries refused). :func:`decoders` picks one
for a scope. Whichever decodes, the same limits apply, checked before any output is allocated:

* the expected size must be within what the format can expand the input to at all: :data:`ZSTD_MAX_RATIO` (an RLE
  block: 4 bytes for 128 KiB) and :data:`LZ4_MAX_RATIO` times the input (2 GiB at most for LZ4, liblz4's ``int``);
* a zstd frame's structure is read first (:mod:`kernelpack.frontends.prebuilt.zstd_frames`): window, block sizes, the
content sizes
  frames state, against the expected size; libzstd then fills a bytes object of exactly a frame's stated size (the
  object handed on), and a frame stating none is fed to it a block at a time and stopped at the size expected;
* the output is exactly the expected size, or the data is refused; the pure-Python decoders write it into one buffer
  allocated up front, the bytes object handed on (:class:`~kernelpack.frontends.prebuilt.zstd_blocks.Output`), and stop
  on a work
  budget proportional to the input.

Where the pure-Python decoders are stricter than the libraries (the fallback holds a match offset to the frame's
window, libzstd to the frame's start; the fallback refuses an LZ4 block whose last token announces a match, liblz4
ignores that nibble) the differential fuzz counts it (tests/fuzz_decoders.py); no input is accepted by a kernelpack
decoder and refused by the reference, or decoded to other bytes.

Every failure is a :class:`~kernelpack.core.errors.DecompressError` (an allocation that fails too).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from contextvars import ContextVar
from functools import cache
from types import ModuleType
from typing import Any

from ...core.errors import DecompressError
from .zstd_blocks import Budget, Out, Output, copy_back, decode_frame
from .zstd_frames import BLOCK_MAX, MAX_WINDOW, Frame, frames, xxh64

__all__ = ["DECODERS", "LZ4_MAX_RATIO", "ZSTD_MAX_RATIO", "decoders", "library", "lz4_block", "xxh64", "zstd"]

DECODERS = ("auto", "library", "python")
ZSTD_MAX_RATIO = BLOCK_MAX // 4  # 32768: a 4-byte RLE block expands to at most 128 KiB, nothing expands further
LZ4_MAX_RATIO = 255  # each byte of a match length's extension adds at most 255 bytes
LZ4_MAX_SIZE = (1 << 31) - 1
_LIBRARIES = {"zstd": "zstandard", "lz4": "lz4.block"}
_choice: ContextVar[str] = ContextVar("kernelpack_decoders", default="auto")


@contextlib.contextmanager
def decoders(which: str) -> Iterator[None]:
    """Decode with ``which`` in this scope (this thread or task): ``"library"`` (``zstandard`` / ``lz4``; refused
    where not installed), ``"python"`` (the pure-Python fallback) or ``"auto"`` (the library where installed)."""
    if which not in DECODERS:
        raise DecompressError(f"decoders({which!r}): expected one of {', '.join(DECODERS)}")
    token = _choice.set(which)
    try:
        yield
    finally:
        _choice.reset(token)


@cache
def library(fmt: str) -> ModuleType | None:
    """The installed library decoding ``fmt`` ("zstd" or "lz4"), or None."""
    try:
        return importlib.import_module(_LIBRARIES[fmt])
    except ImportError:
        return None


def _pick(fmt: str) -> ModuleType | None:
    which = _choice.get()
    if which == "python":
        return None
    lib = library(fmt)
    if lib is None and which == "library":
        raise DecompressError(f"{fmt}: decoders('library') asked for, but {_LIBRARIES[fmt].split('.')[0]} is not "
                              f"installed (pip install 'kernelpack[prebuilt]')")
    return lib


def _within(fmt: str, src: bytes, size: int, ratio: int, most: int | None = None) -> None:
    if size < 0 or size > ratio * len(src) or (most is not None and size > most):
        cap = f"{ratio} times the input's {len(src)} bytes" + (f" and {most} bytes" if most is not None else "")
        raise DecompressError(f"{fmt}: {len(src)} bytes cannot expand to the {size} bytes expected (the format's "
                              f"ceiling: {cap})")


# ------------------------------------------------------------------------------------------------ zstd


def zstd(src: bytes, size: int, *, need_size: bool = False) -> bytes:
    """Decode every frame of ``src`` (skippable frames are skipped) into exactly ``size`` bytes. ``need_size``: every
    frame must state its content size (nvcc's do)."""
    _within("zstd", src, size, ZSTD_MAX_RATIO)
    found = frames(src, size, need_size)
    lib = _pick("zstd")
    try:
        out = _zstd_library(lib, src, found, size) if lib is not None else _zstd_python(src, found, size)
    except MemoryError:
        raise DecompressError(f"zstd: cannot allocate the {size} bytes the data expands to") from None
    if len(out) != size:
        raise DecompressError(f"zstd: the data expands to {len(out)} bytes, {size} expected")
    return out


def _zstd_python(src: bytes, found: list[Frame], size: int) -> bytes:
    out, budget = Out(size), Budget(len(src))
    for f in found:
        decode_frame(src, f, out, budget)
    if out.pos != size:
        raise DecompressError(f"zstd: the data expands to {out.pos} bytes, {size} expected")
    return out.result()


def _zstd_library(zstandard: ModuleType, src: bytes, found: list[Frame], size: int) -> bytes:
    """libzstd on each frame: a frame stating its size (nvcc's do) in one call into a bytes object of exactly that
    size, the one handed on (libzstd then checks offsets against the frame's start; the fallback checks the window
    too); else streamed and stopped at the size expected."""
    dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
    view, parts, left = memoryview(src), [], size
    try:
        for f in found:
            if f.size:  # (libzstd returns b"" for a stated size of 0 without reading the blocks: streamed)
                part = dctx.decompress(view[f.start:f.end], max_output_size=f.size, allow_extra_data=False)
            else:
                part = _zstd_streamed(dctx, view, f, left if f.size is None else f.size)
            left -= len(part)
            if left < 0:
                raise DecompressError(f"zstd: the frames expand to more than the {size} bytes expected")
            parts.append(part)
    except zstandard.ZstdError as e:
        raise DecompressError(f"zstd: libzstd refused the data: {e}") from None
    return b"".join(parts)  # one frame (nvcc's case): that frame's bytes, not a copy


def _zstd_streamed(dctx: Any, view: memoryview, f: Frame, most: int) -> bytes:
    """One frame through libzstd's streaming decoder (its buffer: the window), fed a block at a time so that it stops
    once the output passes ``most`` bytes."""
    obj = dctx.decompressobj(write_size=1 << 17)
    parts, got, pos = [], 0, f.start
    for end in [b.start + b.size for b in f.blocks] + [f.end]:
        if end == pos:
            continue
        part = obj.decompress(view[pos:end])
        pos, got = end, got + len(part)
        if got > most:
            raise DecompressError(f"zstd: the frame at byte {f.start} expands past the {most} bytes expected")
        parts.append(part)
    if not obj.eof or obj.unused_data:
        raise DecompressError(f"zstd: the frame at byte {f.start} is truncated or has trailing data")
    return b"".join(parts)


# ------------------------------------------------------------------------------------------------ LZ4


def lz4_block(src: bytes, size: int) -> bytes:
    """Decode one LZ4 block (no frame) that expands to exactly ``size`` bytes."""
    _within("LZ4", src, size, LZ4_MAX_RATIO, LZ4_MAX_SIZE)
    lib = _pick("lz4")
    try:
        if lib is None:
            return _lz4_python(src, size)
        try:
            out = lib.decompress(src, uncompressed_size=size)
        except lib.LZ4BlockError as e:
            raise DecompressError(f"LZ4: liblz4 refused the block: {e}") from None
    except MemoryError:
        raise DecompressError(f"LZ4: cannot allocate the {size} bytes the block expands to") from None
    if len(out) != size:
        raise DecompressError(f"LZ4: the block expands to {len(out)} bytes, {size} expected")
    return bytes(out)


def _lz4_python(src: bytes, size: int) -> bytes:
    """The LZ4 block format's rules, as liblz4's ``LZ4_decompress_safe`` holds them (or stricter): literals ending in
    the last 12 bytes of output or 8 of input end the block, which ends with a literals-only sequence; a match ends
    at least 5 bytes before the output does; an offset is 1 to the bytes written so far."""
    n = len(src)
    if n == 0:
        raise DecompressError("LZ4: an empty block")
    out = Output(size)
    mv = out.mv
    i = op = 0
    while True:
        token = src[i]
        i += 1
        lit = token >> 4
        if lit == 15:
            lit, i = _lz4_length(src, i, lit, n - 15, initial=True)
        end = i + lit
        if end == n:  # the last sequence: literals only, exactly filling the output
            if token & 15 or op + lit != size:
                raise DecompressError(f"LZ4: the last sequence (byte {i - 1}) must hold literals only and end the "
                                      f"output ({op + lit} of {size} bytes; match nibble {token & 15})")
            mv[op:size] = src[i:end]
            return out.result()
        if end > n - 8 or op + lit > size - 12:
            raise DecompressError(f"LZ4: literals at byte {i} run into the block's last 8 input or 12 output bytes "
                                  f"without ending it")
        mv[op:op + lit] = src[i:end]
        op, i = op + lit, end
        off = src[i] | src[i + 1] << 8
        i += 2
        match = token & 15
        if match == 15:
            match, i = _lz4_length(src, i, match, n - 4, initial=False)
        match += 4
        if off == 0 or off > op or op + match > size - 5:
            raise DecompressError(f"LZ4: match (offset {off}, length {match}) at byte {i} outside the output ({op} "
                                  f"of {size} bytes; the last 5 are literals)")
        copy_back(mv, op, off, match)
        op += match


def _lz4_length(src: bytes, i: int, n: int, limit: int, initial: bool) -> tuple[int, int]:
    """A length's extension bytes (255 means more follow); reading may not pass ``limit`` (liblz4's bounds)."""
    if initial and i >= limit:
        raise DecompressError(f"LZ4: a literal length at byte {i} too close to the block's end")
    while True:
        b = src[i]
        i += 1
        n += b
        if i > limit:
            raise DecompressError(f"LZ4: a length at byte {i} runs too close to the block's end")
        if b != 255:
            return n, i
