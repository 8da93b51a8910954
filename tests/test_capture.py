"""kernelpack capture (GPU-less): every launch of the user's code recorded as the DSL's own binder derives it,
written as a project that builds; families, specializations, grids, autotune configs, merged re-runs, bad input.

The kernels are small ones written for these tests (tests/capture_kernels.py); each capture runs in this process
(the GPU-less world is undone after each block, which a test checks)."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("triton", reason="triton is not installed")
torch = pytest.importorskip("torch", reason="torch is not installed")

import kernelpack.capture as kc  # noqa: E402
from kernelpack.capture import grids  # noqa: E402
from kernelpack.core.errors import KernelpackError  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """tests/capture_kernels.py as a module of its own in tmp_path (a project refers to it by file)."""
    shutil.copy(HERE / "capture_kernels.py", tmp_path / "ck.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("ck", None)
    ck = importlib.import_module("ck")  # written into tmp_path above

    yield ck
    sys.modules.pop("ck", None)


def test_the_gpu_less_world_answers_for_the_named_device_and_undoes_itself(kernels: Any) -> None:
    with kc.capture(device="h100") as cap:
        facts = kernels.device_facts()
    assert facts == {"available": True, "device": "cuda:0", "is_cuda": True, "sms": 132, "capability": (9, 0),
                     "triton_sms": 132, "zeros": 0.0, "moved": "cuda:0", "target": 90}
    assert any(r.startswith("multi_processor_count = 132") for r in cap.answers.summary())
    with kc.capture(device="a100"):
        assert kernels.device_facts()["sms"] == 108
    x = torch.ones(2)
    assert (x.device.type, x.is_cuda, torch.cuda.is_available()) == ("cpu", False, False)
    with pytest.raises(KernelpackError, match=r"unknown device 'h900'.*known: a100, l40s"):
        kc.capture(device="h900")


def test_each_launch_is_recorded_as_the_jit_binds_it_with_its_grid_and_formula(kernels: Any) -> None:
    with kc.capture(device="h200") as cap:
        kernels.add(torch.randn(4096), torch.randn(4096))
        kernels.add(torch.randn(1000, dtype=torch.float16), torch.randn(1000, dtype=torch.float16))
        kernels.rows(torch.randn(8, 100))
    add32, add16, rows = cap.launches
    assert (add32.name, add32.label, add32.grid) == ("add_kernel", "fp32", (16, 1, 1))
    assert add32.family["params"] == ["x_ptr", "y_ptr", "out_ptr", "n"] and add32.family["constexprs"] == {"BLOCK": 256}
    assert add32.variant["divisibility"] == ["x_ptr", "y_ptr", "out_ptr", "n"]
    assert add16.label == "fp16_u1" and add16.grid == (4, 1, 1)  # n = 1000 is not 16-divisible
    assert [grids.text(e) for e in add32.grid_formula] == ["ceil_div(n, BLOCK)", "1", "1"]
    assert rows.family["constexprs"] == {"BLOCK": 128} and rows.grid_formula is None  # heuristics applied; a tuple
    assert add32.kernel.endswith("ck.py:add_kernel")  # a module next to the script: referenced by file


def _trace(fn: Any, args: dict[str, Any], ints: set[str], consts: set[str]) -> list[str]:
    return [grids.text(e) for e in grids.trace(fn, args, ints, consts)]


def test_grid_formulas_are_traced_only_from_arguments_and_constexprs() -> None:
    import triton

    n = 1000
    args = {"x": torch.empty(4), "n": 1000, "m": 7, "BLOCK": 128}
    assert _trace(lambda meta: (triton.cdiv(n, meta["BLOCK"]),), args, {"n", "m"}, {"BLOCK"}) == [
        "ceil_div(n, BLOCK)", "1", "1"]
    assert _trace(lambda meta: ((meta["n"] + 255) // 256, meta["m"] * 2), args, {"n", "m"}, set()) == [
        "ceil_div(n, 256)", "mul(m, 2)", "1"]
    for bad, why in [(lambda meta: (min(meta["n"], 4),), "more than"), (lambda meta: (meta["x"].shape[0],), "reads x"),
                     (lambda meta: (n * 3,), "closes over n = 1000"), (lambda meta: (4, 1, 1, 1), "4 dimensions")]:
        with pytest.raises(grids.Untraceable, match=why):
            _trace(bad, args, {"m"} if "closes" in why else {"n", "m"}, {"BLOCK"})
    same = {"x": None, "n": 64, "k": 64, "BLOCK": 1}
    size = 64
    with pytest.raises(grids.Untraceable, match=r"several arguments \(k, n\)"):
        _trace(lambda meta: (size,), same, {"n", "k"}, set())
    assert _trace(lambda meta: (triton.cdiv(size, 16),), {**same, "size": 64}, {"n", "k", "size"}, set())[0] == \
        "ceil_div(size, 16)"  # the argument of the closed-over name


def _project(cap: Any, root: Path, **kw: Any) -> dict[str, Any]:
    cap.write_project(root, command="test", **kw)
    import tomllib

    return tomllib.loads((root / "kernelpack.toml").read_text())


def test_a_captured_project_builds_what_the_jit_would_have_launched(kernels: Any, tmp_path: Path,
                                                                     fresh_cache: Any) -> None:
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.core.launchspec import grid_text
    from kernelpack.project import build

    with kc.capture(device="h200") as cap:
        kernels.add(torch.randn(4096), torch.randn(4096))
        kernels.add(torch.randn(1000, dtype=torch.float16), torch.randn(1000, dtype=torch.float16))
        kernels.scale(torch.randn(512))
    toml = _project(cap, tmp_path / "proj")
    assert toml["library"] == {"name": "proj", "archs": ["sm_90a"]}
    add, scale = toml["triton"]
    assert add == {"name": "add_kernel", "kernel": "../ck.py:add_kernel", "example_args": "capture_args.py:add_kernel",
                   "grid": ["ceil_div(n, BLOCK)", "1", "1"]}
    assert scale["autotune"] == ["c0"] and scale["grid"] == ["ceil_div(n, BLOCK)", "1", "1"]
    report = build(tmp_path / "proj", jobs=1)
    arts = {a.label: a for a in Bundle.from_bytes(Path(report.outputs["bundle"]).read_bytes())}
    assert sorted(arts) == ["add_kernel[fp16_u1]", "add_kernel[fp32]", "scale_kernel[fp32_c0]"]
    assert [grid_text(g) if not isinstance(g, int) else g for g in arts["scale_kernel[fp32_c0]"].launch.grid] == [
        "ceil_div(n, 64)", 1, 1]  # the config's BLOCK put in
    assert arts["scale_kernel[fp32_c0]"].launch.block == (64, 1, 1)  # its num_warps = 2
    assert [p.divisibility for p in arts["add_kernel[fp16_u1]"].abi if p.role == "arg"] == [16, 16, 16, 1]


def test_capturing_again_merges_keeps_names_and_library_and_adds_nothing_twice(kernels: Any, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    with kc.capture(device="h200") as cap:
        kernels.add(torch.randn(4096), torch.randn(4096))
    _project(cap, root)
    text = (root / "kernelpack.toml").read_text().replace('name = "proj"', 'name = "mylib"')
    (root / "kernelpack.toml").write_text(text)  # the user renames the library
    with kc.capture(device="h200") as cap:
        kernels.add(torch.randn(4096), torch.randn(4096))  # the same again
        kernels.add(torch.randn(1000, dtype=torch.float16), torch.randn(1000, dtype=torch.float16))
        kernels.rows(torch.randn(8, 100))
    toml = _project(cap, root)
    state = json.loads((root / "capture.json").read_text())
    assert toml["library"]["name"] == "mylib" and len(state["runs"]) == 2
    fams = {f["name"]: [s["variant"] for s in f["specs"]] for f in state["families"]}
    assert fams == {"add_kernel": ["fp32", "fp16_u1"], "rows_kernel": ["fp32_u2"]}
    assert [s["launches"] for s in state["families"][0]["specs"]] == [2, 1]
    args = (root / "capture_args.py").read_text()
    assert args.count("'fp32':") == 1 and args.count("'fp16_u1':") == 1  # nothing twice
    with kc.capture(device="h200") as cap:
        kernels.add(torch.randn(4096)[1:], torch.randn(4095))  # unaligned: a new specialization, a new name
        kernels.rows(torch.randn(8, 1000))  # another BLOCK: a new family named after what differs
    _project(cap, root)
    state = json.loads((root / "capture.json").read_text())
    fams = {f["name"]: [s["variant"] for s in f["specs"]] for f in state["families"]}
    assert fams == {"add_kernel": ["fp32", "fp16_u1", "fp32_u2"], "rows_kernel": ["fp32_u2"],
                    "rows_kernel_BLOCK1024": ["fp32_u2"]}


@pytest.mark.parametrize(("configs", "built", "ran"), [("first", ["c0"], "c0"), ("all", ["c0", "c1", "c2"], "c0"),
                                                       ("c2", ["c2"], "c2")])
def test_autotune_configs_first_all_or_one_by_index(kernels: Any, tmp_path: Path, configs: str, built: list[str],
                                                    ran: str) -> None:
    with kc.capture(device="h200", configs=configs) as cap:
        kernels.scale(torch.randn(512))
    (la,) = cap.launches
    assert la.chosen == ran and list(la.configs) == built
    assert "BLOCK" not in la.call  # each config gives its own
    (entry,) = _project(cap, tmp_path / "p")["triton"]
    assert entry["autotune"] == built and "num_warps" not in entry
    with pytest.raises(KernelpackError, match="--configs chosen needs a GPU"):
        kc.capture(device="h200", configs="chosen")
    with pytest.raises(KernelpackError, match="expected first, all, c<N>"):
        kc.capture(device="h200", configs="best")


SCRIPT = """
import sys
import torch
import ck

ck.add(torch.randn(64, device="cuda"), torch.randn(64, device="cuda"))
ck.made_inside()
if "--fail" in sys.argv:
    raise ValueError("the model diverged")
"""


def test_bad_input_keeps_what_was_captured_and_lists_what_was_skipped(kernels: Any, tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(SCRIPT)
    cap = kc.capture(device="h200")
    assert not kc.run_script(cap, ["python", str(tmp_path / "script.py"), "--fail"])
    assert [la.name for la in cap.launches] == ["add_kernel"]
    lines = [s.line() for s in cap.skipped]
    assert any(re.search(r"triton kernel ck:local_kernel: no attribute of module ck holds it", x) for x in lines)
    assert any("raised ValueError: the model diverged (at script.py:9)" in x for x in lines), lines


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": f"{ROOT / 'src'}:{cwd}", "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "kernelpack.cli", "capture", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_cli_exits_non_zero_only_when_nothing_was_captured(tmp_path: Path) -> None:
    shutil.copy(HERE / "capture_kernels.py", tmp_path / "ck.py")
    (tmp_path / "script.py").write_text(SCRIPT)
    (tmp_path / "nothing.py").write_text("import torch\nraise RuntimeError('no GPU result')\n")
    p = _cli("-o", "proj", "--device", "h200", "--", "python", "script.py", "--fail", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "captured 1 launch(es)" in p.stdout and "skipped: script.py --fail: raised ValueError" in p.stdout
    assert (tmp_path / "proj" / "kernelpack.toml").exists() and "next: kernelpack build proj" in p.stdout
    p = _cli("-o", "none", "--device", "h200", "--", "python", "nothing.py", cwd=tmp_path)
    assert p.returncode == 1 and "nothing was captured" in p.stderr and "raised RuntimeError: no GPU result" in p.stdout
    assert not (tmp_path / "none").exists()
    p = _cli("--device", "h200", cwd=tmp_path)
    assert p.returncode == 2 and "give the command to run" in p.stderr


def test_the_device_table_in_the_docs_is_the_code_s() -> None:
    text = (ROOT / "docs" / "capture.md").read_text()
    rows = re.findall(r"^\| `([\w-]+)` \| ([^|]+) \| (\d+)\.(\d+) \| `(sm_\w+)` \| (\d+) \| (\d+) KiB \| (\d+) MiB \|",
                      text, re.M)
    got = {r[0]: (r[1].strip(), (int(r[2]), int(r[3])), r[4], int(r[5]), int(r[6]) * 1024, int(r[7]) << 20)
           for r in rows}
    want = {d.name: (d.title, d.capability, d.arch, d.sm_count, d.smem_optin, d.l2_bytes) for d in kc.DEVICES.values()}
    assert got == want


def test_a_cutile_launch_is_captured_with_cutiles_own_signature(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 fresh_cache: Any) -> None:
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.project import build

    (tmp_path / "tk.py").write_text(textwrap.dedent('''
        import cuda.tile as ct
        import torch

        @ct.kernel
        def vadd(a, b, c, TILE: ct.Constant[int]):
            bid = ct.bid(0)
            ta = ct.load(a, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
            tb = ct.load(b, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
            ct.store(c, index=(bid,), tile=ta + tb)

        def vadd_op(a, b):
            c = torch.empty_like(a)
            ct.launch(torch.cuda.current_stream(), ((a.numel() + 127) // 128, 1, 1), vadd, (a, b, c, 128))
            return c
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    tk = importlib.import_module("tk")  # written into tmp_path above

    with kc.capture(device="h200") as cap:
        tk.vadd_op(torch.randn(1024), torch.randn(1024))
        tk.vadd_op(torch.randn(1024, dtype=torch.float16), torch.randn(1024, dtype=torch.float16))
    assert [(la.dsl, la.label, la.grid) for la in cap.launches] == [("cutile", "f32", (8, 1, 1)),
                                                                     ("cutile", "f16", (8, 1, 1))]
    (entry,) = _project(cap, tmp_path / "proj")["cutile"]
    assert entry == {"name": "vadd", "kernel": "../tk.py:vadd", "example_args": "capture_args.py:vadd"}
    report = build(tmp_path / "proj", jobs=1)
    assert sorted(a.label for a in Bundle.from_bytes(Path(report.outputs["bundle"]).read_bytes())) == [
        "vadd[f16]", "vadd[f32]"]


def test_cutile_kernels_made_in_a_function_are_compiled_while_they_live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        fresh_cache: Any) -> None:
    """A cuTile kernel no module attribute holds -- made by a factory closing over a value, or a module kernel given
    other hints (``replace_hints``) -- cannot be named by a project file: each way of making it is a family of its own
    (named after what differs), compiled by the capture while the object lives and linked (``[[cutile]] prebuilt``);
    a kernel made the same way twice is one family."""
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.project import build

    (tmp_path / "tf.py").write_text(textwrap.dedent('''
        import cuda.tile as ct
        import torch

        def make_scale(factor):
            @ct.kernel
            def scale(a, c, TILE: ct.Constant[int]):
                bid = ct.bid(0)
                ta = ct.load(a, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
                ct.store(c, index=(bid,), tile=ta * factor)
            return scale

        @ct.kernel
        def copy(a, c, TILE: ct.Constant[int]):
            bid = ct.bid(0)
            ct.store(c, index=(bid,), tile=ct.load(a, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO))

        def op(a, factor):
            c = torch.empty_like(a)
            ct.launch(torch.cuda.current_stream(), ((a.numel() + 127) // 128, 1, 1), make_scale(factor), (a, c, 128))
            ct.launch(torch.cuda.current_stream(), ((a.numel() + 127) // 128, 1, 1),
                      copy.replace_hints(occupancy=2), (c, a, 128))
            return c
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    tf = importlib.import_module("tf")  # written into tmp_path above

    with kc.capture(device="h200") as cap:
        tf.op(torch.randn(1024), 2.0)
        tf.op(torch.randn(1024), 3.0)
        tf.op(torch.randn(1024), 3.0)
    assert not cap.skipped
    entries = _project(cap, tmp_path / "proj")["cutile"]
    assert sorted(e["name"] for e in entries) == ["copy", "scale_factor20", "scale_factor30"]
    assert all(set(e) == {"name", "prebuilt"} and e["prebuilt"] == f"cutile/{e['name']}.kpack" for e in entries)
    assert len(entries) == 3  # scale made with 2.0, with 3.0 (twice: one family), copy with other hints
    report = build(tmp_path / "proj", jobs=1)
    assert not report.failed
    labels = sorted(a.name for a in Bundle.from_bytes(Path(report.outputs["bundle"]).read_bytes()))
    assert labels == sorted(e["name"] for e in entries)


def test_one_capture_and_one_build_keep_going_past_a_kernel_the_dsl_cannot_compile(kernels: Any, tmp_path: Path,
                                                                                   fresh_cache: Any) -> None:
    """A kernel Triton itself refuses to compile (captured fine: nothing compiles during capture) fails its step;
    ``kernelpack build -k`` links the rest, names the failure and exits 1; without -k the build fails whole."""
    import kernelpack
    import kernelpack.cli as cli

    with kc.capture(device="h200") as cap:
        kernels.add(torch.randn(256), torch.randn(256))
        kernels.dtype_call(torch.randn(64))
    cap.write_project(tmp_path / "proj")
    assert cli.main(["build", "-q", "-j", "1", str(tmp_path / "proj")]) == 1
    assert cli.main(["build", "-q", "-j", "1", "-k", str(tmp_path / "proj")]) == 1
    lib = kernelpack.load(str(tmp_path / "proj" / "build" / "proj.kpack"))
    assert set(lib.families) == {"add_kernel"}


def test_a_cute_compile_call_is_compiled_while_it_lives_and_the_project_links_it(tmp_path: Path,
                                                                                fresh_cache: Any) -> None:
    """A wrapper compiles a CuTe launcher (made in its own code, which no project file can name) and calls what
    ``cute.compile`` returned: GPU-less, the call launches nothing, the launcher is compiled by kernelpack while its
    objects live, and the project links it (``[[cute]] prebuilt``) -- built with no CuTe code run again."""
    from cute_support import need_cute

    need_cute()
    import cuda.bindings.driver as cuda
    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack

    import cute_launch_forms as forms
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.project import build

    def wrapper(x: Any, y: Any) -> Any:
        args = (from_dlpack(x), from_dlpack(y), x.numel(), cuda.CUstream(0))  # a stream, as liger's give
        compiled = cute.compile(forms.keyword_stream, *args)
        compiled(*args)
        return y

    with kc.capture(device="h200") as cap:
        out = wrapper(torch.randn(256), torch.empty(256))
    assert out.shape == (256,)
    (la,) = [la for la in cap.launches if la.dsl == "cute"]
    assert la.payload["call"] is not None  # the call the wrapper made is kept
    cap.write_project(tmp_path / "proj")
    text = (tmp_path / "proj" / "kernelpack.toml").read_text()
    (name,) = re.findall(r'\[\[cute\]\]\nname = "([^"]+)"\nprebuilt = "cute/[^"]+\.kpack"', text)
    report = build(tmp_path / "proj", jobs=1)
    assert not report.failed
    (art,) = Bundle.from_bytes(Path(report.outputs["bundle"]).read_bytes())
    assert art.name == name and [str(a) for a in art.archs] == ["sm_90a"]
    assert art.abi.describe() == "tensor_f32_256_1 x, tensor_f32_256_1 y, int32_t n"  # the static shape it baked


def test_kernelpack_capture_records_the_bracketed_cute_compile_at_the_callers_line() -> None:
    """``cute.compile[opts](fn, ...)`` under ``kernelpack.capture``: one launch with those options, its site the
    package's own line (not kernelpack's hook)."""
    from cute_support import need_cute

    need_cute()
    import cute_gap_kernels as g

    with kc.capture(device="h200") as cap:
        g.package_interface_bracketed(5)
        g.package_interface(6)
    first, second = [la for la in cap.launches if la.dsl == "cute"]
    assert first.options["options"] == second.options["options"] == "--enable-tvm-ffi"
    assert first.options["site"].startswith("cute_gap_kernels.py:") and first.options["site"] != second.options["site"]


@pytest.mark.parametrize("device,arch", [("h200", "sm_90a"), ("b200", "sm_100a")])
def test_the_cute_dsls_own_arch_is_the_devices_during_a_gpu_less_capture(device: str, arch: str) -> None:
    """Wrapper code that asks the CuTe DSL which arch it targets (FA4's kernel classes assert ``self.arch`` in their
    constructors) hears the captured device's, not this machine's default, and only inside the capture."""
    from cute_support import need_cute

    need_cute()
    from cutlass.base_dsl.dsl import BaseDSL

    def dsl_arch() -> str:
        return str(BaseDSL._get_dsl().get_arch_enum())

    outside = dsl_arch()
    with kc.capture(device=device):
        assert dsl_arch().lower().endswith(arch.removeprefix("sm_"))
    assert dsl_arch() == outside


class Attention:
    """A CuTe launcher object as FA4's are: what its constructor was given is baked into what it compiles."""

    def __init__(self, is_causal: bool) -> None:
        self.is_causal, self.tile = is_causal, (128, 64)

    def __call__(self, x: Any) -> None:  # never traced: GPU-less, cute.compile only records
        raise AssertionError("not compiled during capture")


def test_cute_launcher_objects_built_differently_are_families_of_their_own() -> None:
    """A CuTe launcher object bakes what its constructor was given (FA4's ``is_causal``) though its ``repr`` does not
    say it: objects of one class built differently are two families (named after what differs), built alike one."""
    from cute_support import need_cute

    need_cute()
    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack

    from kernelpack.capture.families import merge
    from kernelpack.capture.project import PREFIX

    with kc.capture(device="h200") as cap:
        for causal in (False, True, True):
            cute.compile(Attention(causal), from_dlpack(torch.randn(64)))
    fams = merge([], cap.launches, prefix=PREFIX)
    assert sorted(f.name for f in fams) == ["cute_Attention_is_causalF", "cute_Attention_is_causalT"]
    assert [f.launches for f in sorted(fams, key=lambda f: f.name)] == [1, 2]


def test_family_names_say_the_least_that_tells_them_apart() -> None:
    """A family is named after the fewest differences that tell it from its siblings (a type by its last dotted
    part), not after every field that differs: FA4's launchers differ in many attributes at once."""
    from kernelpack.capture.families import _differences

    def attn(causal: bool, tile: int, dtype: str) -> dict[str, Any]:
        return {"object": {"class": "m.Attn", "is_causal": causal, "tile_m": tile, "dtype": f"cutlass.typing.{dtype}"}}

    a, b, c = attn(True, 128, "BFloat16"), attn(False, 128, "BFloat16"), attn(True, 64, "Float16")
    assert _differences(a, [b, c]) == ["dtypeBFloat16", "is_causalT"]
    assert _differences(b, [a, c]) == ["is_causalF"]


@pytest.mark.parametrize("given", ["1st kernel", "class", "naïve-k", 'a\nb"c]', "__", "None", "k.0 = 1 #"])
def test_a_hostile_kernel_name_gives_a_valid_inert_project(given: str) -> None:
    """A kernel's name is data: the family named after it is a plain identifier (no keyword, no leading digit, ASCII),
    the example-arguments module defining a function of that name compiles, and kernelpack.toml reads back."""
    import keyword

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    from kernelpack.capture.families import Family, Spec
    from kernelpack.capture.project import args_module, toml
    from kernelpack.capture.records import short_name

    name = short_name(given)
    assert name.isidentifier() and name.isascii() and not keyword.iskeyword(name), name
    fam = Family("triton", name, f"k.py:{name}", {}, {}, specs=[Spec(given, {}, "(1, 2)", [])])
    compile(args_module([fam]), "capture_args.py", "exec")
    doc = tomllib.loads(toml([fam], {"name": "lib", "archs": ["sm_90a"]}, []))
    assert doc["triton"][0]["name"] == name
