"""Fatbins made by the nvcc here, split in pure Python: every compression mode nvcc 13.0 offers gives the same cubins
and PTX, byte for byte those of ``nvcc -cubin`` and of ``cuobjdump -xelf/-xptx``; host objects and shared libraries
give theirs from ``.nv_fatbin``; PTX parameter lists read as the cubins lay them out; damage is named. GPU-less."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from kernelpack.cli.describe import find_cuda_tool
from kernelpack.core.cubin import read_cubin
from kernelpack.core.errors import CubinError
from kernelpack.core.ptx import ptx_entries, ptx_target
from kernelpack.frontends.prebuilt import decompress, zstd_blocks
from kernelpack.frontends.prebuilt.fatbin import FatbinError, fatbin_section, is_fatbin, read_fatbin
from prebuilt_support import MODES, Built, session_binaries


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return session_binaries(tmp_path_factory)


def _entries(path: Path) -> list[tuple[str, int, bytes]]:
    return [(e.kind, e.sm, e.data) for e in read_fatbin(path.read_bytes(), path.name)]


def test_what_nvcc_13_compresses_in_each_mode(built: Built) -> None:
    """The findings fatbin.py documents: zstd PTX by default, zstd everything for size, LZ4 PTX for speed."""
    how = {m: [(e.kind, e.compression) for e in read_fatbin(built.fatbin(m).read_bytes())] for m in MODES}
    assert how["default"] == [("cubin", ""), ("cubin", ""), ("ptx", "zstd")]
    assert how["size"] == [("cubin", "zstd"), ("cubin", "zstd"), ("ptx", "zstd")]
    assert how["speed"] == [("cubin", ""), ("cubin", ""), ("ptx", "lz4")]
    assert how["none"] == [("cubin", ""), ("cubin", ""), ("ptx", "")]


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_splits_into_the_cubins_nvcc_cubin_writes(built: Built, mode: str) -> None:
    entries = _entries(built.fatbin(mode))
    assert [(k, sm) for k, sm, _ in entries] == [("cubin", 80), ("cubin", 90), ("ptx", 90)]
    assert entries[0][2] == built.cubin("sm_80").read_bytes()
    assert entries[1][2] == built.cubin("sm_90a").read_bytes()
    assert [str(read_cubin(d).arch) for _, _, d in entries[:2]] == ["sm_80", "sm_90a"]
    assert entries == _entries(built.fatbin("none"))
    assert ptx_target(entries[2][2].decode()) == ptx_target(built.ptx90.read_text())


@pytest.mark.parametrize("mode", MODES)
def test_both_decoders_split_alike_within_a_quarter_of_the_fallbacks_budget(built: Built, mode: str,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """libzstd/liblz4 and the pure-Python fallback give the same entries; the fallback's work on nvcc's frames (per
    input byte) stays within a quarter of its budget, which is what holds hostile input to a few times real data's."""
    budgets: list[zstd_blocks.Budget] = []

    class Counted(zstd_blocks.Budget):
        def __init__(self, input_bytes: int) -> None:
            super().__init__(input_bytes)
            budgets.append(self)

    monkeypatch.setattr(decompress, "Budget", Counted)
    data = built.fatbin(mode).read_bytes()
    with decompress.decoders("python"):
        fallback = _entries_of(data)
    if decompress.library("zstd") is not None and decompress.library("lz4") is not None:
        with decompress.decoders("library"):
            assert _entries_of(data) == fallback
    assert fallback == _entries(built.fatbin("none"))
    for b in budgets:
        used, input_bytes = b.total - b.left, (b.total - zstd_blocks.WORK_BASE) // zstd_blocks.WORK_PER_BYTE
        assert used <= zstd_blocks.WORK_PER_BYTE // 4 * input_bytes + zstd_blocks.WORK_BASE // 4, (used, input_bytes)


def _entries_of(data: bytes) -> list[tuple[str, int, bytes]]:
    return [(e.kind, e.sm, e.data) for e in read_fatbin(data)]


@pytest.mark.parametrize("mode", ["default", "size", "speed"])
def test_the_split_matches_cuobjdump(built: Built, mode: str, tmp_path: Path) -> None:
    tool = find_cuda_tool("cuobjdump")
    if tool is None:
        pytest.skip("cuobjdump not installed (pip install 'kernelpack[tools]')")
    f = built.fatbin(mode)
    subprocess.run([tool, "-xelf", "all", str(f)], cwd=tmp_path, check=True, capture_output=True)
    subprocess.run([tool, "-xptx", "all", str(f)], cwd=tmp_path, check=True, capture_output=True)
    stem = f.stem
    theirs = [(tmp_path / f"{stem}.1.sm_80.cubin").read_bytes(), (tmp_path / f"{stem}.2.sm_90a.cubin").read_bytes(),
              (tmp_path / f"{stem}.1.sm_90.ptx").read_bytes()]
    assert [d for _, _, d in _entries(f)] == theirs


def test_objects_and_shared_libraries_carry_their_fatbins_in_nv_fatbin(built: Built) -> None:
    obj = fatbin_section(built.obj.read_bytes(), "kernels.o")
    assert obj is not None and is_fatbin(obj)
    assert [(e.kind, e.sm) for e in read_fatbin(obj)] == [("cubin", 80), ("ptx", 80)]
    assert read_fatbin(obj)[0].data == built.cubin("sm_80").read_bytes()
    lib = fatbin_section(built.shared.read_bytes(), "libtwo.so")
    assert lib is not None
    entries = read_fatbin(lib, "libtwo.so")  # one container per translation unit, plus nvcc's own sm_75 stub
    cubins = {str(read_cubin(e.data).arch): {k.name for k in read_cubin(e.data).kernels}
              for e in entries if e.kind == "cubin"}
    assert cubins["sm_80"] >= {"add", "axpy"} and cubins["sm_90a"] == {"neg"}
    assert fatbin_section(Path("/bin/sh").read_bytes() if Path("/bin/sh").is_file() else b"") is None


def test_ptx_parameter_sizes_match_the_cubins(built: Built) -> None:
    entries = ptx_entries(built.ptx90.read_text())
    cubin = read_cubin(built.cubin("sm_90a").read_bytes())
    assert set(entries) == {k.name for k in cubin.kernels}
    for k in cubin.kernels:
        assert [p.size for p in entries[k.name]] == [p.size for p in k.params], k.name
    assert [p.size for p in entries["pair"]] == [8, 8] and entries["pair"][0].align == 4
    assert str(ptx_target(built.ptx90.read_text())) == "sm_90"


def test_damaged_fatbins_are_named(built: Built) -> None:
    data = built.fatbin("default").read_bytes()
    with pytest.raises(FatbinError, match=r"k\.fatbin: truncated fatbin: the container at byte 0 claims \d+ bytes"):
        read_fatbin(data[:3000], "k.fatbin")
    first = 16  # the first entry's header
    bad = bytearray(data)
    struct.pack_into("<Q", bad, first + 8, 1 << 40)  # its payload size
    with pytest.raises(FatbinError, match=r"entry 1 \(byte 16\): truncated fatbin"):
        read_fatbin(bytes(bad), "k.fatbin")
    with pytest.raises(FatbinError, match="no fatbin container at byte 0"):
        read_fatbin(b"\x7fELF" + bytes(60), "x")
    ptx_at = next(i for i in range(16, len(data) - 4) if data[i:i + 4] == b"\x28\xb5\x2f\xfd")
    garbled = bytearray(data)
    garbled[ptx_at + 8:ptx_at + 40] = bytes(32)
    with pytest.raises(FatbinError, match=r"cannot expand its zstd-compressed payload.*-compress-mode=none"):
        read_fatbin(bytes(garbled), "k.fatbin")
    assert issubclass(FatbinError, CubinError)
