"""The pure-Python cubin reader against real nvcc cubins, cuobjdump's view of them, and garbled input."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolchain_support
from cubin_factory import CubinFactory, cuobjdump_view
from kernelpack.core.arch import Arch
from kernelpack.core.cubin import Cubin, KParam, is_cubin, read_cubin
from kernelpack.core.errors import CubinError

MAIN_SRC = r"""
#include <cuda.h>
struct Big { char b[5000]; };
extern "C" __global__ void k_scalars(char c, short s, double d, int* out) { out[0] = c + s + (int)d; }
extern "C" __global__ void k_big(Big b, int* out) { out[0] = b.b[4999]; }
extern "C" __global__ void k_tma(char c, const __grid_constant__ CUtensorMap m, int* out) {
  out[0] = c + ((const int*)&m)[3];
}
extern "C" __global__ void k_unused(int a, float* unused, double b) {}
extern "C" __global__ void __launch_bounds__(256, 2) k_bounds(float* x) { x[threadIdx.x] += 1.f; }
extern "C" __global__ void k_zero() {}
__global__ void k_mangled(int a, float b) {}
template <int N> __global__ void k_tmpl(float* x) { x[N] = 1; }
template __global__ void k_tmpl<3>(float*);
extern "C" __global__ void k_smem(float* x) {
  __shared__ float s[10240];  // 40 KiB
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = s[10239 - threadIdx.x];
}
extern "C" __global__ void k_dyn(float* x) {
  extern __shared__ float d[];
  d[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = d[threadIdx.x ^ 1];
}
"""
MAIN_KERNELS = set(
    "k_scalars k_big k_tma k_unused k_bounds k_zero _Z9k_mangledif _Z6k_tmplILi3EEvPf k_smem k_dyn".split()
)

SM90_SRC = r"""
extern "C" __global__ void __cluster_dims__(2, 1, 1) k_cluster(float* x) { x[threadIdx.x] = 1.f; }
extern "C" __global__ void __launch_bounds__(128, 1, 4) k_rank(float* x) { x[threadIdx.x] = 2.f; }
extern "C" __global__ void __block_size__((128, 2, 1)) k_block(float* x) { x[threadIdx.x] = 3.f; }
"""

SPILL_SRC = r"""
extern "C" __global__ void k_spill(float* x, int n) {
  float acc[64];
  #pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = x[i * n + threadIdx.x];
  for (int j = 0; j < n; ++j) {
    #pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = acc[i] * acc[(i + j) & 63] + acc[(i * 7 + 3) & 63];
  }
  float s = 0;
  #pragma unroll
  for (int i = 0; i < 64; ++i) s += acc[i];
  x[threadIdx.x] = s;
}
"""

HELPER_SRC = r"""
__shared__ float tile[256];
__device__ __noinline__ float helper(float* x) {
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  return tile[threadIdx.x ^ 1];
}
extern "C" __global__ void k_helper(float* x) { x[threadIdx.x] = helper(x); }
"""

ARCHS = ("sm_80", "sm_90a", "sm_100a", "sm_120")
# Start of the param area in constant bank 0 for small param buffers, measured with nvcc 13.0.
PARAM_BASE = {"sm_80": 0x160, "sm_90a": 0x210, "sm_100a": 0x380, "sm_120": 0x380}
SPILL_OPTS = ("-maxrregcount=32",)


def _archs(build_cubin: CubinFactory, archs: tuple[str, ...] = ARCHS) -> list[str]:
    return [a for a in archs if build_cubin.supports(a)]


@pytest.fixture(scope="module")
def main(build_cubin: CubinFactory) -> dict[str, Cubin]:
    return {a: read_cubin(build_cubin(MAIN_SRC, a)) for a in _archs(build_cubin)}


@pytest.fixture(scope="module")
def sm90(build_cubin: CubinFactory) -> dict[str, Cubin]:
    return {a: read_cubin(build_cubin(SM90_SRC, a)) for a in _archs(build_cubin, ("sm_90a", "sm_100a"))}


@pytest.fixture(scope="module")
def spill(build_cubin: CubinFactory) -> dict[str, Cubin]:
    return {a: read_cubin(build_cubin(SPILL_SRC, a, SPILL_OPTS)) for a in _archs(build_cubin, ("sm_80", "sm_90a"))}


@pytest.fixture(scope="module")
def sample(build_cubin: CubinFactory) -> bytes:
    """A sm_90a cubin with params, V2 params, shared memory, launch bounds: the victim of the garbling tests."""
    return build_cubin(MAIN_SRC, "sm_90a")


def _params(cubin: Cubin, name: str) -> list[tuple[int, int, int]]:
    return [(p.ordinal, p.offset, p.size) for p in cubin.kernel(name).params]


# ---- what the reader extracts ------------------------------------------------------------------------------------


def test_small_scalars_get_their_natural_size_and_alignment(main: dict[str, Cubin]) -> None:
    for arch, cubin in main.items():
        k = cubin.kernel("k_scalars")
        assert _params(cubin, "k_scalars") == [(0, 0, 1), (1, 2, 2), (2, 8, 8), (3, 16, 8)], arch
        assert k.param_bytes == 24 and k.param_base == PARAM_BASE[arch]


def test_params_sorted_by_ordinal_although_the_file_lists_them_descending(
    sample: bytes, main: dict[str, Cubin]
) -> None:
    _, h = _section(sample, ".nv.info.k_scalars")
    first = sample.index(b"\x04\x17\x0c\x00", h[4])  # the first KPARAM_INFO record of k_scalars
    assert struct.unpack_from("<H", sample, first + 8)[0] == 3  # ... is the last parameter
    assert [p.ordinal for p in main["sm_90a"].kernel("k_scalars").params] == [0, 1, 2, 3]


def test_struct_params_above_4352_bytes_use_kparam_info_v2(sample: bytes, main: dict[str, Cubin]) -> None:
    assert b"\x04\x45\x0c\x00" in sample  # fmt 4, id 0x45 (KPARAM_INFO_V2), 12 bytes
    for cubin in main.values():
        assert _params(cubin, "k_big") == [(0, 0, 5000), (1, 5000, 8)]
        assert cubin.kernel("k_big").param_bytes == 5008


def test_sm80_moves_the_param_area_of_a_large_param_buffer(main: dict[str, Cubin]) -> None:
    # Surprise found here: on sm_80 a 5008-byte buffer starts at 0x1a80 in bank 0, not 0x160; sm_90+ keep the base.
    assert main["sm_80"].kernel("k_big").param_base == 0x1A80
    for arch in set(main) - {"sm_80"}:
        assert main[arch].kernel("k_big").param_base == PARAM_BASE[arch]


def test_tensor_map_offset_depends_on_arch_because_alignment_is_absolute(main: dict[str, Cubin]) -> None:
    offsets = {}
    for arch, cubin in main.items():
        k = cubin.kernel("k_tma")
        (c, m, out) = k.params
        assert (c.size, m.size, out.size) == (1, 128, 8)
        assert (k.param_base + m.offset) % 128 == 0, arch  # CUtensorMap is alignas(128) in CUDA 13
        offsets[arch] = m.offset
    expected = {"sm_80": 0x20, "sm_90a": 0x70, "sm_100a": 0x80, "sm_120": 0x80}
    assert offsets == {arch: expected[arch] for arch in main}
    assert len(set(offsets.values())) > 1


def test_unused_params_are_kept(main: dict[str, Cubin]) -> None:
    for cubin in main.values():
        assert _params(cubin, "k_unused") == [(0, 0, 4), (1, 8, 8), (2, 16, 8)]


def test_zero_param_kernel_has_no_params_and_no_param_area(main: dict[str, Cubin]) -> None:
    for cubin in main.values():
        k = cubin.kernel("k_zero")
        assert (k.params, k.param_bytes, k.param_base) == ((), 0, 0)


def test_launch_bounds_give_max_threads_and_a_register_cap(main: dict[str, Cubin]) -> None:
    for cubin in main.values():
        k = cubin.kernel("k_bounds")
        assert k.max_threads == (256, 1, 1) and k.reqntid is None
        assert k.max_registers == 128  # 65536 registers / (256 threads * 2 blocks)
        assert cubin.kernel("k_zero").max_registers == 255 and cubin.kernel("k_zero").max_threads is None


def test_extern_c_and_mangled_cxx_names_in_one_cubin(main: dict[str, Cubin]) -> None:
    for cubin in main.values():
        assert {k.name for k in cubin.kernels} == MAIN_KERNELS
        assert cubin.kernel("_Z9k_mangledif").params == (KParam(0, 0, 4), KParam(1, 4, 4))


def test_unknown_kernel_name_lists_the_available_ones(main: dict[str, Cubin]) -> None:
    with pytest.raises(CubinError, match=r"no kernel 'k_missing' in this sm_90a cubin; available: .*k_scalars"):
        main["sm_90a"].kernel("k_missing")


def test_static_shared_memory_excludes_the_1k_system_reserve_from_sm90(main: dict[str, Cubin]) -> None:
    for arch, cubin in main.items():
        reserve = 1024 if Arch.parse(arch).sm >= 90 else 0
        k = cubin.kernel("k_smem")
        assert (k.static_smem, k.smem_reserved) == (40 * 1024, reserve), arch
        dyn = cubin.kernel("k_dyn")  # dynamic shared memory only: on sm_90+ a section holding just the reserve
        assert (dyn.static_smem, dyn.smem_reserved) == (0, reserve), arch
        # extern __shared__ in the module gives every kernel a section, so k_zero carries the reserve as well
        zero = cubin.kernel("k_zero")
        assert (zero.static_smem, zero.smem_reserved) == (0, reserve), arch


def test_forced_spills_show_as_stack_bytes_under_a_register_cap(spill: dict[str, Cubin]) -> None:
    assert spill
    for cubin in spill.values():
        k = cubin.kernel("k_spill")
        assert k.registers <= 32 and k.max_registers == 32
        assert k.stack_bytes > 0 and k.frame_bytes >= k.stack_bytes


def test_noinline_device_functions_are_not_kernels(build_cubin: CubinFactory) -> None:
    for arch in _archs(build_cubin, ("sm_80", "sm_90a")):
        cubin = read_cubin(build_cubin(HELPER_SRC, arch))
        assert [k.name for k in cubin.kernels] == ["k_helper"]  # the FUNC symbol of helper lacks STO_CUDA_ENTRY
        assert cubin.kernel("k_helper").static_smem == 256 * 4  # file-scope __shared__ lands in the kernel's section


def test_small_kernels_need_no_stack_and_few_registers(main: dict[str, Cubin]) -> None:
    for cubin in main.values():
        k = cubin.kernel("k_scalars")
        assert 0 < k.registers <= 32 and k.stack_bytes == 0 and k.frame_bytes == 0


def test_cluster_dims_are_explicit_and_max_cluster_rank_is_read(sm90: dict[str, Cubin]) -> None:
    assert sm90, "nvcc cannot target sm_90a"
    for cubin in sm90.values():
        k = cubin.kernel("k_cluster")
        assert k.cluster_dims == (2, 1, 1) and k.explicit_cluster
        rank = cubin.kernel("k_rank")
        assert rank.max_cluster_rank == 4 and not rank.explicit_cluster and rank.max_threads == (128, 1, 1)


def test_block_size_becomes_reqntid(sm90: dict[str, Cubin]) -> None:
    for cubin in sm90.values():
        k = cubin.kernel("k_block")
        assert k.reqntid == (128, 2, 1) and k.max_threads is None
        assert k.cluster_dims == (1, 1, 1) and not k.explicit_cluster


def test_arch_and_toolkit_version_come_from_the_elf(main: dict[str, Cubin], build_cubin: CubinFactory) -> None:
    out = subprocess.run([str(build_cubin.nvcc), "--version"], capture_output=True, text=True).stdout
    release = re.search(r"release (\d+\.\d+)", out)
    for arch, cubin in main.items():
        assert cubin.arch == Arch.parse(arch)
        assert release is None or cubin.toolkit_version == release.group(1)


def test_family_suffix_is_not_recorded_so_sm100f_reads_as_sm100(build_cubin: CubinFactory) -> None:
    if not build_cubin.supports("sm_100f"):
        pytest.skip("nvcc cannot target sm_100f")
    src = 'extern "C" __global__ void k(int* x) { x[0] = 1; }'
    assert read_cubin(build_cubin(src, "sm_100f")).arch == Arch(10, 0, "")
    assert read_cubin(build_cubin(src, "sm_100a")).arch == Arch(10, 0, "a")


def test_old_elf_layout_keeps_sm_in_low_byte_and_a_in_0x800(sample: bytes) -> None:
    def old(flags: int, version: int) -> bytes:
        # ABI-7 header as ptxas <= 12.5 wrote it; hide the notes so e_version is the toolkit source.
        data = bytearray(sample.replace(b".note.nv.tkinfo\0", b".note.nv.xxinfo\0"))
        data = bytearray(data.replace(b".note.nv.cuinfo\0", b".note.nv.xxinfo\0"))
        data[7:9] = bytes([0x33, 7])
        struct.pack_into("<I", data, 20, version)
        struct.pack_into("<I", data, 48, flags)
        return bytes(data)

    assert read_cubin(old(0x5A0D5A, 125)).arch == Arch(9, 0, "a")
    assert read_cubin(old(0x5A055A, 125)).arch == Arch(9, 0, "")
    assert read_cubin(old(0x3C0D3C, 90)).arch == Arch(6, 0, "")  # seen in cupti: 0x800 on sm_60, cuobjdump says sm_60
    assert read_cubin(old(0x5A0D5A, 125)).toolkit_version == "12.5"


def test_dataclasses_are_frozen(main: dict[str, Cubin]) -> None:
    with pytest.raises(FrozenInstanceError):
        main["sm_90a"].kernel("k_zero").registers = 1  # type: ignore[misc]


# ---- what the reader refuses ----------------------------------------------------------------------------------------


def test_relocatable_rdc_cubin_is_refused(build_cubin: CubinFactory) -> None:
    data = build_cubin(SM90_SRC, "sm_90a", ("-rdc=true",))
    assert is_cubin(data) and struct.unpack_from("<H", data, 16)[0] == 1  # ET_REL
    with pytest.raises(CubinError, match="relocatable cubin"):
        read_cubin(data)


def test_non_elf_non_cuda_and_32bit_input_is_refused(sample: bytes) -> None:
    host_elf = Path(sys.executable).resolve().read_bytes()[:4096]
    cases = {
        b"": "not an ELF file",
        b"PK\x03\x04 a zip": "not an ELF file",
        sample[:40]: "shorter than the 64-byte ELF64 header",
        sample[:4] + b"\x01" + sample[5:]: "32-bit ELF",
        sample[:5] + b"\x02" + sample[6:]: "big-endian",
        sample[:16] + b"\x03\x00" + sample[18:]: "unsupported ELF type 3",
    }
    if host_elf[:4] == b"\x7fELF" and host_elf[4] == 2:
        cases[host_elf] = "not a CUDA cubin"
    for data, message in cases.items():
        with pytest.raises(CubinError, match=message):
            read_cubin(data)


def test_is_cubin_checks_only_magic_and_machine(sample: bytes) -> None:
    assert is_cubin(sample) and is_cubin(sample[:20])
    assert not is_cubin(b"\x7fELF") and not is_cubin(b"hello world, not an elf")
    assert not is_cubin(sample[:18] + b"\x3e\x00" + sample[20:])  # EM_X86_64


def _section_headers(data: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    shoff = struct.unpack_from("<Q", data, 40)[0]
    count = struct.unpack_from("<H", data, 60)[0]
    return shoff, count, [struct.unpack_from("<IIQQQQIIQQ", data, shoff + 64 * i) for i in range(count)]


def _section(data: bytes, name: str) -> tuple[int, tuple[int, ...]]:
    """(header offset, header fields) of the named section."""
    shoff, _, headers = _section_headers(data)
    names = headers[struct.unpack_from("<H", data, 62)[0]]
    for i, h in enumerate(headers):
        start = names[4] + h[0]
        if data[start : data.index(b"\0", start)].decode() == name:
            return shoff + 64 * i, h
    raise AssertionError(name)


def _outcome(data: bytes) -> str:
    """"ok", or the CubinError reading the cubin and all its kernels gives (a kernel's records are read when that
    kernel is first asked for)."""
    try:
        cubin = read_cubin(data)
        repr(cubin.kernels)
        repr(cubin)
    except CubinError as e:
        return str(e)
    return "ok"


def test_truncation_at_any_length_raises_cuberror_only(sample: bytes) -> None:
    _, _, headers = _section_headers(sample)
    cuts = set(range(0, 80)) | set(range(0, len(sample), max(1, len(sample) // 300)))
    cuts |= {h[4] + d for h in headers for d in (-1, 0, 1)} | {h[4] + h[5] + d for h in headers for d in (-1, 0, 1)}
    for n in sorted(c for c in cuts if 0 <= c < len(sample)):
        assert _outcome(sample[:n]) != "ok", n


def test_corrupt_section_header_fields_raise_cuberror_only(sample: bytes) -> None:
    shoff, count, _ = _section_headers(sample)
    fields = {0: "I", 4: "I", 24: "Q", 32: "Q", 40: "I", 44: "I", 56: "Q"}  # name type offset size link info entsize
    for i in range(count):
        for rel, fmt in fields.items():
            for value in (0, 1, 0x7FFFFFFF, (1 << (8 * struct.calcsize(fmt))) - 1):
                data = bytearray(sample)
                struct.pack_into("<" + fmt, data, shoff + 64 * i + rel, value)
                _outcome(bytes(data))  # any CubinError or a result; nothing else may escape


def test_corrupt_elf_header_fields_say_what_is_wrong(sample: bytes) -> None:
    def patched(offset: int, fmt: str, value: int) -> str:
        data = bytearray(sample)
        struct.pack_into(fmt, data, offset, value)
        return _outcome(bytes(data))

    assert "section headers end at" in patched(40, "<Q", len(sample))  # e_shoff past the end
    assert "section headers end at" in patched(60, "<H", 0xFFFF)  # e_shnum too large
    assert "no usable section header table" in patched(60, "<H", 0)
    assert "section-name table index" in patched(62, "<H", 0xFFFF)


def test_garbled_tables_and_records_name_the_problem(sample: bytes) -> None:
    def patched(offset: int, fmt: str, value: int) -> str:
        data = bytearray(sample)
        struct.pack_into(fmt, data, offset, value)
        return _outcome(bytes(data))

    at, h = _section(sample, ".nv.info.k_scalars")
    assert patched(at + 24, "<Q", h[4]) == "ok"  # sanity: an unchanged offset parses
    assert "section" in patched(at + 32, "<Q", len(sample))  # section data past the end of the file
    assert "outside its string table" in patched(at, "<I", 0xFFFFFF)  # section name offset out of range
    record = sample.index(b"\x04\x17\x0c\x00", h[4])  # a KPARAM_INFO record of k_scalars
    assert "past the section end" in patched(record + 2, "<H", 0xFFF0)
    assert "unknown format 9" in patched(record, "<B", 9)
    version = sample.index(b"\x04\x37\x04\x00", h[4])  # CUDA_API_VERSION (4 bytes) relabelled as KPARAM_INFO
    assert "record 0x17 has 4 bytes, expected 12" in patched(version + 1, "<B", 0x17)
    _, info = _section(sample, ".nv.info")
    assert "names symbol 65535" in patched(info[4] + 4, "<I", 0xFFFF)  # REGCOUNT of a symbol that does not exist
    _, symtab = _section(sample, ".symtab")
    assert "name of symbol 1" in patched(symtab[4] + 24, "<I", 0xFFFFFF)
    strtab = _section_headers(sample)[2][symtab[6]]
    data = bytearray(sample)
    data[strtab[4] + 1] = 0xFF  # the first symbol name now starts with a byte that is not UTF-8
    struct.pack_into("<I", data, symtab[4] + 24, 1)
    assert "not valid UTF-8" in _outcome(bytes(data))


def test_one_kernel_is_read_without_the_others_records(sample: bytes) -> None:
    """A kernel's own records are read when it is first asked for: a garbled record of k_scalars does not stop
    another kernel of the same cubin, and still fails, naming the problem, where k_scalars is read."""
    at, h = _section(sample, ".nv.info.k_scalars")
    data = bytearray(sample)
    struct.pack_into("<H", data, sample.index(b"\x04\x17\x0c\x00", h[4]) + 2, 0xFFF0)
    cubin = read_cubin(bytes(data))
    others = [n for n in (k.name for k in read_cubin(sample).kernels) if n != "k_scalars"]
    assert others and all(cubin.kernel(n).name == n for n in others)
    with pytest.raises(CubinError, match="past the section end"):
        cubin.kernel("k_scalars")
    with pytest.raises(CubinError, match="past the section end"):
        cubin.kernels  # noqa: B018 - reading every kernel reads it too
    assert read_cubin(sample).kernel("k_scalars") == next(k for k in read_cubin(sample).kernels
                                                          if k.name == "k_scalars")


def _regions(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges the parser interprets: the ELF header, section headers, tables, notes and .nv.info records."""
    shoff, count, headers = _section_headers(data)
    out = [(0, 64), (shoff, shoff + 64 * count)]
    out += [(h[4], h[4] + h[5]) for h in headers if h[5] and h[1] in (2, 3, 7, 0x70000000, 0x70000086)]
    return out


@pytest.fixture(scope="module")
def regions(sample: bytes) -> list[tuple[int, int]]:
    return _regions(sample)


_EDIT = st.tuples(st.integers(0, 10**6), st.floats(0, 1, exclude_max=True), st.integers(0, 255))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(_EDIT, min_size=1, max_size=6))
def test_random_byte_edits_raise_cuberror_or_parse(
    sample: bytes, regions: list[tuple[int, int]], edits: list[tuple[int, float, int]]
) -> None:
    data = bytearray(sample)
    for region, where, value in edits:
        start, end = regions[region % len(regions)]
        data[start + int(where * (end - start))] = value
    _outcome(bytes(data))


# ---- cross-check with cuobjdump ----------------------------------------------------------------------------------


def test_reader_agrees_with_cuobjdump_on_every_test_cubin(build_cubin: CubinFactory, capsys) -> None:
    cuobjdump = toolchain_support.cuobjdump()
    if cuobjdump is None:
        pytest.skip("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    paths = [build_cubin.path(MAIN_SRC, a) for a in _archs(build_cubin)]
    paths += [build_cubin.path(SM90_SRC, a) for a in _archs(build_cubin, ("sm_90a", "sm_100a"))]
    paths += [build_cubin.path(SPILL_SRC, a, SPILL_OPTS) for a in _archs(build_cubin, ("sm_80", "sm_90a"))]
    paths += [build_cubin.path(HELPER_SRC, a) for a in _archs(build_cubin, ("sm_80", "sm_90a"))]
    paths += sorted(set(build_cubin.cache_dir.glob("*.cubin")) - set(paths))  # whatever else this session built
    compared = kernels = 0
    for path in paths:
        data = path.read_bytes()
        if struct.unpack_from("<H", data, 16)[0] != 2:
            continue  # relocatable: refused by the reader, covered above
        cubin, view = read_cubin(data), cuobjdump_view(cuobjdump, path)
        assert str(cubin.arch) == f"sm_{view.arch}" and cubin.toolkit_version == view.toolkit, path
        assert [k.name for k in cubin.kernels] == list(view.kernels), path
        for k in cubin.kernels:
            theirs = view.kernels[k.name]
            assert sorted(theirs.params) == [(p.ordinal, p.offset, p.size) for p in k.params], (path, k.name)
            assert (theirs.reg, theirs.stack, theirs.shared) == (
                k.registers,
                k.stack_bytes,
                k.static_smem + k.smem_reserved,  # cuobjdump reports the section size, reserve included
            ), (path, k.name)
            kernels += 1
        compared += 1
    assert compared >= len(_archs(build_cubin))
    with capsys.disabled():
        print(f"\ncuobjdump cross-check: {compared} cubins, {kernels} kernels agree")
