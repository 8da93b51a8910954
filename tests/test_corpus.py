"""The conformance corpus (corpus/, scripts/corpus.py): a reduced liger-kernel corpus built end to end, and the GPU
run's logic (manifest, family matching, the C++ driver, the comparison) without a GPU.

The reduced corpus needs liger-kernel 0.8.5 and the DSLs importable (CI installs only kernelpack's [dev] extras:
there these tests skip, saying which import is missing). Run locally with the packages on PYTHONPATH:

    PYTHONPATH=src:/path/to/site python -m pytest tests/test_corpus.py
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from corpus.gpu_check import (  # noqa: E402 - the corpus package lives at the repository root
    Entry,
    Param,
    Row,
    compare,
    driver_command,
    driver_source,
    launch_precision,
    match_family,
    pack_slots,
    parse_prototypes,
    read_manifest,
    render,
    supported,
)


def _missing(*mods: str) -> str:
    for m in mods:
        try:
            if importlib.util.find_spec(m) is None:
                return m
        except (ImportError, ValueError):
            return m
    return ""


DSL_MODULES = {"triton": ("triton",), "cutile": ("cuda.tile",), "cute": ("cutlass.cute",)}


def _available_dsls() -> tuple[str, ...]:
    return tuple(d for d, mods in DSL_MODULES.items() if not _missing(*mods))


@pytest.fixture(scope="module")
def reduced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    """The reduced liger corpus (cases marked ``reduced``) for every DSL importable here, built once."""
    miss = _missing("liger_kernel", "torch")
    if miss:
        pytest.skip(f"the corpus needs liger-kernel 0.8.5 and torch importable ({miss} is not; CI installs only "
                    f"kernelpack's [dev] extras)")
    dsls = _available_dsls()
    if not dsls:
        pytest.skip("no DSL importable (triton, cuda.tile, cutlass.cute)")
    from corpus.results import read_results

    out = tmp_path_factory.mktemp("corpus")
    # in a process of its own: cuTile's signature derivation may load a stand-in libcuda.so.1
    # (kernelpack.frontends.cutile.signature), which must not be the libcuda later tests of this process find
    cmd = [sys.executable, str(ROOT / "scripts" / "corpus.py"), "--reduced", "--package", "liger", "-q", "-j", "2",
           "--out", str(out), *(x for d in dsls for x in ("--dsl", d))]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    _, sections = read_results(out / "results.json")
    return out, sections


def test_reduced_corpus_compiles_and_links_every_kernel_it_reaches(reduced: tuple[Path, list[Any]]) -> None:
    out, sections = reduced
    assert sections
    for s in sections:
        assert s.reached, f"{s.package}/{s.dsl}: the reduced cases reached no kernel"
        assert s.linked == s.compiled == s.reached, (s.dsl, [f.line() for f in s.failures])
        assert not s.failures, [f.line() for f in s.failures]
    manifest = json.loads((out / "manifest.json").read_text())
    assert (out / manifest["libraries"]["liger"]["shared"]).exists()


def test_reduced_library_loads_with_every_family(reduced: tuple[Path, list[Any]]) -> None:
    import kernelpack

    out, _ = reduced
    libs, entries = read_manifest(out / "manifest.json")
    mod = kernelpack.load(str(out / libs["liger"]["shared"]))
    assert {e.family for e in entries} <= set(mod.families) | set(mod.host_programs)
    assert {e.dsl for e in entries} == set(_available_dsls())  # one library mixing every DSL present


def test_cutile_manifest_entries_record_the_launch_the_gpu_run_rebuilds(reduced: tuple[Path, list[Any]]) -> None:
    if "cutile" not in _available_dsls():
        pytest.skip("cuda.tile is not importable")
    import kernelpack

    out, _ = reduced
    libs, entries = read_manifest(out / "manifest.json")
    mod = kernelpack.load(str(out / libs["liger"]["shared"]))
    cutile = [e for e in entries if e.dsl == "cutile"]
    assert cutile
    for e in cutile:
        assert len(e.launch["grid"]) == 3
        assert len(e.launch["args"]) == len(mod.families[e.family].arg_names), e.family


def test_cute_manifest_entries_record_each_kernels_arguments_and_grid_or_why_not(
        reduced: tuple[Path, list[Any]]) -> None:
    """Kernel-level CuTe families: one record per caller-visible ABI parameter and a grid, or the reason the GPU
    run cannot rebuild them (a view the launcher derives in DSL code); host programs: one record per argument."""
    if "cute" not in _available_dsls():
        pytest.skip("cutlass.cute is not importable")
    import kernelpack

    out, _ = reduced
    libs, entries = read_manifest(out / "manifest.json")
    mod = kernelpack.load(str(out / libs["liger"]["shared"]))
    cute = [e for e in entries if e.dsl == "cute"]
    assert cute
    launched = 0
    for e in cute:
        assert "error" not in e.launch, (e.family, e.launch)
        if e.host_program:
            assert "args" in e.launch["program"] or "error" in e.launch["program"], e.family
            continue
        for name, k in e.launch["kernels"].items():
            if "error" in k:
                assert "launcher" in k["error"], (name, k["error"])
                continue
            launched += 1
            assert k["names"] == list(mod.families[name].arg_names), name
            assert len(k["args"]) == len(k["names"]) and len(k["grid"]) == 3 and min(k["grid"]) >= 1, name
    # on an H200 liger's RMSNorm takes its fused path: a host program, called with the rows as they were
    rms = [e for e in cute if e.family.startswith("cute_RMSNorm")]
    assert rms and all(e.host_program and e.launch["program"]["args"][0]["name"] == "mX" for e in rms)
    assert all(e.launch["program"]["args"][0]["shape"][0] == 2112 for e in rms)
    assert launched or any(e.host_program and "args" in e.launch["program"] for e in cute)


def test_cpp_driver_compiles_under_werror_against_the_library(reduced: tuple[Path, list[Any]],
                                                              tmp_path: Path) -> None:
    out, _ = reduced
    libs, entries = read_manifest(out / "manifest.json")
    lib_dir = out / "liger" / "lib"
    protos = parse_prototypes((lib_dir / "include" / "liger.h").read_text(), "liger")
    fams = {e.family for e in entries if e.dsl != "cute"}
    assert fams <= set(protos)
    callable_ = [f for f in fams if not supported(protos[f])]
    assert callable_, "the driver can call no family"
    src = tmp_path / "driver.cpp"
    src.write_text(driver_source("liger", protos))
    so = tmp_path / "libdriver.so"
    p = subprocess.run(driver_command(src, lib_dir, "liger", so), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    nm = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True).stdout
    assert all(f"corpus_{f}" in nm for f in callable_)


# ------------------------------------------------------------------------------------- GPU-run logic, no package

HEADER = """
LIGER_API kp_status liger_axpy(const kp_launch* kp_cfg, void* x, kp_dtype x_dtype, int32_t n, float alpha);
LIGER_API kp_status liger_axpy_fp32(const kp_launch* kp_cfg, float* x, int32_t n, float alpha);
LIGER_API kp_status liger_cute_thing(const kp_launch* kp_cfg, const liger_tensor_f32_d_1* t);
LIGER_API kp_status other_axpy(const kp_launch* kp_cfg, void* x);
"""


def test_prototypes_are_read_per_library_and_struct_parameters_are_not_callable() -> None:
    protos = parse_prototypes(HEADER, "liger")
    assert set(protos) == {"axpy", "axpy_fp32", "cute_thing"}
    assert [(p.ctype, p.name) for p in protos["axpy"]] == [("void*", "x"), ("kp_dtype", "x_dtype"),
                                                          ("int32_t", "n"), ("float", "alpha")]
    assert supported(protos["axpy"]) == ""
    assert "liger_tensor_f32_d_1" in supported(protos["cute_thing"])
    assert supported([Param("const kp_tensor*", "desc")]) == ""
    assert "corpus_cute_thing" not in driver_source("liger", protos)


def test_slots_pack_pointers_dtypes_ints_and_floats_by_c_parameter_name() -> None:
    torch = pytest.importorskip("torch")
    x = torch.zeros(4, dtype=torch.bfloat16)
    params = [Param("void*", "x"), Param("kp_dtype", "x_dtype"), Param("int32_t", "n"), Param("float", "alpha"),
              Param("int64_t", "off")]
    slots = pack_slots(params, {"x": x, "n": 4, "alpha": 1.0, "off": -1})
    assert slots == [x.data_ptr(), 10, 4, 0x3F800000, 0xFFFFFFFFFFFFFFFF]
    keep: list[Any] = []
    (desc_slot,) = pack_slots([Param("const kp_tensor*", "desc")], {"desc": x.view(2, 2)}, keep)
    (desc,) = keep
    assert desc_slot == ctypes.addressof(desc)
    assert (desc.data, desc.dtype, desc.rank, list(desc.shape)[:3], list(desc.stride)[:3]) == (
        x.data_ptr(), 10, 2, [2, 2, 0], [2, 1, 0])
    with pytest.raises(KeyError, match="alpha"):
        pack_slots(params, {"x": x, "n": 4, "off": 0})
    # a kernel argument the header renamed (E + capital: errno's reserved names) is found under its C name
    assert pack_slots([Param("float*", "u_EXP_ptr_"), Param("int32_t", "default_")],
                      {"EXP_ptr": x, "default": 3}) == [x.data_ptr(), 3]


def _entry(family: str, consts: dict[str, Any], opts: dict[str, Any], args: list[str]) -> Entry:
    return Entry("triton", "m:k", family, "", {"args": args, "constexprs": consts, "options": opts}, ("c[p]",))


def test_a_launch_matches_the_family_of_its_constexprs_and_options() -> None:
    small = _entry("k_BLOCK1024_w4", {"BLOCK": 1024, "stride": 1}, {"num_warps": 4}, ["x", "n"])
    big = _entry("k_BLOCK4096_w8", {"BLOCK": 4096, "stride": 1}, {"num_warps": 8}, ["x", "n"])
    bound = {"x": object(), "n": 7, "BLOCK": 4096, "stride": 1}
    assert match_family([small, big], "m:k", bound, {"num_warps": 8}) is big
    assert match_family([small, big], "m:k", {**bound, "stride": 3}, {"num_warps": 8}) is None  # 1 was specialized
    assert match_family([small, big], "m:k", bound, {"num_warps": 4}) is None
    assert match_family([small, big], "m:other", bound, {"num_warps": 8}) is None


def test_compare_names_elements_kernelpack_never_wrote() -> None:
    torch = pytest.importorskip("torch")
    ref = torch.arange(8, dtype=torch.float32)
    got = ref.clone()
    assert compare("y", ref, got) == ""
    got[3] = float("nan")
    assert "1 never written" in compare("y", ref, got)
    both = ref.clone()
    both[2] = float("nan")
    assert compare("y", both, both.clone()) == ""  # neither wrote it: not an output element
    assert "differ" in compare("i", torch.arange(4), torch.tensor([0, 1, 2, 4]))


def test_compare_uses_the_launchs_lowest_precision_and_exact_for_cpp_vs_python() -> None:
    torch = pytest.importorskip("torch")
    x = torch.zeros(4, dtype=torch.bfloat16)
    rstd = torch.tensor([1.0, 0.5, 0.25, 2.0])
    assert launch_precision([x, rstd, torch.arange(3)]) == "bfloat16"
    assert launch_precision([rstd]) == "float32" and launch_precision([torch.arange(3)]) is None
    off = rstd.clone()
    off[0] += 0.0074  # one bf16 ulp at 1.0: what another Triton's codegen gives a bf16-input kernel's fp32 output
    assert "differ" in compare("RSTD", rstd, off)  # at the tensor's own fp32 precision: a mismatch
    assert compare("RSTD", rstd, off, "bfloat16") == ""
    assert "bits" in compare("RSTD", rstd, off, exact=True)
    big = torch.tensor([64.0, 0.5])  # cancellation: the small element is off by a unit of the large terms
    assert compare("Y", big, torch.tensor([64.0, 0.625]), "bfloat16") == ""
    assert "differ" in compare("Y", big, torch.tensor([64.0, 2.5]), "bfloat16")  # a real error is still caught
    unwritten = torch.tensor([64.0, float("nan")])
    assert "never written" in compare("Y", big, unwritten, "bfloat16")
    both = torch.tensor([float("nan"), 1.0])
    assert compare("Y", both, both.clone(), exact=True) == ""


def test_restoring_a_launchs_state_leaves_autograd_able_to_run_backward() -> None:
    """liger's autograd Functions launch on views made in forward (no-grad mode) of inputs that require grad; the
    harness writes their state back between launches. A plain in-place copy (even under no_grad) makes backward
    fail; restore_tensors must not."""
    torch = pytest.importorskip("torch")
    from corpus.gpu_run import restore_tensors

    def op(write: Any) -> Any:
        class Scale(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any, w: Any) -> Any:
                xv = x.view(-1, x.shape[-1])
                y = xv * w
                write(xv, xv.clone())  # what the harness does around each launch
                ctx.save_for_backward(xv, w)
                return y.view(x.shape)

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                xv, w = ctx.saved_tensors
                g2 = g.view(-1, g.shape[-1])
                return (g2 * w).view(g.shape), (g2 * xv).sum(0)
        return Scale

    def plain(v: Any, s: Any) -> None:
        with torch.no_grad():
            v.copy_(s)

    x = torch.randn(2, 3, 4, requires_grad=True)
    w = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="view was created in no_grad mode"):  # the GPU run's failure, on CPU
        op(plain).apply(x, w).sum().backward()
    x.grad = w.grad = None
    op(lambda v, s: restore_tensors([v], [s])).apply(x, w).sum().backward()
    assert torch.equal(w.grad, x.detach().view(-1, 4).sum(0)) and torch.equal(x.grad, w.detach().expand(2, 3, 4))


def test_bind_keeps_a_kernel_parameter_named_like_a_launch_option() -> None:
    """liger's sparsemax kernels declare ``num_warps: tl.constexpr`` and are launched with ``num_warps=``: the
    value is the parameter (the family's constexpr) and the launch option, so the family matches."""
    from corpus.gpu_run import bind

    def kernel(x_ptr: Any, n_cols: Any, BLOCK_SIZE: Any, num_warps: Any) -> None: ...

    import types

    bound, opts = bind(types.SimpleNamespace(fn=kernel), ("x", 7), {"BLOCK_SIZE": 1024, "num_warps": 4})
    assert bound == {"x_ptr": "x", "n_cols": 7, "BLOCK_SIZE": 1024, "num_warps": 4} and opts == {"num_warps": 4}
    entry = _entry("sparsemax", {"BLOCK_SIZE": 1024, "num_warps": 4}, {"num_warps": 4}, ["x_ptr", "n_cols"])
    assert match_family([entry], "m:k", bound, opts) is entry


def test_device_derived_constexprs_take_the_h200_value_with_no_case_saying_so() -> None:
    """liger's norm backward kernels get rows_per_program = ceil(n_rows / sm_count) as a constexpr, computed only
    when the tensors are on a CUDA device: under kernelpack capture's GPU-less world they are, and the SM count is
    the H200's (132: 2112 rows -> 16 per program), with nothing in the case about it."""
    miss = _missing("liger_kernel", "torch", "triton")
    if miss:
        pytest.skip(f"needs liger-kernel, torch and triton importable ({miss} is not)")
    from corpus.cases import CORPUS, load_cases, run_case

    import kernelpack.capture as kc

    _, cases = load_cases(CORPUS / "liger_triton.toml")
    case = next(c for c in cases if c.id == "layer_norm")
    point = {"BT": 2112, "H": 1024, "DT": "float32"}
    with kc.capture(device="h200") as cap:
        run_case(case, point)
    bwd = [la for la in cap.launches if "rows_per_program" in la.family.get("constexprs", {})]
    assert bwd and all(la.family["constexprs"]["rows_per_program"] == 16 for la in bwd)
    assert all(la.grid == (132, 1, 1) for la in bwd)


def test_report_counts_passes_and_ratios_within_three_percent() -> None:
    rows = [Row("triton", "a", "c[p]", "pass", "pass", 10.0, 10.2), Row("triton", "b", "c[p]", "pass", "FAIL: x"),
            Row("cutile", "c", "c[p]", "ran (no reference)", "pass (== Python)", None, 3.0),
            Row("cute", "d", "", "n/a: not launched", "n/a")]
    text = render(rows)
    assert "| triton | `a` | c[p] | pass | pass | 10.00 | 10.20 | 1.020 | - | - |" in text
    assert text.splitlines()[-1].startswith("2/3 launches pass (Python and C++), 1 families not launched")
    assert "1/1 within 3%" in text


def test_manifest_reading_keeps_compiled_specs_only(tmp_path: Path) -> None:
    spec = {"dsl": "triton", "kernel": "m:k", "family": "k", "variant": "bf16", "sources": ["c[p]"],
            "key": json.dumps({"k": "m:k", "f": {"constexprs": {"B": 1}}, "v": {}}), "compiled": True}
    (tmp_path / "manifest.json").write_text(json.dumps({"libraries": {"liger": {"name": "liger"}},
                                                        "specs": [spec, {**spec, "compiled": False}]}))
    libs, entries = read_manifest(tmp_path / "manifest.json")
    assert libs == {"liger": {"name": "liger"}}
    assert [(e.family, e.variant, dict(e.family_key)) for e in entries] == [("k", "bf16", {"constexprs": {"B": 1}})]


@pytest.mark.gpu
def test_gpu_run_over_prepared_corpus(tmp_path: Path) -> None:
    """On the GPU machine after ``scripts/corpus.py --gpu-prepare``: the rms_norm case through the whole GPU run."""
    from gpu import gpu_count

    if gpu_count() == 0:
        pytest.skip("no CUDA GPU/driver")
    if not (ROOT / ".gpu" / "corpus" / "manifest.json").exists():
        pytest.skip(".gpu/corpus/ not prepared (python scripts/corpus.py --package liger --gpu-prepare)")
    out = tmp_path / "report.md"
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "corpus_gpu.py"), "--case", "rms_norm", "--reps", "3",
                        "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    lines = out.read_text().splitlines()
    assert "FAIL" not in "\n".join(lines), "\n".join(lines)


def test_report_block_per_package_leaves_other_packages_results(tmp_path: Path) -> None:
    from corpus import report
    from corpus.results import Section

    doc = tmp_path / "corpus.md"
    doc.write_text("# Conformance corpus\n\nprose\n")
    liger, fi = Section("liger-kernel", "triton", defined=["a"]), Section("flashinfer-python", "cuda", defined=["b"])
    liger.compiled = liger.linked = {"a"}
    report.write(doc, {"command": "one"}, [liger])
    report.write(doc, {"command": "two"}, [fi])
    report.write(doc, {"command": "three"}, [liger, fi])
    text = doc.read_text()
    assert text.startswith("# Conformance corpus\n\nprose\n")
    assert text.count("corpus:results:begin liger-kernel") == 1 and "Run: `three`" in text and "Run: `one`" not in text
    assert text.count("corpus:results:begin flashinfer-python") == 1 and "Run: `two`" not in text
    assert "| liger-kernel | triton | 1 | 0/1 (0%) | 1/1 (100%) | 1/1 (100%) |" in text


def _flashinfer_cases_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The FlashInfer GPU cases (corpus/flashinfer_cases.py, corpus/flashinfer_sampling.py) with their "cuda" tensors
    made on the CPU (their references run here)."""
    torch = pytest.importorskip("torch")
    for fn in ("randn", "full", "zeros", "tensor", "arange", "randint", "randperm", "ones"):
        orig = getattr(torch, fn)

        def on_cpu(*a: Any, _orig: Any = orig, **k: Any) -> Any:
            if k.get("device") == "cuda":
                k["device"] = "cpu"
            return _orig(*a, **k)
        monkeypatch.setattr(torch, fn, on_cpu)


def test_flashinfer_online_softmax_map_reference_uses_the_kernels_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """OnlineSoftmaxMapKernel's slice y is [y * stride, (y + 1) * stride) with stride = round_up(ceil_div(d,
    num_slices), 4) (8000 for d = 32000, 4 slices), not DEFAULT_SLICE_SIZE (8192): the GPU run's "WRONG max"."""

    from corpus import flashinfer_sampling as gpu

    _flashinfer_cases_on_cpu(monkeypatch)
    case = gpu.case_online_softmax_map("1024_4_float")
    logits, partial, _, temp, d, n = case.args

    def kernel(stride: int) -> None:  # what the kernel writes (float32, as it computes)
        x = logits.float() * (1.0 / temp)
        for y in range(n):
            s = x[:, y * stride:min((y + 1) * stride, d)]
            m = s.max(-1).values
            partial[:, y, 0], partial[:, y, 1] = m, (s - m[:, None]).exp().sum(-1)

    assert gpu.online_softmax_slice_stride(32000, 4, 4) == 8000
    kernel(8000)
    assert case.check() == ""
    kernel(8192)
    assert "max" in case.check()


def test_flashinfer_layernorm_case_launches_as_norm_cuh_layernorm_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """generalLayerNorm<__nv_bfloat162, ...> walks hidden_dim / 2 packed pairs per row: LayerNorm passes the scalar
    hidden size (the case passed half of it, and half the output was never written), block min(H, 1024)."""
    import torch
    from corpus import flashinfer_cases as gpu

    _flashinfer_cases_on_cpu(monkeypatch)
    case = gpu.case_layernorm("nv_bfloat162_float2_int8_t_true_false")
    x, g, b, out, eps, tokens, hidden = case.args[:7]
    assert (tokens, hidden, case.grid, case.block, case.smem) == (gpu.M_ROWS, gpu.H, (gpu.M_ROWS, 1, 1),
                                                                   (1024, 1, 1), gpu.H * 2)
    flat_in, flat_out = x.view(-1).float(), out.view(-1)
    for row in range(tokens):  # the kernel: row bidx reads and writes elements [bidx * hidden, (bidx + 1) * hidden)
        seg = flat_in[row * hidden:(row + 1) * hidden]
        normed = (seg - seg.mean()) * torch.rsqrt(seg.var(unbiased=False) + eps) * g[:hidden] + b[:hidden]
        flat_out[row * hidden:(row + 1) * hidden] = normed.to(out.dtype)
    assert case.check() == ""
