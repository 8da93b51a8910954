"""The prebuilt frontend: a team's own nvcc output (fatbins in every compression mode, cubins, PTX, host objects, shared
libraries) shipped through kernelpack: typed from C parameter lists (or mangled names), verified against every cubin,
refused with the kernel, parameter and sizes named; built from ``[[cubin]]`` entries by ``kernelpack build``, launched
through ``kernelpack.load`` on the in-process fake driver and through the generated C library on the fake libcuda.
GPU-less (the GPU half is tests/test_prebuilt_gpu.py)."""

from __future__ import annotations

import struct
import textwrap
from pathlib import Path
from typing import Any

import pytest

import kernelpack
from kernelpack import prebuilt
from kernelpack.core import config
from kernelpack.core.abi import Abi, DType, Param, Pointer, Scalar
from kernelpack.core.errors import AbiMismatch, CompileError, CubinError, ProjectError
from kernelpack.core.launchspec import LaunchSpec
from kernelpack.core.packing import pack_params
from kernelpack.prebuilt import Kernel
from kernelpack.project import Cubin, build, load_project
from prebuilt_support import FILL_F32, FILL_I32, MODES, PARAMS, Built, session_binaries

ALL = {**PARAMS, FILL_F32: None, FILL_I32: None}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return session_binaries(tmp_path_factory)


def _by_label(bundle):  # type: ignore[no-untyped-def]
    return {a.label: a for a in bundle}


# ------------------------------------------------------------------------------------------------ the verb


def test_a_fatbin_becomes_typed_verified_artifacts_for_every_arch_it_carries(built: Built) -> None:
    arts = _by_label(prebuilt.compile(built.fatbin(), ALL))
    assert sorted(arts) == ["add", "axpy", "fill[float]", "fill[int]", "mixed", "pair", "scale_half"]
    for a in arts.values():
        assert [(str(b.arch), b.kind) for b in a.binaries] == [("sm_80", "cubin"), ("sm_90a", "cubin"),
                                                               ("sm_90", "ptx")]
        assert a.provenance.frontend == "prebuilt" and a.provenance.compiler == "ptxas 13.0"
    assert arts["add"].abi.describe() == "const float* x, const float* y, float* out, int32_t n"
    assert arts["axpy"].abi.describe() == "float a, const float* x, float* y, int64_t n"
    half = [Scalar(DType.f16), Pointer(DType.f16), Scalar(DType.u32)]
    assert [p.type for p in arts["scale_half"].abi.params] == half
    assert arts["mixed"].abi.describe() == ("bool on, uint8_t c, int16_t s, double d, uint64_t n, float* out")
    pair = arts["pair"].abi.params[0].type
    assert (pair.size, pair.c_type) == (8, "kp_Pair")  # a struct by value: opaque, sized by the cubin
    # C++ kernels: family, variant and types from the mangled name (names p0, p1... as the symbol has none)
    assert arts["fill[float]"].entry == FILL_F32 and arts["fill[int]"].entry == FILL_I32
    assert arts["fill[int]"].abi.describe() == "int32_t* p0, int32_t p1, int32_t p2"
    assert arts["mixed"].cubin_kernel("sm_90a").max_threads == (128, 1, 1)


@pytest.mark.parametrize("mode", MODES)
def test_every_compression_mode_and_every_input_form_gives_the_same_bundle(built: Built, mode: str) -> None:
    want = prebuilt.compile(built.fatbin("none"), ALL).to_bytes()
    assert prebuilt.compile(built.fatbin(mode), ALL).to_bytes() == want
    loose = [built.cubin("sm_90a"), str(built.cubin("sm_80")), built.ptx90.read_bytes()]
    assert prebuilt.compile(loose, ALL).to_bytes() != b""  # nvcc -ptx keeps comments: another PTX text
    assert _by_label(prebuilt.compile([built.fatbin(mode).read_bytes()], ALL))["add"].binaries == \
        _by_label(prebuilt.compile([built.cubin("sm_80"), built.cubin("sm_90a"), built.fatbin(mode)], ALL))[
            "add"].binaries, "identical copies of one binary are one"


def test_kernels_name_families_variants_and_launch_specs(built: Built) -> None:
    spec = {"add": Kernel(PARAMS["add"], name="vadd", variant="f32", launch=LaunchSpec(block=(256, 1, 1))),
            FILL_F32: Kernel(name="fill", variant="f"), FILL_I32: "int* y, int v, int n",
            "axpy": Abi((Param("alpha", Scalar(DType.f32)), Param("x", Pointer(DType.f32, const=True)),
                         Param("y", Pointer(DType.f32)), Param("n", Scalar(DType.i64))))}
    arts = _by_label(prebuilt.compile([built.fatbin()], spec, launch={"axpy": LaunchSpec(dynamic_smem=64)}))
    assert sorted(arts) == ["axpy", "fill[f]", "fill[int]", "vadd[f32]"]
    assert arts["vadd[f32]"].launch.block == (256, 1, 1) and arts["axpy"].launch.dynamic_smem == 64
    assert arts["fill[int]"].abi.describe() == "int32_t* y, int32_t v, int32_t n"
    assert arts["axpy"].abi.params[0].name == "alpha"


def test_archs_filter_the_binaries(built: Built) -> None:
    (a,) = prebuilt.compile(built.fatbin(), {"add": PARAMS["add"]}, arch=["sm_90a"])
    assert [(str(b.arch), b.kind) for b in a.binaries] == [("sm_90a", "cubin")]
    (a,) = prebuilt.compile(built.fatbin(), {"add": PARAMS["add"]}, arch=["sm_80", "compute_90"])
    assert [(str(b.arch), b.kind) for b in a.binaries] == [("sm_80", "cubin"), ("sm_90", "ptx")]
    with pytest.raises(CompileError, match=r"arch sm_100a, compute_80 PTX asked for, but the binaries carry sm_80, "
                                           r"sm_90a, compute_90 PTX"):
        prebuilt.compile(built.fatbin(), {"add": PARAMS["add"]}, arch=["sm_100a", "compute_80"])


def test_objects_shared_libraries_and_ptx_alone(built: Built) -> None:
    (a,) = prebuilt.compile(built.obj, {"add": PARAMS["add"]})
    assert [(str(b.arch), b.kind) for b in a.binaries] == [("sm_80", "cubin"), ("sm_80", "ptx")]
    (n,) = prebuilt.compile(built.shared, {"neg": "float* y, int n"})  # the sm_80 unit and nvcc's stub hold no neg
    assert [str(b.arch) for b in n.binaries if b.kind == "cubin"] == ["sm_90a"]
    (p,) = prebuilt.compile(built.ptx90, {"pair": PARAMS["pair"]})  # a struct sized from the PTX alone
    assert [(str(b.arch), b.kind) for b in p.binaries] == [("sm_90", "ptx")] and p.abi.param_bytes(0) == 16


def test_unlisted_kernels_are_left_out(built: Built) -> None:
    assert [a.label for a in prebuilt.compile(built.fatbin(), {"add": PARAMS["add"]})] == ["add"]


# ------------------------------------------------------------------------------------------------ refusals


def test_a_wrong_signature_is_refused_naming_kernel_parameter_and_the_cubins_sizes(built: Built) -> None:
    f = built.fatbin()
    with pytest.raises(AbiMismatch, match=r"kernels_default\.fatbin: entry 1 \(byte 16\): kernel add \(sm_80\): the "
                                          r"ABI has 3 parameters \(const float\* x, float\* out, int32_t n\) but the "
                                          r"cubin entry add has 4 \(sizes \[8, 8, 8, 4\]\)"):
        prebuilt.compile(f, {"add": "const float* x, float* out, int n"})
    with pytest.raises(AbiMismatch, match=r"kernel add \(sm_80\): parameter 3 'n' \(int64_t\): expected 8 bytes, the "
                                          r"cubin has 4 bytes"):
        prebuilt.compile(f, {"add": "const float* x, const float* y, float* out, long n"})
    with pytest.raises(AbiMismatch, match=r"kernel axpy \(sm_80\): parameter 3 'n' \(int32_t\): expected 4 bytes, the "
                                          r"cubin has 8 bytes"):
        prebuilt.compile(f, {"axpy": "float a, const float* x, float* y, int n"})
    with pytest.raises(AbiMismatch, match=r"kernel add \(compute_90 PTX\): parameter 3 'n' \(int64_t\): expected 8 "
                                          r"bytes, the PTX has 4 bytes"):
        prebuilt.compile(f, {"add": "const float* x, const float* y, float* out, long n"}, arch=["compute_90"])
    with pytest.raises(AbiMismatch, match=r"kernel add \(sm_80\): parameter 1 'y' \(int32_t\): expected 4 bytes"):
        prebuilt.compile(f, {"add": Abi((Param("x", Pointer()), Param("y", Scalar(DType.i32)), Param("z", Pointer()),
                                         Param("n", Scalar(DType.i32))))})


def test_unknown_kernels_and_kernels_missing_from_an_arch_are_named(built: Built) -> None:
    with pytest.raises(CompileError, match=r"kernel nope: in none of the binaries \(sm_80, sm_90a, compute_90 PTX\); "
                                           r"they hold: _Z4fillIfEvPT_ii, .*, add, axpy"):
        prebuilt.compile(built.fatbin(), {"nope": "int n"})
    with pytest.raises(CompileError, match=r"kernel add: not in the sm_90a binaries \(.*libtwo\.so \(\.nv_fatbin\): "
                                           r"entry \d+ \(byte \d+\) holds neg\); every arch"):
        prebuilt.compile(built.shared, {"add": PARAMS["add"], "neg": "float* y, int n"})
    other = built.cubin("sm_80").read_bytes() + bytes(8)  # another sm_80 cubin holding the same kernel
    with pytest.raises(CompileError, match=r"kernel add: in 2 different sm_80 binaries: .*kernels_sm_80\.cubin, "
                                           r"bytes #2"):
        prebuilt.compile([built.cubin("sm_80"), other], {"add": PARAMS["add"]})
    with pytest.raises(CompileError, match=r"the extern \"C\" symbol add does not spell its parameter types"):
        prebuilt.compile(built.fatbin(), ["add"])


def test_what_is_not_a_linked_cuda_binary_is_refused(built: Built, tmp_path: Path) -> None:
    with pytest.raises(CubinError, match=r"rdc\.cubin: relocatable cubin \(compiled with -rdc=true / -dc\): link it"):
        prebuilt.compile(built.rdc, {"add": PARAMS["add"]})
    with pytest.raises(CubinError, match=r"prebuilt_kernels\.cu: not a cubin, a fatbin, PTX or an object with CUDA "
                                         r"device code \(starts with b'// Kerne'\)"):
        prebuilt.compile(Path(__file__).parent / "prebuilt_kernels.cu", {"add": PARAMS["add"]})
    with pytest.raises(CubinError, match=r"truncated fatbin: the container at byte 0 claims \d+ bytes of entries"):
        prebuilt.compile(built.fatbin().read_bytes()[:5000], {"add": PARAMS["add"]})
    plain = tmp_path / "plain.o"
    plain.write_bytes(built.obj.read_bytes().replace(b".nv_fatbin", b".nv_xxxbin"))
    with pytest.raises(CubinError, match=r"plain\.o: an ELF file with no \.nv_fatbin section"):
        prebuilt.compile(plain, {"add": PARAMS["add"]})
    with pytest.raises(CubinError, match="is a directory"):
        prebuilt.compile(tmp_path, {"add": PARAMS["add"]})


def test_bad_arguments_name_the_field() -> None:
    with pytest.raises(CompileError, match=r"Kernel\.params must be a C parameter list, an Abi or None \(got int 5\)"):
        Kernel(5)  # type: ignore[arg-type]
    with pytest.raises(CompileError, match=r"Kernel\.name must be a C identifier \(got 'a-b'\)"):
        Kernel("int n", name="a-b")
    with pytest.raises(CompileError, match="no files given"):
        prebuilt.compile([], {"add": "int n"})
    with pytest.raises(CompileError, match="no kernels named"):
        prebuilt.compile([b"x"], {})


# ------------------------------------------------------------------------------------------------ [[cubin]]


@pytest.fixture
def cache(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with config.override(cache_dir=tmp_path_factory.mktemp("kpcache")):
        yield


TOML = """
[library]
name = "pre"
archs = ["sm_80", "sm_90a"]

[[cubin]]
files = ["bin/*.fatbin"]
[cubin.kernels]
add = "{add}"
"{filli}" = "int* y, int v, int n"
"{fill}" = {{ params = "float* y, int v, int n", name = "fill", variant = "f32", block = [256] }}

[[cubin]]
files = ["bin/neg.o"]
kernels = {{ neg = "float* y, int n" }}
archs = ["sm_90a"]
"""


def _project(root: Path, built: Built) -> Path:
    (root / "bin").mkdir()
    (root / "bin" / "kernels.fatbin").write_bytes(built.fatbin().read_bytes())
    (root / "bin" / "neg.o").write_bytes(built.shared.read_bytes())
    (root / "kernelpack.toml").write_text(TOML.format(add=PARAMS["add"], fill=FILL_F32, filli=FILL_I32))
    return root


def test_cubin_entries_build_incrementally_with_the_files_bytes_as_fingerprint(built: Built, tmp_path: Path,
                                                                                cache: None) -> None:
    root = _project(tmp_path, built)
    first = build(root, jobs=1)
    assert first.jobs == {"cubin:bin/*.fatbin": "compiled", "cubin:bin/neg.o": "compiled"} and first.linked
    rows = {r.kernel: r for r in first.rows}
    assert sorted(rows) == ["add", "fill[f32]", "fill[int]", "neg"]
    assert rows["add"].archs == ["sm_80", "sm_90a", "compute_90"] and rows["fill[f32]"].block == "256x1x1"
    assert rows["neg"].archs == ["sm_90a"] and "not built for sm_80" in rows["neg"].warnings
    header = (root / "build/include/pre.h").read_text()
    assert "pre_add(const kp_launch* kp_cfg, const float* x, const float* y, float* out, int32_t n)" in header
    assert build(root, jobs=1).up_to_date
    # the same cubins repacked with other compression: a new fingerprint, the same bundle, no relink
    (root / "bin" / "kernels.fatbin").write_bytes(built.fatbin("size").read_bytes())
    again = build(root, jobs=1)
    assert again.jobs == {"cubin:bin/*.fatbin": "compiled", "cubin:bin/neg.o": "reused"} and not again.linked
    (root / "bin" / "more.fatbin").write_bytes(built.fatbin("speed").read_bytes())  # a new file matching the glob
    assert build(root, jobs=1).jobs["cubin:bin/*.fatbin"] == "compiled"
    lib = kernelpack.load(root / "build/lib/libpre.so")
    assert sorted(lib.__all__) == ["add", "fill", "neg"]


def test_cubin_entries_in_python_project_modules(built: Built, tmp_path: Path, cache: None) -> None:
    (tmp_path / "k.fatbin").write_bytes(built.fatbin().read_bytes())
    (tmp_path / "kernelpack_project.py").write_text(textwrap.dedent(f"""
        from kernelpack.project import Cubin
        from kernelpack.prebuilt import Kernel
        LIBRARY = {{"name": "pyp", "outputs": ["bundle"]}}
        KERNELS = [Cubin(["k.fatbin"], {{"add": Kernel({PARAMS['add']!r}, name="vadd")}}, archs=["sm_90a"])]
    """))
    r = build(tmp_path, jobs=1)
    assert r.jobs == {"cubin:k.fatbin": "compiled"} and [x.kernel for x in r.rows] == ["vadd"]
    assert r.rows[0].archs == ["sm_90a"]


@pytest.mark.parametrize("table,match", [
    ('files = "k.fatbin"\nkernels = { add = "int n" }', r"key 'files': expected a non-empty list of paths"),
    ('files = []\nkernels = { add = "int n" }', r"key 'files': expected a non-empty list"),
    ('files = ["k.fatbin"]\nkernels = 5', r"key 'kernels': expected a non-empty table \{symbol = "),
    ('files = ["k.fatbin"]\nkernels = {}', r"key 'kernels': expected a non-empty table"),
    ('files = ["k.fatbin"]\nkernels = { add = { params = "int n", grid = 5 } }',
     r"kernels\.add: unknown key\(s\) \['grid'\]; expected some of \['params', 'name', 'variant', 'block', "),
    ('files = ["k.fatbin"]\nkernels = { add = { block = [0] } }', r"kernels\.add: LaunchSpec\.block must be"),
    ('files = ["k.fatbin"]\nkernels = { add = "int n" }\nsource = "x"', r"unknown key\(s\) \['source'\]"),
    ('files = ["k.fatbin"]\nkernels = { add = "int n" }\narchs = ["sm_9"]', r"key 'archs'"),
])
def test_malformed_cubin_tables_name_file_table_and_key(tmp_path: Path, table: str, match: str) -> None:
    (tmp_path / "kernelpack.toml").write_text('[library]\nname = "p"\n[[cubin]]\n' + table + "\n")
    with pytest.raises(ProjectError, match=r"kernelpack\.toml:\d+: \[\[cubin\]\] #1: .*" + match):
        load_project(tmp_path)


def test_a_glob_matching_nothing_is_refused_at_its_key_before_any_step(tmp_path: Path, cache: None) -> None:
    (tmp_path / "kernelpack.toml").write_text('[library]\nname = "p"\n[[cubin]]\nfiles = ["bin/*.cubin"]\n'
                                              'kernels = { add = "int n" }\n')
    with pytest.raises(ProjectError, match=r"kernelpack\.toml:4: \[\[cubin\]\] #1: key 'files': 'bin/\*\.cubin' "
                                           r"matches no file"):
        build(tmp_path, jobs=1)
    assert not (tmp_path / "build").exists()
    assert Cubin(["a.cubin"], ["_Z1fv"]).frontend == "cubin"


# ------------------------------------------------------------------------------------------------ launching


def test_prebuilt_kernels_launch_through_kernelpack_load_on_the_fake_driver(built: Built, fake: Any) -> None:
    from runtime_support import CudaArray

    bundle = prebuilt.compile(built.fatbin(), ALL)
    arts = _by_label(bundle)
    mod = kernelpack.load(bundle)
    x, y, out = (CudaArray(0x10000 * (i + 1), (1000,)) for i in range(3))
    mod.add(x, y, out, 1000, grid=4, block=256)
    rec = fake.last()
    want = pack_params(arts["add"].abi, [0x10000, 0x20000, 0x30000, 1000],
                       base=arts["add"].cubin_kernel("sm_90a").param_base, kernel="add")
    assert rec["kernel"] == "add" and rec["params"] == want and rec["block"] == (256, 1, 1)
    ints = CudaArray(0x40000, (10,), "<i4")
    mod.fill(ints, 7, 10, grid=1, block=32)  # the family picks fill[int] by the pointer's dtype
    assert fake.last()["kernel"] == FILL_I32
    mod.fill(out, 25, 1000, grid=4, block=256)
    assert fake.last()["kernel"] == FILL_F32 and struct.pack("<i", 25) in fake.last()["params"]
    mod.pair(struct.pack("<fi", 1.5, 2), out, grid=1, block=32)  # a struct by value: its bytes
    assert fake.last()["params"][:8] == struct.pack("<fi", 1.5, 2)

C_MAIN = r"""
#include <stdio.h>
#include <string.h>
#include "pre.h"
int main(void) {
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = 4, l.block[0] = 256;
    kp_status s = pre_add(&l, (const float*)0x10000, (const float*)0x20000, (float*)0x30000, 1000);
    printf("%d %s\n", (int)s, s ? pre_last_error() : "");
    s = pre_fill(&l, (float*)0x30000, 25, 1000);
    printf("%d %s\n", (int)s, s ? pre_last_error() : "");
    return 0;
}
"""


@pytest.mark.parametrize("cc,loaded", [("9.0", "sm_90a"), ("8.6", "sm_80"), ("10.0", "ptx")])
def test_the_c_library_launches_them_on_the_fake_libcuda(built: Built, tmp_path: Path, cc: str, loaded: str,
                                                         fake_cuda: Any) -> None:
    from clib_support import compile_program
    from fake_cuda import fnv1a, run
    from kernelpack.clib import Library

    bundle = prebuilt.compile(built.fatbin(), {"add": PARAMS["add"], FILL_F32: Kernel(name="fill")})
    lib = Library("pre", bundle, cflags=["-Werror"]).build(tmp_path / "pre")
    src = tmp_path / "main.c"
    src.write_text(C_MAIN)
    exe = compile_program(src, tmp_path / "main", lib.include_dir,
                          [f"-L{lib.lib_dir}", "-lpre", f"-Wl,-rpath,{lib.lib_dir}"])
    r = run(exe, tmp_path, fake_cuda, FAKECUDA_CC=cc, FAKECUDA_CURRENT="0")
    assert r.returncode == 0 and r.stdout.splitlines() == ["0 ", "0 "], r.stdout + r.stderr
    (load,) = {x for x in r.calls("cuLibraryLoadData")}
    add = _by_label(bundle)["add"]
    if loaded == "ptx":
        assert r.field(load, "kind") == "ptx"
        assert r.field(load, "fnv") == fnv1a(add.binary("sm_90", "ptx").data)
    else:
        assert r.field(load, "kind") == "cubin" and r.field(load, "fnv") == fnv1a(add.binary(loaded).data)
        launches = r.launch_lines()
        assert [r.field(x, "kernel") for x in launches] == ["add", FILL_F32]
        ck = add.cubin_kernel(loaded)
        want = pack_params(add.abi, [0x10000, 0x20000, 0x30000, 1000], base=ck.param_base, kernel="add")
        assert r.field(launches[0], "params") == want.hex()
