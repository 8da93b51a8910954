"""The typed stub of a generated package (``NAME/__init__.pyi``) against what the runtime takes: every launch option
the family's call accepts (``pdl`` and ``cooperative`` too) is in the stub, keyword-only, and ``block`` may be left
out exactly where every specialization fixes it -- by its launch rule, per arch or not, or by the cubin's REQNTID,
the same block or not -- as the runtime then chooses it itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.abi import Abi, DType, Param, Pointer
from kernelpack.core.launchspec import ArchLaunch, LaunchSpec
from kernelpack.runtime import docs
from kernelpack.runtime.module import KernelModule
from kernelpack.wheel.package import package_files


@pytest.fixture(scope="module")
def env(tmp_path_factory):  # type: ignore[no-untyped-def]
    from clib_support import session_env

    return session_env(tmp_path_factory)


def _module(env, tmp_path: Path) -> KernelModule:  # type: ignore[no-untyped-def]
    from clib_support import add_abi, bins

    k, one_ptr, f32 = env.kernels, Abi((Param("out", Pointer(DType.f32)),)), DType.f32
    arts = [
        KernelArtifact("free", "add_f32", add_abi(f32), bins(k, "80", "90a")),  # the caller gives the block
        KernelArtifact("reqntid", "fixed_block", one_ptr, bins(k, "80", "90a")),  # the cubin's REQNTID fixes it
        KernelArtifact("per_arch", "noargs", Abi(()), bins(k, "80", "90a"), launch=LaunchSpec(block=(64, 1, 1)),
                       per_arch={"sm_90a": ArchLaunch(LaunchSpec(block=(128, 1, 1)))}),
        # an autotuned family: each config its own block (Triton's num_warps)
        KernelArtifact("configs", "noargs", Abi(()), bins(k, "80", "90a"), launch=LaunchSpec(block=(32, 1, 1)),
                       requires={"sm_count": 108}, variant="big"),
        KernelArtifact("configs", "noargs", Abi(()), bins(k, "80", "90a"), launch=LaunchSpec(block=(256, 1, 1)),
                       variant="small"),
        # one config fixes its block, the other leaves it to the caller: the caller must give it
        KernelArtifact("mixed", "noargs", Abi(()), bins(k, "80", "90a"), launch=LaunchSpec(block=(32, 1, 1)),
                       requires={"sm_count": 108}, variant="big"),
        KernelArtifact("mixed", "noargs", Abi(()), bins(k, "80", "90a"), variant="any"),
    ]
    path = tmp_path / "stubbed.kpack"
    Bundle.of(arts).write(path)
    return KernelModule(Bundle.from_bytes(path.read_bytes()), str(path))


def _options(stub: str) -> dict[str, dict[str, tuple[str, bool]]]:
    """family -> keyword-only option -> (annotation, has a default)."""
    out = {}
    for fn in ast.parse(stub).body:
        if isinstance(fn, ast.FunctionDef) and fn.args.kwonlyargs:
            out[fn.name] = {a.arg: (ast.unparse(a.annotation).split(".", 1)[-1] if a.annotation else "",
                                    d is not None) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults)}
    return out


def test_the_stub_carries_every_launch_option_and_block_is_optional_where_every_specialization_fixes_it(
        env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mod = _module(env, tmp_path)
    stub = package_files(mod, "stubbed", "1.0", ("stubbed.kpack",), with_library=False).stub
    opts = _options(stub)
    assert set(opts) == {"free", "reqntid", "per_arch", "configs", "mixed"}
    for name, got in opts.items():
        fam = mod.families[name]
        runtime = [p.name for p in docs.signature(fam).parameters.values() if p.kind is p.KEYWORD_ONLY]
        assert list(got) == runtime == ["grid", "block", "smem", "stream", "cluster", "pdl", "cooperative"], name
        assert got["pdl"] == got["cooperative"] == ("Bool | None", True), got
        assert got["smem"] == ("Int | None", True) and got["stream"] == ("Stream | None", True)
    block = {name: got["block"] for name, got in opts.items()}
    assert block == {"free": ("Dim3", False), "mixed": ("Dim3", False), "reqntid": ("Dim3 | None", True),
                     "per_arch": ("Dim3 | None", True), "configs": ("Dim3 | None", True)}
    # the docs' signature line says the same
    assert "block=None" in docs.signature_text(mod.families["configs"])
    assert "block=None" not in docs.signature_text(mod.families["mixed"])
