"""The C++ layer of generated libraries (NAME.hpp) and the doc comments of both headers."""

from __future__ import annotations

import subprocess

from clib_support import HERE, add_abi, bins, compile_program
from fake_cuda import run
from header_docs import undocumented
from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.clib import Library
from kernelpack.core.abi import Abi, DType, Param, Pointer
from kernelpack.core.cache import CompileCache
from toolchain_support import CXX

STRICT = ("-Wshadow", "-Wpedantic", "-Wconversion", "-Wsign-conversion", "-Wold-style-cast", "-Wnon-virtual-dtor")


def test_cpp_layer_on_the_fake_driver(clib_env, tmp_path):
    demo = clib_env.demo
    exe = compile_program(HERE / "clib_cpp_main.cpp", tmp_path / "cpp_layer", demo.include_dir,
                          [f"-L{demo.lib_dir}", "-ldemo", f"-Wl,-rpath,{demo.lib_dir}"], cxx=True, flags=STRICT)
    # a driver that JITs the demo's new_ptx (PTX ISA 9.5): the C++ layer preloads every kernel
    r = run(exe, clib_env.root, clib_env.fake, FAKECUDA_VERSION="13050")
    assert r.returncode == 0, r.stdout + r.stderr
    missing = "demo_preload: device 7 does not exist (1 device(s); -1 = all)"
    assert r.stdout.splitlines() == [
        "library ok=1 device=-1 status=KP_SUCCESS",
        "device0 ok=1",
        f"error KP_ERROR_INVALID_ARGUMENT {missing}",
        f"quiet ok=0 status=KP_ERROR_INVALID_ARGUMENT message={missing}",
        "span size=1024 bytes=4096 empty=0",
        "kp_tensor dtype=11 rank=2 shape=64,32 stride=32,1 numel=2048 const_data=0x40000",
        "struct shape=64,32 stride0=32",
        "transposed KP_ERROR_NO_MATCHING_SPECIALIZATION",
        "fixed_block KP_ERROR_INVALID_LAUNCH",
        "ok"]
    first_launch = next(i for i, line in enumerate(r.log) if line.startswith("cuLaunchKernel"))
    got = {line.split("name=")[-1].split()[0] for line in r.log[:first_launch] if line.startswith("cuLibraryGetKernel")}
    assert {"add_f32", "add_f64", "tsum", "pack", "tma2d"} <= got, got  # the handle preloaded every kernel
    launches = [line for line in r.calls("cuLaunchKernel") if not line.endswith("-> 201")]
    kernels = [r.field(x, "kernel") for x in launches]
    assert kernels == ["add_f32_vec4", "add_f64", "add_f32", "add_f32", "tsum", "tsum", "tsum"]
    # the view reached the kernel as {data, shape0, shape1, stride0} (then out): family and typed entry alike
    compact = "0000040000000000" "40000000" "20000000" "2000000000000000" "0000030000000000"
    strided = compact.replace("2000000000000000", "2800000000000000")
    assert [r.field(x, "params") for x in launches[4:]] == [compact, compact, strided]


def test_headers_document_every_public_symbol(clib_env):
    for path in (clib_env.demo.header, clib_env.demo.cpp_header):
        text = path.read_text()
        assert undocumented(text) == [], path.name
        # the scanner is not vacuous: dropping any one-line doc comment is noticed
        lines = text.splitlines()
        for i, line in enumerate(lines):
            s = line.strip()
            alone = s.startswith("///") and not lines[i - 1].strip().startswith("///") and \
                not lines[i + 1].strip().startswith("///")
            if alone or (s.startswith("/**") and s.endswith("*/")) or "/**<" in line:
                kept = [line[:line.index("/**<")]] if "/**<" in line else []
                assert undocumented("\n".join(lines[:i] + kept + lines[i + 1:])), f"{path.name}:{i + 1}: {s}"


def test_scanner_flags_undocumented_declarations():
    text = """/** A. */
typedef struct a { int x; /**< x */ int y; } a;
typedef enum e {
    E_ONE = 1, /**< one */
    E_TWO = 2,
} e;
#define UNDOC 1
namespace n {
/// Documented.
class C {
  public:
    void f();
  private:
    int g;
};
inline int h() { return 1; }
}  // namespace n
"""
    assert [m.split(":", 1)[1].strip() for m in undocumented(text)] == [
        "typedef enum e {", "E_TWO = 2,", "#define UNDOC 1", "namespace n {", "void f();",
        "inline int h() { return 1; }"]


def test_status_entries_are_nodiscard(clib_env, tmp_path):
    src = tmp_path / "ignored.cpp"
    src.write_text('#include "demo.hpp"\nint main() {\n    demo::fixed_block(kp::launch(1), nullptr);\n'
                   '    demo::preload(0);\n    return 0;\n}\n')
    proc = subprocess.run([CXX, "-std=c++17", "-Wall", "-Wextra", f"-I{clib_env.demo.include_dir}", "-fsyntax-only",
                           str(src)], capture_output=True, text=True)
    assert proc.stderr.count("nodiscard") >= 2 or proc.stderr.count("warn_unused_result") >= 2, proc.stderr


def _lib(env, name, tmp, *extra):
    arts = [KernelArtifact("add", "add_f32", add_abi(DType.f32), bins(env.kernels, "80"), variant="f32"),
            KernelArtifact("add", "add_f64", add_abi(DType.f64), bins(env.kernels, "80"), variant="f64"), *extra]
    return Library(name, *arts).build(tmp / name, cache=CompileCache(None))


TWO = r"""
#include <cstdio>
#include "alpha.hpp"
#include "beta.hpp"
int main() {
    kp::device_span<const float> x(reinterpret_cast<float*>(0x1000), 8);
    kp_status a = alpha::add(kp::launch(1, 32), x, x, reinterpret_cast<float*>(0x3000), 8);
    kp_status b = beta::add(kp::launch(1, 32), reinterpret_cast<double*>(0x1000), reinterpret_cast<double*>(0x2000),
                            reinterpret_cast<double*>(0x3000), 8);
    alpha::Library la(0, std::nothrow);
    std::printf("%s %s %d\n", alpha::status_name(a), beta::status_name(b), la.ok() ? 1 : 0);
    return 0;
}
"""


def test_two_libraries_cpp_headers_together(clib_env, tmp_path):
    # a kernel named after a C++ keyword keeps its C entry and gets no C++ overload
    keyword = KernelArtifact("delete", "fixed_block", Abi((Param("out", Pointer(DType.f32)),)),
                             bins(clib_env.kernels, "80"))
    alpha, beta = _lib(clib_env, "alpha", tmp_path, keyword), _lib(clib_env, "beta", tmp_path)
    assert "alpha_delete(" in alpha.header.read_text() and " delete(" not in alpha.cpp_header.read_text()
    src = tmp_path / "two.cpp"
    src.write_text(TWO)
    exe = compile_program(src, tmp_path / "two", alpha.include_dir,
                          [str(alpha.shared), str(beta.shared), f"-Wl,-rpath,{alpha.lib_dir}:{beta.lib_dir}"],
                          cxx=True, flags=(f"-I{beta.include_dir}", *STRICT))
    r = run(exe, clib_env.root, clib_env.fake, FAKECUDA_CC="8.0")
    assert r.stdout.strip() == "KP_SUCCESS KP_SUCCESS 1", r.stdout + r.stderr


def test_cpp_layer_names_are_kept_by_renaming(clib_env):
    """A family called like the C++ layer's own names keeps its C entry; its C++ overload gets a trailing _."""
    lib = KernelArtifact("Library", "fixed_block", Abi((Param("out", Pointer(DType.f32)),)),
                         bins(clib_env.kernels, "80"))
    src = Library("lib", lib).generate()
    assert "kp_status lib_Library(const kp_launch* kp_cfg, float* out);" in src.header
    assert "inline kp_status Library_(const kp_launch& kp_cfg, float* out)" in src.cpp_header
    assert "class Library {" in src.cpp_header
