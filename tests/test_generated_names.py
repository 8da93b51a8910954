"""User names are data: whatever a user calls a library, family, variant, parameter, struct or struct field, the
generated C, C++ and Python stay valid and mean what they say.

Names come from the C/C++ keyword lists, the standard macros and typedefs, reserved spellings, the names the
generator itself declares (locals, statics, the C++ layer's own names, the Python module's own attributes, launch
keywords) and random identifiers. Every position of a real library gets them; the headers compile as C99, C11,
GNU C11 (where ``linux`` and ``unix`` are macros), C++17 and C++20 with ``-Wall -Wextra -Werror -pedantic`` (gcc,
and clang where installed), the library builds with ``-Werror`` and ``kernelpack.load`` reads it and launches every
family on the fake driver. Names that collide after renaming are refused before any file is written, naming both.
"""

from __future__ import annotations

import dataclasses
import keyword
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from clib_support import TMA_ABI, TMA_SPEC, TSUM_SPEC, add_abi, bins, session_env
from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.core import names
from kernelpack.core.abi import Abi, DType, Field, Param, Pointer, Scalar, Struct
from kernelpack.core.errors import KernelpackError
from kernelpack.core.launchspec import LaunchSpec
from toolchain_support import CC, CLANG, CXX

# what the generator and its outputs declare themselves, and Python's own names
GENERATED = ["launch", "o", "kp_c", "kp_s", "kp_args", "kp_best", "kp_cm", "kp_q", "kp_bq", "kp_t_x", "kp_sb_",
             "kp_d0", "kp_lp", "kp_l", "kp_g", "kp_gs", "kp_ps", "kp_null", "kp_buf", "kp_ret", "KP_DYN", "KP_API",
             "Library", "check", "last_error", "status_name", "preload", "to_Tensor2f", "kp", "std", "Error",
             "device_span", "tensor_view", "dtype_of", "grid", "block", "smem", "stream", "cluster", "self", "bundle",
             "families", "host_programs", "_bundle", "_families", "_hosts", "_loader", "__class__", "__dict__",
             "__all__", "__file__", "__name__", "__doc__", "__getattr__", "__init__", "__spec__", "x_dtype"]
STANDARD = sorted(names.STD_NAMES - {"__STDC__"}) + ["EINVAL", "ERANGE", "INT32_MAX", "UINT8_C", "PRIx64",
                                                     "SIGINT", "int8_t", "uint64_t", "_Foo", "__x", "x__y", "_"]
KEYWORDS = sorted(names.C_KEYWORDS | names.CPP_KEYWORDS | set(keyword.kwlist) | set(keyword.softkwlist))
HOSTILE = sorted(set(KEYWORDS + STANDARD + GENERATED))


def _random_names(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    first = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
    rest = first + "0123456789"
    return ["".join([rng.choice(first)] + [rng.choice(rest) for _ in range(rng.randint(0, 12))]) for _ in range(n)]


def _draw(pool: list[str]) -> Iterator[str]:
    while True:
        yield from pool


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return session_env(tmp_path_factory)


def hostile_artifacts(k, pool: list[str]) -> list[KernelArtifact]:
    """Every kind of name position the generator emits, filled from ``pool`` (cycled): families of each shape
    (scalars, pointers varying in type across specializations, a user struct, a tensor descriptor, an opaque blob,
    a TMA descriptor, a grid formula, hidden scratch params), each with hostile parameter names and variants."""
    it = _draw(pool)
    used: set[str] = set()
    rounds = [0]

    def fresh() -> str:  # unique per library; never a name with its "_dtype" companion; pool cycled with suffixes
        for _ in range(len(pool)):
            n = next(it)
            if rounds[0]:
                n = f"{n}{rounds[0]}"
            c = names.c_name(n)
            if n not in used and c not in used and n + "_dtype" not in used and not n.endswith("_dtype"):
                used.update({n, c})
                return n
        rounds[0] += 1
        return fresh()

    def renamed(abi: Abi, mapping: dict[str, str]) -> Abi:
        return Abi(tuple(dataclasses.replace(p, name=mapping[p.name]) for p in abi.params))

    arts: list[KernelArtifact] = []
    f32, f64 = DType.f32, DType.f64
    for _ in range(4):  # pointer families over f32 and f64 (void* + kp_dtype arguments), with an aligned variant
        fam, m = fresh(), {p: fresh() for p in ("x", "y", "out", "n")}
        arts += [KernelArtifact(fam, "add_f32", renamed(add_abi(f32), m), bins(k, "80", "90a"), variant=fresh()),
                 KernelArtifact(fam, "add_f64", renamed(add_abi(f64), m), bins(k, "80", "90a"), variant=fresh()),
                 KernelArtifact(fam, "add_f32_vec4", renamed(add_abi(f32, 16), m), bins(k, "80", "90a"),
                                variant=fresh())]
    for _ in range(3):  # eleven scalars of every width
        dts = ["i8", "i16", "i32", "i64", "f32", "f64", "bool", "f16", "u8", "u64"]
        abi = Abi(tuple(Param(fresh(), Scalar(DType(d))) for d in dts) + (Param(fresh(), Pointer(f32)),))
        arts.append(KernelArtifact(fresh(), "pack", abi, bins(k, "80", "90a", "100a")))
    for _ in range(2):  # a user struct by value (fields named from the pool) and a tensor descriptor
        st = Struct(fresh(), (Field(fresh(), Pointer(f32)), Field(fresh(), Scalar(DType.i32)),
                              Field(fresh(), Scalar(DType.i32)), Field(fresh(), Scalar(DType.i64))))
        fam, s_name, o_name = fresh(), fresh(), fresh()
        arts += [KernelArtifact(fam, "tsum", Abi((Param(s_name, st), Param(o_name, Pointer(d)))), bins(k, "80", "90a"),
                                variant=fresh()) for d in (f32, f64)]
        tensor = Struct.tensor_descriptor(fresh(), TSUM_SPEC)
        t_name, o_name = fresh(), fresh()
        arts.append(KernelArtifact(fresh(), "tsum", Abi((Param(t_name, tensor), Param(o_name, Pointer(f32)))),
                                   bins(k, "80", "90a"),
                                   launch=LaunchSpec(grid=(("arg", t_name, "shape0"), 1, 1))))
    # an opaque 128-byte blob by pointer (a family of two), and the same kernel with the blob filled from a TMA
    # descriptor
    m = {p.name: fresh() for p in TMA_ABI.params}
    fam = fresh()
    f64_out = Abi((*TMA_ABI.params[:-1], Param("out", Pointer(f64))))
    arts += [KernelArtifact(fam, "tma2d", renamed(abi, m), bins(k, "80", "90a"), variant=fresh())
             for abi in (TMA_ABI, f64_out)]
    m = {p.name: fresh() for p in TMA_ABI.params}
    spec = dataclasses.replace(TMA_SPEC, arg=m["m"], params=tuple(m[p] for p in TMA_SPEC.params))
    arts.append(KernelArtifact(fresh(), "tma2d", renamed(TMA_ABI, m), bins(k, "80", "90a"),
                               launch=LaunchSpec(tensor_descs=(spec,))))
    # a grid formula over hostile names, and hidden scratch params
    m = {p: fresh() for p in ("x", "y", "out", "n")}
    n = ("arg", m["n"], None)
    arts.append(KernelArtifact(fresh(), "add_f32", renamed(add_abi(f32), m), bins(k, "80", "90a"),
                               launch=LaunchSpec(grid=(("ceil_div", n, 256), 1, 1))))
    hidden = Abi((Param(fresh(), Pointer(f32)), Param(fresh(), Scalar("i32")),
                  Param(fresh(), Pointer(), role="global_scratch"), Param(fresh(), Pointer(), role="profile_scratch")))
    arts.append(KernelArtifact(fresh(), "hidden", hidden, bins(k, "80", "90a"),
                               launch=LaunchSpec(global_scratch=64, profile_scratch=32)))
    arts.append(KernelArtifact(fresh(), "noargs", Abi(()), bins(k, "80", "90a"), launch=LaunchSpec(block=(32, 1, 1))))
    return arts


def _compile_headers(build, tmp: Path) -> None:
    """NAME.h as C99, C11 and GNU C11 and NAME.hpp as C++17 and C++20, with every warning an error."""
    lib = build.name
    c_src, cpp_src = tmp / f"use_{lib}.c", tmp / f"use_{lib}.cpp"
    c_src.write_text(f'#include <errno.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <math.h>\n'
                     f'#include "{lib}.h"\nint main(void) {{ return {lib}_status_name(KP_SUCCESS) == NULL; }}\n')
    cpp_src.write_text(f'#include <cerrno>\n#include <cstdio>\n#include <cmath>\n#include "{lib}.hpp"\n'
                       f'int main() {{ return {lib}_status_name(KP_SUCCESS) == nullptr; }}\n')
    flags = ["-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only", f"-I{build.include_dir}"]
    runs = [[CC, f"-std={s}", *flags, str(c_src)] for s in ("c99", "c11", "gnu11")]
    runs += [[CXX, f"-std={s}", *flags, str(cpp_src)] for s in ("c++17", "c++20")]
    if CLANG:
        runs += [[CLANG, "-std=c11", *flags, str(c_src)], [CLANG, "-x", "c++", "-std=c++17", *flags, str(cpp_src)]]
    for cmd in runs:
        p = subprocess.run(cmd, capture_output=True, text=True)
        assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stderr[:4000]}"


def _launch_all(mod, arts: list[KernelArtifact], fake) -> int:
    """Call every family of ``mod`` once through its Python name; returns the launches the fake recorded."""
    from kernelpack.runtime.module import _own_names
    from runtime_support import CudaArray

    before = fake.count()
    for fam, group in _families(arts).items():
        fn = mod[fam]
        assert getattr(mod, names.py_name(fam, _own_names())) is fn  # the attribute: renamed where Python needs it
        assert fn.family.name == fam and mod.families[fam] is fn.family
        art = group[0]
        args = []
        for p in art.abi.args:
            t = p.type
            if art.launch.tensor_descs and p.name == art.launch.tensor_descs[0].arg:
                args.append(CudaArray(0x100000, (64, 64), "<f2"))
            elif p.name in {n for d in art.launch.tensor_descs for n in d.params}:
                continue
            elif isinstance(t, Pointer):
                args.append(0x10000)
            elif isinstance(t, Struct) and t.tensor is not None:
                args.append(CudaArray(0x20000, (3, 5), "<f4"))
            elif isinstance(t, Struct):
                args.append(bytes(t.size))
            elif isinstance(t, Scalar):
                args.append(1.0 if t.dtype.is_float else 1 if t.dtype != DType.bool else True)
            else:
                args.append(bytes(t.size))
        opts = {} if art.launch.grid is not None else {"grid": 1}
        if art.launch.block is None:
            opts["block"] = 128
        fn(*args, **opts)
    return fake.count() - before


def _families(arts: list[KernelArtifact]) -> dict[str, list[KernelArtifact]]:
    out: dict[str, list[KernelArtifact]] = {}
    for a in arts:
        out.setdefault(a.name, []).append(a)
    return out


POOLS = {"keywords": KEYWORDS, "standard": STANDARD, "generated": GENERATED, "random": _random_names(300, 12)}


@pytest.mark.parametrize("pool", sorted(POOLS))
def test_hostile_names_in_every_position_compile_build_and_load(env, pool, tmp_path, fake):
    from kernelpack.clib import Library

    arts = hostile_artifacts(env.kernels, POOLS[pool])
    build = Library(f"lib_{pool}", *arts, cflags=["-Werror", "-pedantic"]).build(tmp_path / "out")
    _compile_headers(build, tmp_path)
    import kernelpack

    mod = kernelpack.load(build.shared)
    assert _launch_all(mod, arts, fake) == len(_families(arts))
    # the module's own attributes are its own, whatever the kernels are called
    from kernelpack.bundle.kpack import Bundle

    assert isinstance(mod.bundle, Bundle) and callable(mod.preload) and repr(mod).startswith("<kernelpack")
    assert mod.__class__.__name__ == "KernelModule" and isinstance(mod.__dict__, dict)


LIBRARY_NAMES = ["int", "new", "class", "main", "NULL", "linux", "default", "Library", "std", "posix", "this", "I",
                 "EINVAL", "kpdemo", "preload", "lambda", "u_x"]


@pytest.mark.parametrize("lib", LIBRARY_NAMES)
def test_library_names_that_are_keywords_or_macros_work(env, lib, tmp_path):
    from kernelpack.clib import Library

    k = env.kernels
    arts = [KernelArtifact("add", "add_f32", add_abi(DType.f32), bins(k, "80", "90a"), variant="f32"),
            KernelArtifact("add", "add_f64", add_abi(DType.f64), bins(k, "80", "90a"), variant="f64"),
            KernelArtifact(lib, "add_f32", add_abi(DType.f32), bins(k, "80"))]
    build = Library(lib, *arts, cflags=["-Werror", "-pedantic"]).build(tmp_path / "out")
    _compile_headers(build, tmp_path)
    cmake = (build.cmake_config.parent / f"{lib}ConfigVersion.cmake").read_text()
    assert "execute_process" not in cmake


@pytest.mark.parametrize("lib,why", [("stdint", "standard or CUDA header"), ("errno", "standard or CUDA header"),
                                     ("cuda", "standard or CUDA header"), ("kp", "kp_"), ("kp_x", "kp_"),
                                     ("_x", "reserved identifiers"), ("x__y", "reserved identifiers"),
                                     ("a" * 65, "at most 64"), ("../../x", "identifier"), ("a/b", "identifier"),
                                     ("a\0b", "identifier"), ("x\n", "identifier"), ("", "identifier")])
def test_unusable_library_names_are_refused_before_writing(env, lib, why, tmp_path):
    from kernelpack.clib import Library

    art = KernelArtifact("add", "add_f32", add_abi(DType.f32), bins(env.kernels, "80"))
    with pytest.raises(KernelpackError, match=why):
        Library(lib, art).build(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _collides(env, tmp_path, arts: list[KernelArtifact], *fragments: str) -> None:
    from kernelpack.clib import Library

    with pytest.raises(KernelpackError) as info:
        Library("coll", *arts).build(tmp_path / "out")
    for f in fragments:
        assert f in info.value.message, info.value.message
    assert not (tmp_path / "out").exists()


def test_parameters_colliding_after_renaming_are_refused_naming_both(env, tmp_path):
    m = {"x": "int", "y": "int_", "out": "out", "n": "n"}
    abi = Abi(tuple(dataclasses.replace(p, name=m[p.name]) for p in add_abi(DType.f32).params))
    art = KernelArtifact("add", "add_f32", abi, bins(env.kernels, "80"))
    _collides(env, tmp_path, [art], "'int'", "'int_'", "add")


def test_dtype_companion_colliding_with_a_parameter_is_refused(env, tmp_path):
    k = env.kernels
    m = {"x": "x", "y": "x_dtype", "out": "out", "n": "n"}
    arts = [KernelArtifact("add", e, Abi(tuple(dataclasses.replace(p, name=m[p.name]) for p in add_abi(d).params)),
                           bins(k, "80"), variant=v) for e, d, v in (("add_f32", DType.f32, "a"),
                                                                     ("add_f64", DType.f64, "b"))]
    _collides(env, tmp_path, arts, "'x_dtype'", "add")


def test_families_colliding_in_cpp_after_renaming_are_refused(env, tmp_path):
    k = env.kernels
    arts = [KernelArtifact(n, "add_f32", add_abi(DType.f32), bins(k, "80")) for n in ("int", "int_")]
    _collides(env, tmp_path, arts, "int", "int_")


def test_struct_type_colliding_with_a_family_entry_is_refused(env, tmp_path):
    k = env.kernels
    st = Struct.tensor_descriptor("add", TSUM_SPEC)
    arts = [KernelArtifact("add", "add_f32", add_abi(DType.f32), bins(k, "80")),
            KernelArtifact("tsum", "tsum", Abi((Param("t", st), Param("out", Pointer(DType.f32)))), bins(k, "80"))]
    _collides(env, tmp_path, arts, "coll_add")


def test_header_comments_show_the_original_names(env, tmp_path):
    from kernelpack.clib import Library

    m = {"x": "default", "y": "new", "out": "this", "n": "register"}
    abi = Abi(tuple(dataclasses.replace(p, name=m[p.name]) for p in add_abi(DType.f32).params))
    art = KernelArtifact("int", "add_f32", abi, bins(env.kernels, "80"))
    src = Library("names", art).generate()
    decl = next(line for line in src.header.splitlines() if line.startswith("NAMES_API kp_status names_int("))
    assert "const float* default_, const float* new_, float* this_, int32_t register_" in decl
    assert "default_ = default" in src.header and "int_ = int" in src.cpp_header


def test_cuda_kernel_with_parameters_named_like_generated_code(tmp_path):
    """A real CUDA C++ kernel whose parameters are called like the generator's own names (``launch``, ``kp_c``),
    Python keywords (``lambda``, ``None``) and launch options (``grid``): compiled, linked, declared and loaded."""
    import inspect

    import kernelpack
    from kernelpack.clib import Library
    from kernelpack.frontends.cuda import compile as cuda

    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(float* launch, int kp_c, const float* o, int None, float lambda,\n'
                   '                             int grid) {\n'
                   '    int i = blockIdx.x * blockDim.x + threadIdx.x;\n'
                   '    if (i < kp_c + None + grid) launch[i] = o[i] * lambda;\n}\n')
    bundle = cuda.compile(src, ["k"], arch=["sm_80"])
    build = Library("gen", bundle, cflags=["-Werror", "-pedantic"]).build(tmp_path / "out")
    _compile_headers(build, tmp_path)
    header = build.header.read_text()
    assert ("gen_k(const kp_launch* kp_cfg, float* launch, int32_t u_kp_c, const float* o, int32_t None, "
            "float lambda, int32_t grid);") in header
    sig = inspect.signature(kernelpack.load(build.shared).k)
    assert list(sig.parameters)[:6] == ["launch", "kp_c", "o", "None_", "lambda_", "grid_"]
