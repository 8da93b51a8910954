"""Triton signatures from example arguments: for each mix of arguments, kernelpack derives exactly what Triton's own
JIT picks for the same call (``JITFunction.warmup`` run against a stand-in active driver, its
``jit_cache_hook`` reporting the signature, constants and attributes it would compile with), no GPU needed."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

pytest.importorskip("triton", reason="triton is not installed")
torch = pytest.importorskip("torch", reason="torch is not installed")
import numpy as np  # noqa: E402
import triton.language as tl  # noqa: E402

import kernelpack.frontends.triton.compile as kt  # noqa: E402
import triton_sig_kernels as K  # noqa: E402
from kernelpack import CompileError  # noqa: E402


class _StandInDriver:
    """What JITFunction.run asks the active driver for, answered for an sm_90 CUDA target with no GPU."""

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)

    def get_active_torch_device(self) -> Any:
        return torch.device("cpu")


def jit_choice(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """What Triton's JIT would compile ``fn[grid](*args, **kwargs)`` with: its signature, constants and attributes."""
    from triton import knobs
    from triton.runtime.driver import driver

    seen: list[dict[str, Any]] = []

    def hook(**kw: Any) -> bool:
        seen.append(kw["compile"])
        return True  # the JIT stops before compiling

    previous, old_hook = driver._active, knobs.runtime.jit_cache_hook
    driver.set_active(_StandInDriver())
    knobs.runtime.jit_cache_hook = hook
    try:
        fn.device_caches.clear()
        fn.warmup(*args, grid=(1,), enable_fp_fusion=True, **kwargs)  # as kernelpack compiles; Triton 3.9 warns without
    finally:
        knobs.runtime.jit_cache_hook = old_hook
        driver._active = previous
        fn.device_caches.clear()
    (c,) = seen
    attrs = {k: v for k, v in c["configs"][0].items() if v}
    return {"signature": c["signature"], "constants": c["constants"], "attrs": attrs}


def ours(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """kernelpack's derived signature in the JIT's terms (constants and attributes keyed by parameter index)."""
    d = kt.signature_from_args(fn, args, constexprs=kwargs)
    names = list(fn.arg_names)
    sig = {n: d.signature.get(n, "constexpr") for n in names}
    consts = {(names.index(n),): v for n, v in d.constexprs.items()}
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in d.divisibility}
    return {"signature": sig, "constants": consts, "attrs": attrs}


def _t(dtype: Any, device: str = "cpu", offset: int = 0, n: int = 64) -> Any:
    return torch.empty(n + offset, dtype=dtype, device=device)[offset:]


TENSORS = [(dt, dev, off) for dt in (torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int32,
                                    torch.int64, torch.uint8, torch.bool, torch.float8_e4m3fn)
           for dev in ("cpu", "meta") for off in (0, 1, 8, 16)]
INTS = [0, 1, -1, 2, 15, 16, 17, 48, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1]


@pytest.mark.parametrize(("dtype", "device", "offset"), TENSORS)
def test_tensors_match_the_jit(dtype: Any, device: str, offset: int) -> None:
    args = (_t(dtype, device, offset), _t(torch.float32), 2, 64, 1.5, True, None)
    assert ours(K.mixed, args, {"BLOCK": 32}) == jit_choice(K.mixed, args, {"BLOCK": 32})


@pytest.mark.parametrize("a", INTS)
@pytest.mark.parametrize("b", [1, 16, 2**40])
def test_ints_match_the_jit(a: int, b: int) -> None:
    args = (_t(torch.float16), _t(torch.float16, offset=3), a, b, 0.0, False, _t(torch.float32))
    assert ours(K.mixed, args, {"BLOCK": 64}) == jit_choice(K.mixed, args, {"BLOCK": 64})


@pytest.mark.parametrize("f", [1.0, 0.5, -3.25, float("inf"), 2, 1, True])
@pytest.mark.parametrize("flag", [True, False, 1, 0, 7])
@pytest.mark.parametrize("opt", [None, "tensor", 5])
def test_floats_bools_none_match_the_jit(f: Any, flag: Any, opt: Any) -> None:
    o = _t(torch.int32, "meta", 2) if opt == "tensor" else opt
    args = (_t(torch.float32), _t(torch.bfloat16), 16, 100, f, flag, o)
    assert ours(K.mixed, args, {"BLOCK": 16}) == jit_choice(K.mixed, args, {"BLOCK": 16})


@pytest.mark.parametrize("args", [
    (_t(torch.float32), _t(torch.float32, offset=1), 1, 1),  # do_not_specialize: m stays i32, never constant
    (_t(torch.float32), _t(torch.float32), 32, 16),  # q_ptr: never aligned (do_not_specialize_on_alignment)
    (_t(torch.float32, offset=2), _t(torch.float32), 2**33, 2**33),  # k: tl.int64 annotation
    (_t(torch.float32), _t(torch.float32), 7, 1, 4),  # r: a default constexpr given positionally
])
def test_annotations_and_do_not_specialize_match_the_jit(args: tuple[Any, ...]) -> None:
    assert ours(K.hinted, args, {}) == jit_choice(K.hinted, args, {})


def test_const_pointer_annotation_matches_the_jit() -> None:
    args = (_t(torch.float16), _t(torch.float16, offset=1), 4096)
    assert ours(K.const_ptr, args, {"BLOCK": 128}) == jit_choice(K.const_ptr, args, {"BLOCK": 128})
    assert kt.signature_from_args(K.const_ptr, args, constexprs={"BLOCK": 128}).signature["src"] == "*kfp16"


def test_constexpr_positional_keyword_and_tl_constexpr() -> None:
    x = _t(torch.float32)
    base = (x, x, 3, 64, 1.0, True, None)
    for args, kw in [((*base, 32), {}), (base, {"BLOCK": 32}), ((*base, tl.constexpr(32)), {})]:
        assert ours(K.mixed, args, kw) == jit_choice(K.mixed, args, kw)
        assert kt.signature_from_args(K.mixed, args, constexprs=kw).constexprs["BLOCK"] == 32
    # the same value in both places is fine; different values are refused
    assert kt.signature_from_args(K.mixed, (*base, 32), constexprs={"BLOCK": 32}).constexprs["BLOCK"] == 32
    with pytest.raises(CompileError, match=r"'BLOCK' is 32 in the example arguments and 64 in constexprs"):
        kt.signature_from_args(K.mixed, (*base, 32), constexprs={"BLOCK": 64})


def test_numpy_arrays_and_scalars_and_torch_dtypes() -> None:
    """numpy arrays are taken at their host address like a CPU tensor; numpy scalars as Python numbers; a torch dtype
    as an aligned tensor of that dtype (JITFunction.warmup's convention)."""
    a = np.zeros(65, np.float16)
    d = kt.signature_from_args(K.mixed, (a, a[1:], np.int64(16), np.int32(2**31 - 1), np.float32(2.0),
                                         np.bool_(True), None, 8))
    ref = jit_choice(K.mixed, (torch.from_numpy(a), torch.from_numpy(a)[1:], 16, 2**31 - 1, 2.0, True, None, 8), {})
    assert ours(K.mixed, (a, a[1:], 16, 2**31 - 1, 2.0, True, None, 8), {}) == ref
    assert d.signature == {"x_ptr": "*fp16", "y_ptr": "*fp16", "a": "i32", "b": "i32", "f": "fp32", "flag": "u1"}
    assert d.divisibility == ("x_ptr", "a")
    args = (torch.bfloat16, torch.float32, 16, 32, 1.0, False, None)
    assert ours(K.mixed, args, {"BLOCK": 8}) == jit_choice(K.mixed, args, {"BLOCK": 8})


def test_cpu_and_meta_tensors_agree() -> None:
    """A meta tensor's address is its storage offset; a CPU tensor's storage is 64-byte aligned: same answer."""
    for off in range(0, 9):
        cpu = kt.signature_from_args(K.mixed, (_t(torch.float16, "cpu", off), _t(torch.float16), 2, 2, 1.0, 1, None, 8))
        meta = kt.signature_from_args(K.mixed, (_t(torch.float16, "meta", off), _t(torch.float16), 2, 2, 1.0, 1, None,
                                                8))
        assert cpu == meta
        assert ("x_ptr" in cpu.divisibility) == (off % 8 == 0)


def test_bad_example_arguments_are_reported() -> None:
    x = _t(torch.float32)
    with pytest.raises(CompileError, match=r"kernel mixed: the example arguments do not fit its parameters"):
        kt.signature_from_args(K.mixed, (x, x))
    with pytest.raises(CompileError, match=r"\['num_warps'\] are not parameters of the kernel"):
        kt.signature_from_args(K.mixed, {"x_ptr": x, "y_ptr": x, "a": 1, "b": 2, "f": 1.0, "flag": True, "opt": None,
                                         "BLOCK": 8, "num_warps": 4})
    with pytest.raises(CompileError, match=r"constexpr 'BLOK' is not a parameter"):
        kt.signature_from_args(K.mixed, (x, x, 1, 2, 1.0, True, None), constexprs={"BLOK": 8})
    with pytest.raises(CompileError, match=r"parameter 6 'opt' is a tuple"):
        kt.signature_from_args(K.mixed, (x, x, 1, 2, 1.0, True, (x, x), 8))
    with pytest.raises(CompileError, match=r"example_args must be a tuple or list"):
        kt.signature_from_args(K.mixed, "x")


def test_toml_form_round_trips_into_compile_arguments() -> None:
    x = _t(torch.float32, "meta")
    d = kt.signature_from_args(K.mixed, (x, x[1:], 1, 4096, 0.5, True, None), constexprs={"BLOCK": 128})
    text = d.to_toml(kernel="triton_sig_kernels.py:mixed", name="mixed")
    entry = tomllib.loads(text)["triton"][0]
    assert entry["kernel"] == "triton_sig_kernels.py:mixed" and entry["name"] == "mixed"
    assert entry["signature"] == {"x_ptr": "*fp32", "y_ptr": "*fp32", "b": "i32", "f": "fp32", "flag": "u1"}
    assert entry["constexprs"] == {"a": 1, "BLOCK": 128}  # a = 1: the JIT made it a constant
    assert entry["specializations"] == [{"divisibility": ["x_ptr", "b"]}]
    assert "# constexpr opt = None has no TOML form" in text
    assert "a, opt: made constants by the JIT" in text
    assert d.compile_args()["specializations"] == [{"divisibility": ["x_ptr", "b"]}]


def test_compile_with_example_args_builds_what_the_jit_would() -> None:
    """The artifact compiled from example arguments is the JIT's kernel: same cubin as triton.compile with the JIT's
    own signature, constants and attributes; the divisibility became the artifact's dispatch constraints."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    x = _t(torch.float16, "meta")
    args = (x, x[3:], 2, 4096, 0.5, True, None)
    (art,) = kt.compile(K.mixed, example_args=args, constexprs={"BLOCK": 128}, arch="sm_90a", name="mixed")
    ref = jit_choice(K.mixed, args, {"BLOCK": 128})
    want = triton.compile(ASTSource(K.mixed, ref["signature"], ref["constants"], ref["attrs"]),
                          target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": 4, "num_stages": 3, "num_ctas": 1, "enable_fp_fusion": True})
    assert art.binaries[0].data == want.asm["cubin"]
    assert [(p.name, p.divisibility) for p in art.abi if p.role == "arg"] == [
        ("x_ptr", 16), ("y_ptr", 1), ("a", 1), ("b", 16), ("f", 1), ("flag", 1)]


def test_compile_overrides_the_derived_signature() -> None:
    x = _t(torch.float32, "meta")
    args = (x, x, 1, 4096, 0.5, True, None)
    # `a` would be the constant 1: typing it keeps it a parameter; a specialization's own divisibility wins
    (art,) = kt.compile(K.mixed, {"a": "i32"}, example_args=args, constexprs={"BLOCK": 64}, arch="sm_90a",
                        specializations=[{"divisibility": []}])
    assert [p.name for p in art.abi if p.role == "arg"] == ["x_ptr", "y_ptr", "a", "b", "f", "flag"]
    assert all(p.divisibility == 1 for p in art.abi)
    with pytest.raises(CompileError, match="give a signature or example_args"):
        kt.compile(K.mixed, arch="sm_90a")


def test_project_entry_derives_from_example_args(tmp_path: Path, fresh_cache: Any) -> None:
    """``example_args = "args.py:add_args"`` in a [[triton]] entry: the build derives the signature as the JIT would,
    and the frozen TOML of that signature builds the same kernel."""
    from kernelpack.project import build

    (tmp_path / "tk.py").write_text((Path(__file__).parent / "triton_kernels.py").read_text())
    (tmp_path / "args.py").write_text(textwrap.dedent("""
        import torch

        def add_args():
            x = torch.empty(4096, device="meta")
            return (x, x, x[1:], 4096)
    """))
    head = '[library]\nname = "tr"\narchs = ["sm_90a"]\noutputs = ["bundle"]\n'
    (tmp_path / "kernelpack.toml").write_text(head + textwrap.dedent("""
        [[triton]]
        kernel = "tk.py:add_kernel"
        name = "add"
        example_args = "args.py:add_args"
        constexprs = { BLOCK = 1024 }
        specializations = [{ variant = "jit" }, { variant = "any", divisibility = [] }]
    """))
    r = build(tmp_path, jobs=1)
    assert sorted(r.jobs) == ["triton:add[any]", "triton:add[jit]"]
    from kernelpack.bundle.kpack import Bundle

    arts = {a.variant: a for a in Bundle.from_bytes(Path(r.outputs["bundle"]).read_bytes())}
    assert [p.divisibility for p in arts["jit"].abi if p.role == "arg"] == [16, 16, 1, 16]
    assert [p.divisibility for p in arts["any"].abi if p.role == "arg"] == [1, 1, 1, 1]

    import importlib.util

    spec = importlib.util.spec_from_file_location("kp_test_tk", tmp_path / "tk.py")
    assert spec is not None and spec.loader is not None
    tk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tk)
    x = torch.empty(4096, device="meta")
    frozen = kt.signature_from_args(tk.add_kernel, (x, x, x[1:], 4096), constexprs={"BLOCK": 1024})
    (tmp_path / "kernelpack.toml").write_text(head + frozen.to_toml(kernel="tk.py:add_kernel", name="add"))
    r2 = build(tmp_path, jobs=1, out=tmp_path / "frozen")
    (art,) = Bundle.from_bytes(Path(r2.outputs["bundle"]).read_bytes())
    assert art.abi == arts["jit"].abi and art.binaries == arts["jit"].binaries


@pytest.mark.parametrize(("toml", "match"), [
    ('example_args = 5\n', r"key 'example_args': expected a reference such as \"kernels.py:example_args\""),
    ('example_args = "args.py:nothing"\n', r"example_args must give a tuple or list of arguments"),
])
def test_project_example_args_errors(tmp_path: Path, toml: str, match: str) -> None:
    from kernelpack.core.errors import KernelpackError
    from kernelpack.project import build

    (tmp_path / "tk.py").write_text((Path(__file__).parent / "triton_kernels.py").read_text())
    (tmp_path / "args.py").write_text("nothing = None\n")
    (tmp_path / "kernelpack.toml").write_text('[library]\nname = "tr"\narchs = ["sm_90a"]\noutputs = ["bundle"]\n'
                                              '[[triton]]\nkernel = "tk.py:add_kernel"\n' + toml)
    with pytest.raises(KernelpackError, match=match):
        build(tmp_path, jobs=1)


@pytest.mark.parametrize("n", [1, 100, 128, 2**20])
def test_heuristics_are_applied_as_the_jit_does(n: int) -> None:
    """``@triton.heuristics`` values come from the call, before the JIT binds it (JITFunction.warmup of the wrapper
    would not run them: the reference is the inner JIT given the values Heuristics.run computes)."""
    x = _t(torch.float32)
    d = kt.signature_from_args(K.heuristic, (x, n))
    block = 1 << max(n - 1, 0).bit_length()
    assert d.constexprs["BLOCK"] == block and d.constexprs["EVEN"] == (n % 2 == 0)
    assert ours(K.heuristic.fn, (x, n), {"BLOCK": block, "EVEN": n % 2 == 0}) == jit_choice(
        K.heuristic.fn, (x, n), {"BLOCK": block, "EVEN": n % 2 == 0})
    assert d == kt.signature_from_args(K.heuristic.fn, (x, n), constexprs={"BLOCK": block, "EVEN": n % 2 == 0})


def test_autotuned_kernels_take_the_chosen_config() -> None:
    x = _t(torch.float32)
    with pytest.raises(CompileError, match=r"it is autotuned: each config gives its own"):
        kt.signature_from_args(K.tuned, (x, 100))
    assert kt.signature_from_args(K.tuned, (x, 100), constexprs={"BLOCK": 128}).constexprs == {"BLOCK": 128}


def test_triton_compile_errors_keep_the_whole_chain() -> None:
    x = _t(torch.float32, "meta")
    with pytest.raises(CompileError) as info:
        kt.compile(K.broken, example_args=(x, 100), constexprs={"BLOCK": 64}, arch="sm_90a")
    e = info.value
    assert "Triton failed: CompilationError:" in e.message and "undefined_value" in e.message
    assert e.log is not None and "[0] triton.compiler.errors.CompilationError:" in e.log and "traceback:" in e.log


@pytest.mark.parametrize(("dtype", "triton_type", "kp"), [(torch.float8_e4m3fn, "*fp8e4nv", "f8e4m3"),
                                                          (torch.float8_e5m2, "*fp8e5", "f8e5m2")])
def test_fp8_tensors_become_fp8_pointer_params(dtype: Any, triton_type: str, kp: str) -> None:
    """A torch float8 tensor derives Triton's own fp8 pointer type, and the compiled artifact's ABI names the
    kernelpack fp8 dtype (uint8_t storage in C), not an untyped pointer."""
    args = (_t(dtype, "meta"), _t(torch.float32, "meta"), 64)
    d = kt.signature_from_args(K.fp8_widen, args, constexprs={"BLOCK": 64})
    assert d.signature["x_ptr"] == triton_type
    (art,) = kt.compile(K.fp8_widen, example_args=args, constexprs={"BLOCK": 64}, arch="sm_90a", name="fp8_widen")
    x = art.abi.params[0]
    assert (x.name, x.type.pointee.value, x.type.c_type) == ("x_ptr", kp, "uint8_t*")


def test_fp8_scalar_parameter_is_refused() -> None:
    with pytest.raises(CompileError, match=r"parameter 2 'n': unsupported Triton type 'fp8e4nv'"):
        kt.compile(K.fp8_widen, {"x_ptr": "*fp8e4nv", "y_ptr": "*fp32", "n": "fp8e4nv"}, constexprs={"BLOCK": 64},
                   arch="sm_90a")


# ------------------------------------------------------------------ autotune = true with example_args (issue 28, 5)

ISSUE_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})], key=["n"])
@triton.jit
def scale(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)


def example_args():
    x = torch.empty(1024, device="meta")
    return (x, x, 1024)
'''


def test_autotune_true_with_example_args_builds_every_config_and_warns_the_family_runs_its_first(
        tmp_path: Path, fresh_cache: Any, capsys: Any) -> None:
    """The project path of issue 28: each config's constexprs complete the example call; the untuned family warns
    at build that every call launches its first config."""
    import kernelpack.cli as cli
    from kernelpack.bundle.kpack import Bundle

    (tmp_path / "k.py").write_text(ISSUE_KERNEL)
    (tmp_path / "kernelpack.toml").write_text(
        '[library]\nname = "k"\narchs = ["sm_90a"]\noutputs = ["bundle"]\n\n[[triton]]\nkernel = "k.py:scale"\n'
        'example_args = "k.py:example_args"\nautotune = true\n')
    assert cli.main(["build", "-j", "1", str(tmp_path)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out.replace("\n", " ")
    arts = Bundle.read(tmp_path / "build" / "k.kpack")
    assert [a.label for a in arts] == ["scale[c0]", "scale[c1]"]
    assert [a.launch.block for a in arts] == [(128, 1, 1), (128, 1, 1)]
    assert [[p.divisibility for p in a.abi if p.role == "arg"] for a in arts] == [[16, 16, 16]] * 2
    assert "scale[c0]: launched for every call of scale: scale[c1] accepts the same calls" in out


def test_each_autotune_config_gets_the_heuristics_of_its_own_constexprs() -> None:
    x = _t(torch.float32, "meta")
    c0, c1 = kt.compile(K.tuned_half, example_args=(x, 100), arch="sm_90a", name="half")
    assert [c0.variant, c1.variant] == ["c0", "c1"]
    assert "constexpr HALF=32" in c0.provenance.options and "constexpr HALF=64" in c1.provenance.options
    assert [c0.launch.block, c1.launch.block] == [(64, 1, 1), (128, 1, 1)]


def test_a_missing_constexpr_says_how_to_give_it() -> None:
    x = _t(torch.float32, "meta")
    how = r"constexpr parameter 4 'BLOCK' has no value: give it in constexprs .*`constexprs = \{ BLOCK = \.\.\. \}`"
    with pytest.raises(CompileError, match=how):
        kt.compile(__import__("triton_kernels").add_kernel,
                   {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, arch="sm_90a")
    with pytest.raises(CompileError, match=how):
        kt.signature_from_args(__import__("triton_kernels").add_kernel, (x, x, x, 64))
    with pytest.raises(CompileError, match=r"parameter 2 'BLOCK' has no value.*it is autotuned"):
        kt.signature_from_args(K.tuned, (x, 100))
