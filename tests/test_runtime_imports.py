"""``kernelpack.load`` stays light: loading a bundle or a built library imports the runtime and the readers, not
the C library generator, the CuTe host-program builder or a DSL (a service pays for what it uses). ``import
kernelpack`` imports no frontend, and ``kernelpack.cuda`` & co. (attributes imported on first use) import no DSL
until a compile needs one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from toolchain_support import CC, needs_cuda_compiler, needs_tools

HEAVY = ("kernelpack.clib.build", "kernelpack.clib.generate", "kernelpack.clib.host.build", "kernelpack.cute",
         "kernelpack.triton", "kernelpack.cutile", "kernelpack.cuda", "triton", "cutlass", "torch")

# made on first use, not by loading: docs (help(), __doc__, signatures), the whole bundle's objects
LAZY = ("kernelpack.runtime.docs", "kernelpack.runtime.host", "kernelpack.clib", "kernelpack.core.ptx",
        "kernelpack.runtime.checks", "kernelpack.runtime.adapters", "kernelpack.runtime.packer")

DSLS = ("triton", "cutlass", "cuda", "torch", "numpy")  # cuda: cuda.tile (cuTile), cuda.core (NVRTC), cuda.bindings
FRONTENDS = ("cuda", "triton", "cutile", "cute", "prebuilt")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _dsls(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if m in DSLS or m.startswith(tuple(d + "." for d in DSLS)))


def test_import_kernelpack_imports_no_frontend_and_no_dsl() -> None:
    mods = _modules_after("import kernelpack")
    assert not [m for m in mods if m.startswith(("kernelpack.clib", "kernelpack.runtime", "kernelpack.clib.host",
                                                 "kernelpack.frontends"))], sorted(mods)
    assert not [f for f in FRONTENDS if f"kernelpack.{f}" in mods]
    assert not _dsls(mods)


def test_frontends_are_attributes_that_import_no_dsl_until_a_compile() -> None:
    code = f"""import kernelpack
assert all(callable(getattr(kernelpack, f).compile) for f in {FRONTENDS!r})
assert kernelpack.Library.__name__ == "Library" and kernelpack.cute.export
assert set({FRONTENDS!r}) <= set(dir(kernelpack))
try:
    kernelpack.nope
except AttributeError as e:
    assert "nope" in str(e)
else:
    raise SystemExit("no AttributeError")"""
    mods = _modules_after(code)
    assert {f"kernelpack.{f}" for f in FRONTENDS} <= mods
    assert not _dsls(mods), _dsls(mods)


def _modules_after_load(path: str) -> set[str]:
    code = ("import json, sys, kernelpack; m = kernelpack.load(sys.argv[1]); assert m.__all__; "
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from kernelpack.cli.demo import compile_examples
    from kernelpack.clib import Library

    out = tmp_path_factory.mktemp("imports")
    bundle = compile_examples(("sm_90a",))
    return bundle.write(out / "k.kpack"), Library("kpimp", bundle).build(out / "lib").shared


@needs_cuda_compiler
@pytest.mark.parametrize("which", ["bundle", "library"])
def test_loading_imports_neither_the_generator_nor_a_dsl(built, which):
    mods = _modules_after_load(str(built[0] if which == "bundle" else built[1]))
    assert "kernelpack.runtime.module" in mods
    assert not sorted(m for m in mods if m in HEAVY or m.startswith(tuple(h + "." for h in HEAVY)))
    if which == "bundle":  # a library's reader is kernelpack.bundle.embedded
        assert not sorted(m for m in mods if m in LAZY or m.startswith(tuple(h + "." for h in LAZY)))
    else:
        assert "kernelpack.runtime.docs" not in mods


# the kernel-bundle machinery: imported when a module first builds a kernel family, never for host programs
KERNEL_MACHINERY = ("kernelpack.bundle.kpack", "kernelpack.bundle.index", "kernelpack.bundle.artifact",
                    "kernelpack.bundle.merge", "kernelpack.runtime.family", "kernelpack.runtime.loader",
                    "kernelpack.launch.binaries", "kernelpack.launch.device", "kernelpack.launch.facts",
                    "kernelpack.launch.record", "kernelpack.core.verify", "kernelpack.core.cubin")


def _host_library(out, programs):  # type: ignore[no-untyped-def]
    """A shared library carrying only the description of CuTe host programs (section ``.kpack_host``, as the
    generated entry source places it): no kernels, and no CuTe compile (the entries are never called here)."""
    from kernelpack.bundle import host_manifest as hm
    from kernelpack.core.version import __version__

    # format 1 (each type inline), as libraries built before format 2 carry it: still read
    doc = {"format": 1, "kernelpack": __version__, "library": "kphostonly", "programs": [
        {"name": name, "variant": "", "symbol": f"kphostonly_{name}", "zero_extent": "skip", "archs": ["sm_90a"],
         "params": params} for name, params in programs]}
    body = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    raw = hm.MAGIC + len(body).to_bytes(8, "little") + body
    raw += b"\0" * (-len(raw) % 8)
    src = out / "hostonly.c"
    data = ", ".join(map(str, raw))
    src.write_text(f'__attribute__((section("{hm.SECTION}"), used, aligned(8)))\n'
                   f"static const unsigned char kphostonly_kp_host_manifest[{len(raw)}] = {{{data}}};\n"
                   "int kphostonly_scale(void) { return 0; }\n")
    lib = out / "libkphostonly.so"
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, capture_output=True, timeout=120)
    return lib


def _scale_params():  # type: ignore[no-untyped-def]
    from kernelpack.core.abi import DType, Pointer, Scalar, Struct, TensorSpec, type_to_json

    tensor = Struct.tensor_descriptor("tensor_f32_dx1", TensorSpec(DType.f32, (None,), (1,), align=16))
    return [{"name": "x", "type": type_to_json(tensor), "stream": False, "checks": [["data", 16]]},
            {"name": "scale", "type": type_to_json(Scalar(DType.f32)), "stream": False, "checks": []},
            {"name": "stream", "type": type_to_json(Pointer(None)), "stream": True, "checks": []}]


@pytest.fixture(scope="module")
def host_only(tmp_path_factory):
    return _host_library(tmp_path_factory.mktemp("hostonly"), [("scale", _scale_params())])


@needs_tools(CC)
def test_loading_host_programs_only_imports_no_kernel_machinery(host_only) -> None:
    """A library of CuTe host programs only (libfa4: 48 of them, no kernel): loading it, reaching a program and
    preparing its checked entry (what a first call does before the driver) import neither the .kpack reader nor the
    kernel families, their loader or the launch model's binary and device rules."""
    code = ("import json, sys, kernelpack; m = kernelpack.load(sys.argv[1]); assert m.__all__ == ['scale']; "
            "assert [c.label for c in m.scale.host_program.calls] == ['scale']; "
            "assert 'scale(x: tensor f32[?]' in m.__doc__ and m.families == {}; "
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code, str(host_only)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    mods = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "kernelpack.runtime.host" in mods
    assert not sorted(m for m in mods if m in KERNEL_MACHINERY), sorted(mods)
    assert not sorted(m for m in mods if m in HEAVY or m.startswith(tuple(h + "." for h in HEAVY)))


@needs_tools(CC)
def test_host_only_library_still_offers_the_kernel_views(host_only) -> None:
    """What a module shows of its kernels stays as it was for a library without any: an empty bundle (the same one
    each time), no families, a KeyError naming the programs for an unknown kernel."""
    import kernelpack
    from kernelpack.runtime.module import read_any

    mod = kernelpack.load(host_only)
    assert len(mod.bundle) == 0 and mod.bundle is mod.bundle and mod.families == {}
    assert len(read_any(host_only)) == 0
    with pytest.raises(KeyError, match="has no kernel 'axpy'; kernels: scale"):
        mod["axpy"]
    with pytest.raises(AttributeError, match="has no kernel 'axpy'"):
        mod.axpy  # noqa: B018



@needs_tools(CC)
def test_host_program_types_are_parsed_at_first_use(tmp_path, monkeypatch) -> None:
    """Loading reads each host program's name and argument names only; its parameter types are parsed when it is
    first used, so a malformed type fails then (a BundleError naming the library and the section), and the other
    programs of the library stay callable."""
    import inspect

    import kernelpack
    from kernelpack.bundle import host_manifest
    from kernelpack.core.errors import BundleError

    bad = [{"name": "x", "type": {"kind": "bogus"}, "stream": False, "checks": []}]
    lib = _host_library(tmp_path, [("scale", _scale_params()), ("broken", bad)])
    parsed: list[object] = []
    real = host_manifest.type_from_json
    monkeypatch.setattr(host_manifest, "type_from_json", lambda d: parsed.append(d) or real(d))
    mod = kernelpack.load(lib)
    assert mod.__all__ == ["broken", "scale"] and not parsed
    assert [str(p) for p in inspect.signature(mod.scale).parameters] == ["x", "scale", "stream"]
    assert [c.label for c in mod.scale.host_program.calls] == ["scale"] and len(parsed) == 3
    with pytest.raises(BundleError, match=r"libkphostonly.so: malformed host-program record in section "
                                          r"\.kpack_host: AbiError\(\"unknown ABI type kind 'bogus'"):
        mod.broken.host_program.calls  # noqa: B018
