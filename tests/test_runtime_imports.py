"""``kernelpack.load`` stays light: loading a bundle or a built library imports the runtime and the readers, not
the C library generator, the CuTe host-program builder or a DSL (a service pays for what it uses). ``import
kernelpack`` imports no frontend, and ``kernelpack.cuda`` & co. (attributes imported on first use) import no DSL
until a compile needs one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from toolchain_support import needs_cuda_compiler

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
