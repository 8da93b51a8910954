"""CuTe host programs without a GPU: export objects checked and linked with kernelpack's driver shim into
libraries that need neither cudart nor CuTe's runtime, typed entries, zero extents and contracts refused
before any host code runs, unknown object formats refused."""

from __future__ import annotations

import copy
import ctypes
import json
import pickle
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cute_support import host_programs, need_cute
from gpu import driver_present
from toolchain_support import CC, CXX, cuda_include, needs_tools

need_cute()

from kernelpack.clib.host import (
    HostLibrary,
    HostObject,
    HostProgram,
    ObjectFormatError,
    build_host_library,
    read_object,
    shim_source,
)

pytestmark = needs_tools(CC, "ld", "objcopy")


@pytest.fixture(scope="session")
def programs() -> list[HostProgram]:
    return host_programs()


@pytest.fixture(scope="session")
def library(programs: list[HostProgram], tmp_path_factory: pytest.TempPathFactory) -> HostLibrary:
    return build_host_library("kpcute", programs, tmp_path_factory.mktemp("kpcute"))


def tool(*cmd: str) -> str:
    return subprocess.run(list(cmd), check=True, capture_output=True, text=True).stdout


def test_shim_layouts_match_the_cuda_headers(tmp_path: Path) -> None:
    inc = cuda_include()
    if inc is None:
        pytest.skip("no CUDA headers")
    from kernelpack.clib.host.build import support_files

    for name, text in support_files().items():
        (tmp_path / name).write_text(text)
    assert (tmp_path / "shim.c").read_text() == shim_source()
    subprocess.run([CC, "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-DKP_SHIM_CHECK_HEADERS",
                    f"-I{inc}", f"-I{tmp_path}", str(tmp_path / "shim.c")], check=True)


def test_programs_derive_typed_parameters(programs: list[HostProgram]) -> None:
    gemm = next(p for p in programs if p.label == "gemm[f16]")
    assert [(p.name, p.type.c_type, p.stream) for p in gemm.params] == [
        ("a", "tensor_f16_dxd_Dx1", False), ("b", "tensor_f16_dxd_Dx1", False), ("c", "tensor_f16_dxd_Dx1", False),
        ("stream", "void*", True)]
    assert ("shape1", 8) in gemm.params[0].checks and ("data", 16) in gemm.params[0].checks
    assert [str(o.arch) for o in gemm.objects] == ["sm_90a"]
    assert {o.info.version for p in programs for o in p.objects} == {"1.1"}
    (kernel,) = gemm.kernels
    assert kernel.abi.params[0].type.size == 128  # the TMA descriptor, by value


def test_library_needs_no_cudart_and_no_cute_runtime(library: HostLibrary) -> None:
    undefined = tool("nm", "-D", "--undefined-only", str(library.shared)).split()
    assert not [s for s in undefined if s.lstrip("_").startswith("cu")], undefined
    needed = [line.split()[-1] for line in tool("readelf", "-d", str(library.shared)).splitlines() if "NEEDED" in line]
    assert all(not any(x in n for x in ("cudart", "cute", "cuda", "mlir")) for n in needed), needed
    ldd = tool("ldd", str(library.shared))
    assert "cudart" not in ldd and "cute" not in ldd and "libcuda" not in ldd
    defined = sorted(line.split()[-1] for line in tool("nm", "-D", "--defined-only", str(library.shared)).splitlines())
    assert defined == list(library.exports)
    # the shim's symbols (and CuTe's) exist only as locals
    local = tool("nm", str(library.object))
    assert " t _cudaLaunchKernelEx" in local and " T _cudaLaunchKernelEx" not in local


def test_two_static_libraries_link_into_one_program(programs: list[HostProgram], library: HostLibrary,
                                                    tmp_path: Path) -> None:
    other = build_host_library("kpother", programs[:1], tmp_path / "other")
    main = tmp_path / "main.c"
    main.write_text('#include "kpcute.h"\n#include "kpother.h"\n'
                    "int main(void) { kpcute_tensor_f32_dxd_Dx1 t = {0}; kpother_tensor_f32_dxd_Dx1 u = {0};\n"
                    "  return (int)kpcute_ew_add_f32(t, t, t) + (int)kpother_ew_add_f32(u, u, u); }\n")
    exe = tmp_path / "main"
    subprocess.run([CC, "-std=c99", "-Wall", "-Werror", f"-I{library.header.parent}", f"-I{other.header.parent}",
                    str(main), str(library.static), str(other.static), "-ldl", "-lpthread", "-o", str(exe)], check=True)
    assert subprocess.run([str(exe)]).returncode == 0  # zero extents: both return KP_SUCCESS without a driver


def test_header_compiles_as_c_and_cpp(library: HostLibrary, tmp_path: Path) -> None:
    for lang, std, ext in (("c", "-std=c99", "c"), ("c++", "-std=c++17", "cpp")):
        src = tmp_path / f"use.{ext}"
        src.write_text('#include "kpcute.h"\nint use(void) { return (int)KP_SUCCESS; }\n')
        compiler = CC if lang == "c" else CXX
        if compiler is None:
            continue
        subprocess.run([compiler, std, "-Wall", "-Wextra", "-Werror", "-c", f"-I{library.header.parent}", str(src),
                        "-o", str(tmp_path / f"use_{ext}.o")], check=True)


class Tensor2(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("shape0", ctypes.c_int32), ("shape1", ctypes.c_int32),
                ("stride0", ctypes.c_int64)]


def test_entries_refuse_zero_extents_and_broken_contracts_before_host_code(library: HostLibrary) -> None:
    lib = ctypes.CDLL(str(library.shared))
    lib.kpcute_last_error.restype = ctypes.c_char_p
    gemm = lib.kpcute_gemm_f16
    gemm.argtypes = [Tensor2, Tensor2, Tensor2, ctypes.c_void_p]
    empty = Tensor2(0x1000, 0, 64, 64)
    b = Tensor2(0x1000, 64, 64, 64)
    assert gemm(empty, b, Tensor2(0x1000, 0, 64, 64), None) == 0  # M = 0: nothing runs, success
    odd = Tensor2(0x1000, 16, 60, 60)  # K = 60 is not a multiple of 8 (TMA row pitch)
    assert gemm(odd, Tensor2(0x1000, 64, 60, 60), Tensor2(0x1000, 16, 64, 64), None) == 7  # INVALID_ARGUMENT
    assert b"a.shape1 is not a multiple of 8" in lib.kpcute_last_error()
    misaligned = Tensor2(0x1002, 16, 64, 64)
    assert gemm(misaligned, b, Tensor2(0x1000, 16, 64, 64), None) == 7
    assert b"16-byte aligned" in lib.kpcute_last_error()
    if not driver_present():
        assert gemm(Tensor2(0x1000, 16, 64, 64), b, Tensor2(0x1000, 16, 64, 64), None) == 1  # KP_ERROR_NO_DRIVER
        assert b"libcuda.so.1" in lib.kpcute_last_error()


def test_unknown_object_format_is_refused(programs: list[HostProgram]) -> None:
    obj = programs[0].objects[0]
    info = read_object(obj.data, obj.prefix)
    assert info.version == "1.1" and info.entry(obj.prefix).startswith(f"_mlir_{obj.prefix}__mlir_ciface_")
    future = obj.data.replace(b"1.1\0", b"9.9\0", 1)
    with pytest.raises(ObjectFormatError, match="version '9.9' is not supported"):
        read_object(future, obj.prefix)
    with pytest.raises(ObjectFormatError, match="version"):
        HostProgram("x", programs[0].params, (HostObject(obj.arch, future, obj.prefix),), programs[0].provenance)
    with pytest.raises(ObjectFormatError, match="not a little-endian ELF64"):
        read_object(b"\x7fELF" + b"\0" * 60, obj.prefix)
    with pytest.raises(ObjectFormatError, match="no .*_version symbol"):
        read_object(obj.data, "someone_else")
    sneaky = obj.data.replace(b"_cudaGetDevice\0", b"_cudaGetDevicX\0")
    with pytest.raises(ObjectFormatError, match="does not provide"):
        read_object(sneaky, obj.prefix)


def test_host_program_parameters_with_reserved_names(programs: list[HostProgram], tmp_path: Path) -> None:
    """Parameters named like the entry's locals (``o``), C/C++ keywords, macros, Python keywords and kernelpack's
    prefix: renamed in C (the header says so), the library builds warning-free, the entry works, and
    ``kernelpack.load`` names the Python arguments after the user's names."""
    import dataclasses
    import inspect

    import kernelpack

    gemm = next(p for p in programs if p.label == "gemm[f16]")
    hostile = ["o", "default", "kp_ret"]
    params = tuple(dataclasses.replace(p, name=n) if not p.stream else p for p, n in zip(gemm.params, hostile + [""]))
    prog = dataclasses.replace(gemm, name="lambda", variant="", params=params)
    lib = build_host_library("hostile", [prog], tmp_path / "out")
    header = lib.header.read_text()
    assert "kp_status hostile_lambda(hostile_tensor_f16_dxd_Dx1 o, hostile_tensor_f16_dxd_Dx1 default_, " \
           "hostile_tensor_f16_dxd_Dx1 u_kp_ret, void* stream);" in header
    assert "default_ (default, renamed: reserved in C/C++)" in header
    for compiler, std in ((CC, "-std=c99"), (CXX, "-std=c++17")):
        src = tmp_path / f"use{std}.{'c' if 'c++' not in std else 'cpp'}"
        src.write_text('#include "hostile.h"\nint use(void) { return (int)KP_SUCCESS; }\n')
        subprocess.run([compiler, std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-c", f"-I{lib.header.parent}",
                        str(src), "-o", str(tmp_path / "use.o")], check=True)
    c = ctypes.CDLL(str(lib.shared))
    entry = c.hostile_lambda
    entry.argtypes = [Tensor2, Tensor2, Tensor2, ctypes.c_void_p]
    assert entry(Tensor2(0x1000, 0, 64, 64), Tensor2(0x1000, 64, 64, 64), Tensor2(0x1000, 0, 64, 64), None) == 0
    mod = kernelpack.load(lib.shared)
    assert list(inspect.signature(mod.lambda_).parameters) == ["o", "default", "kp_ret", "stream"]
    assert mod["lambda"] is mod.lambda_


def test_host_programs_round_trip_through_bytes(programs: list[HostProgram]) -> None:
    for p in programs:
        data = p.to_bytes()
        back = HostProgram.from_bytes(data)
        assert back == p and back.to_bytes() == data  # lossless and canonical
        assert json.loads(data)["kernels"], p.label  # the kernels travel too, as one-artifact bundles


def _mutations(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(path, replacement) for every node of a JSON document: other shapes in its place."""
    for bad in (None, 5, -1, True, 1.5, "x", "", [], {}, [1], {"a": 1}):
        if type(bad) is not type(doc) or bad != doc:
            yield path, bad
    children = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in children:
        if isinstance(v, str) and len(v) > 200:  # base64 bodies: a few edits are enough
            yield (*path, k), v[:-4]
            yield (*path, k), "!" + v[1:]
            continue
        yield from _mutations(v, (*path, k))


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(doc)
    node = out
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return out


def test_malformed_host_program_bytes_are_refused_as_bundle_errors(programs: list[HostProgram]) -> None:
    from kernelpack.core.errors import BundleError

    p = next(p for p in programs if p.label == "gemm[f16]")
    doc = json.loads(p.to_bytes())
    tried = refused = 0
    for path, value in _mutations(doc):
        data = json.dumps(_set(doc, path, value)).encode()
        tried += 1
        try:
            HostProgram.from_bytes(data, source="job")
        except BundleError as e:
            assert e.message.startswith("job: "), e.message
            refused += 1
        # any other exception fails the test
    for cut in (0, 1, 100, len(p.to_bytes()) // 2):
        with pytest.raises(BundleError):
            HostProgram.from_bytes(p.to_bytes()[:cut])
    with pytest.raises(BundleError, match="params.*expected list"):
        HostProgram.from_bytes(json.dumps({**doc, "params": {}}).encode())
    with pytest.raises(BundleError, match="must be JSON"):
        HostProgram.from_bytes(b"[" * 100_000)
    with pytest.raises(BundleError, match="must be JSON"):
        HostProgram.from_bytes(pickle.dumps(p))
    print(f"{tried} malformed host programs tried, {refused} refused as BundleError, {tried - refused} accepted")
    assert tried > 300 and refused > 0.9 * tried
