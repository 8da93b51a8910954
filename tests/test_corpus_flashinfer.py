"""FlashInfer's corpus, reduced: a few of its CUDA C++ header kernels (nvcc, the wheel's own headers and cccl) and
CuTe DSL kernels (host programs) compiled without a GPU, linked into one library ``flashinfer``, its C and C++
headers compiled under -Werror, and what the GPU run is given (``.gpu/corpus-fi/``).

Needs flashinfer-python 0.7.2.post1 importable (``pip install --no-deps --target DIR flashinfer-python==0.7.2.post1``
and DIR on PYTHONPATH), nvcc, curand headers (toolkit or pip nvidia-curand) and the CuTe DSL; skipped otherwise.
The whole corpus is ``python scripts/corpus.py --package flashinfer`` (docs/corpus-flashinfer.md).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolchain_support import needs_nvcc

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

pytestmark = [
    pytest.mark.slow,
    needs_nvcc,
    pytest.mark.skipif(importlib.util.find_spec("flashinfer") is None,
                       reason="flashinfer-python is not importable (pip install --no-deps --target DIR "
                              "flashinfer-python==0.7.2.post1; put DIR on PYTHONPATH)"),
]

CUDA_CASES = ("rmsnorm", "silu_and_mul", "top_k_sampling_from_prob")  # norm.cuh, activation.cuh, sampling.cuh (cub)
CUTE_CASES = ("cute_rmsnorm", "cute_gemm_bf16_direct")
ARCHS = ("sm_80", "sm_90a")


def _has_cute() -> bool:
    return importlib.util.find_spec("cutlass") is not None


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    from corpus.pipeline import Options
    from corpus.run import run

    out = tmp_path_factory.mktemp("corpus-fi")
    dsls = ("cuda", "cute") if _has_cute() else ("cuda",)
    opts = Options(archs=ARCHS, jobs=1, cases=CUDA_CASES + CUTE_CASES, progress=lambda s: None)
    _, sections = run(["flashinfer"], dsls, opts, out)
    return out, {s.dsl: s for s in sections}


def test_every_global_template_of_the_four_headers_is_in_the_instantiation_set() -> None:
    from corpus import flashinfer

    root = flashinfer.package_root()
    assert root is not None
    _, kernels = flashinfer.load_cuda()
    chosen = {f"{k.header}:{k.template.split('::')[-1]}" for k in kernels}
    templates = flashinfer.defined_kernels(root)
    assert len(templates) == 26 and set(templates) <= chosen
    assert {k.prelude for k in kernels if k.prelude} == {"silu", "gelu", "gelu_tanh"}


def test_header_kernels_compile_for_both_archs_and_link(corpus_run: tuple[Path, dict[str, object]]) -> None:
    out, secs = corpus_run
    cuda = secs["cuda"]
    want = {f"{h}:{k}" for h, k in (("norm.cuh", "rmsnorm"), ("activation.cuh", "silu_and_mul"),
                                    ("sampling.cuh", "top_k_sampling_from_prob"))}
    assert cuda.failures == [] and cuda.compiled == want and cuda.linked == want  # type: ignore[attr-defined]
    assert len(cuda.defined) == 28  # type: ignore[attr-defined]


def test_the_library_has_typed_entries_with_the_headers_parameter_names(
        corpus_run: tuple[Path, dict[str, object]]) -> None:
    import kernelpack

    out, _ = corpus_run
    lib = kernelpack.load(str(out / "flashinfer" / "lib" / "lib" / "libflashinfer.so"))
    assert {"rmsnorm", "silu_and_mul", "top_k_sampling_from_prob"} <= set(lib.families)
    header = (out / "flashinfer" / "lib" / "include" / "flashinfer.h").read_text()
    # half and nv_bfloat16 variants of one family; names from norm.cuh, not p0, p1...
    assert "flashinfer_rmsnorm_8_half(const kp_launch* kp_cfg, kp_f16* input, kp_f16* weight, kp_f16* output, " \
           "uint32_t d, uint32_t stride_input, uint32_t stride_output, float weight_bias, float eps)" in header
    assert "kp_bf16* out, const kp_bf16* input, int32_t d" in header  # act_and_mul_kernel<nv_bfloat16, silu, 8>
    # the launch FlashInfer's sampling launcher uses: 1024 threads and sizeof(SamplingTempStorage) shared memory
    manifest = json.loads((out / "manifest.json").read_text())
    topk = next(m for m in manifest["specs"] if m["kernel"] == "sampling.cuh:top_k_sampling_from_prob")
    assert topk["compiled"] and set(topk["artifacts"][0]["archs"]) == set(ARCHS)
    fam = lib.families["top_k_sampling_from_prob"]
    art = fam.specs[0].artifact
    assert art.launch.block == (1024, 1, 1) and art.launch.dynamic_smem > 0


@pytest.mark.skipif(not _has_cute(), reason="the CuTe DSL (nvidia-cutlass-dsl) is not installed")
def test_cute_dsl_norm_and_gemm_are_host_programs_of_the_same_library(
        corpus_run: tuple[Path, dict[str, object]]) -> None:
    out, secs = corpus_run
    cute = secs["cute"]
    assert cute.failures == [] and cute.linked == set(CUTE_CASES)  # type: ignore[attr-defined]
    header = (out / "flashinfer" / "lib" / "include" / "flashinfer.h").read_text()
    for entry in ("cute_rmsnorm_bf16(", "cute_rmsnorm_f16(", "cute_gemm_bf16_direct_bf16("):
        assert f"flashinfer_{entry}" in header


def test_gpu_prepare_carries_what_the_gpu_script_checks(corpus_run: tuple[Path, dict[str, object]],
                                                         tmp_path: Path) -> None:
    from corpus import flashinfer

    out, _ = corpus_run
    info = flashinfer.gpu_prepare(out, tmp_path / "corpus-fi")
    assert info["bytes"] <= 25 << 20
    assert set(json.loads((tmp_path / "corpus-fi" / "manifest.json").read_text())["families"]) >= {"rmsnorm"}
    # the GPU script loads the library, reads every entry's prototype from flashinfer.h and finds a GPU case for it
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "corpus_gpu.py"), "--package", "flashinfer", "--dry-run",
                        "--dir", str(tmp_path / "corpus-fi"), "--out", str(tmp_path / "out")], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "problems: none" in p.stdout


def test_every_gpu_case_matches_its_entrys_prototype(corpus_run: tuple[Path, dict[str, object]], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU script's cases, built on the CPU (torch's "cuda" tensors made on the CPU here): one argument per
    parameter of each entry's C prototype, each convertible to its ctypes type, and the checks run."""
    import ctypes

    import torch
    from corpus import flashinfer

    out, _ = corpus_run
    flashinfer.gpu_prepare(out, tmp_path / "corpus-fi")
    for fn in ("randn", "full", "zeros", "tensor", "arange", "randint", "randperm", "ones"):
        orig = getattr(torch, fn)

        def on_cpu(*a: object, _orig: object = orig, **k: object) -> object:
            if k.get("device") == "cuda":
                k["device"] = "cpu"
            return _orig(*a, **k)  # type: ignore[operator]
        monkeypatch.setattr(torch, fn, on_cpu)
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self)
    from corpus import flashinfer_gpu as gpu

    d = tmp_path / "corpus-fi"
    manifest = json.loads((d / "manifest.json").read_text())
    header = gpu.Header((d / "include" / "flashinfer.h").read_text())
    todo = [("kernel", f, a["variant"], f"flashinfer_{f}_{a['variant']}") for f, arts in manifest["families"].items()
            for a in arts]
    todo += [("host", h, e["variant"], e["symbol"]) for h, es in manifest["host_programs"].items() for e in es]
    assert len(todo) >= 5
    for kind, fam, variant, symbol in todo:
        case = (gpu.HOST_CASES if kind == "host" else gpu.CUDA_CASES)[fam](variant)
        proto = header.prototype(symbol)[(0 if kind == "host" else 1):]  # a kernel entry's kp_cfg comes first
        args = [*case.args, ctypes.c_void_p(0)] if case.host else case.args
        assert len(args) == len(proto), symbol
        assert all(gpu.c_value(t, v, torch) is not None for (_, t), v in zip(proto, args))
        assert isinstance(case.check(), str) if case.check else True
