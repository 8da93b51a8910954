"""``kernelpack.load`` stays light: loading a bundle or a built library imports the runtime and the readers, not
the C library generator, the CuTe host-program builder or a DSL (a service pays for what it uses)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from toolchain_support import needs_cuda_compiler

HEAVY = ("kernelpack.clib.build", "kernelpack.clib.generate", "kernelpack.cute_host.build", "kernelpack.cute",
         "kernelpack.triton", "kernelpack.cutile", "kernelpack.cuda", "triton", "cutlass", "torch")

pytestmark = needs_cuda_compiler


def _modules_after_load(path: str) -> set[str]:
    code = ("import json, sys, kernelpack; m = kernelpack.load(sys.argv[1]); assert m.__all__; "
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from kernelpack.clib import Library
    from kernelpack.demo import compile_examples

    out = tmp_path_factory.mktemp("imports")
    bundle = compile_examples(("sm_90a",))
    return bundle.write(out / "k.kpack"), Library("kpimp", bundle).build(out / "lib").shared


@pytest.mark.parametrize("which", ["bundle", "library"])
def test_loading_imports_neither_the_generator_nor_a_dsl(built, which):
    mods = _modules_after_load(str(built[0] if which == "bundle" else built[1]))
    assert "kernelpack.runtime.module" in mods
    assert not sorted(m for m in mods if m in HEAVY or m.startswith(tuple(h + "." for h in HEAVY)))
