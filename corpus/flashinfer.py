"""flashinfer-python 0.7.2.post1: CUDA C++ kernels from its headers and CuTe DSL kernels, linked into one library
``flashinfer``.

* ``cuda``: ``corpus/flashinfer_cuda.toml`` names the kernel templates of ``norm.cuh``, ``activation.cuh``,
  ``pos_enc.cuh`` and ``sampling.cuh`` (``flashinfer/data/include/flashinfer/``) and the template arguments
  FlashInfer's own launchers use; each becomes one family compiled by ``kernelpack.cuda.compile`` with the headers the
  wheel ships (its cccl/cub first on the include path). The compiler is nvcc: the headers mix host launchers
  (``std::ostringstream``, ``throw``, ``<fstream>``) with the kernels, which NVRTC refuses
  (``corpus/repro/flashinfer_nvrtc.py`` shows it with NVRTC alone).
* ``cute``: ``corpus/flashinfer_cute.toml``: FlashInfer's CuTe DSL kernel classes (``flashinfer/norm/kernels/``,
  ``flashinfer/cute_dsl/``) exported as host programs (``kernelpack.cute.export``) for the archs they target.

``python -m corpus.flashinfer --gpu-prepare`` copies the built library, bundle and a manifest into ``.gpu/corpus-fi/``
for ``scripts/corpus_gpu.py --package flashinfer``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

from .cases import CORPUS
from .pipeline import Options, Outcome, compile_specs
from .results import DSL, ENVIRONMENT, KERNELPACK, Section
from .specs import Spec

PACKAGE = "flashinfer-python"
HEADERS = ("norm.cuh", "activation.cuh", "pos_enc.cuh", "sampling.cuh")
STUBS = CORPUS / "flashinfer_include"  # cublasLt.h / cublas_v2.h stand-ins (included, never used, by norm.cuh)
ROOT = CORPUS.parent


def package_root() -> Path | None:
    loaded = sys.modules.get("flashinfer")  # e.g. the empty parent package corpus/flashinfer_cute.py puts there
    if loaded is not None and list(getattr(loaded, "__path__", [])):
        return Path(list(loaded.__path__)[0])
    spec = importlib.util.find_spec("flashinfer")  # finds the package without running its __init__
    return Path(spec.origin).parent if spec and spec.origin else None  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ CUDA C++

@dataclass(frozen=True)
class CudaKernel:
    id: str  # the family name in the library
    header: str
    template: str
    instances: tuple[str, ...]
    prelude: str = ""  # an activation function name from flashinfer/jit/activation.py
    block: tuple[int, int, int] | None = None
    smem: str = ""  # C++ expression for the dynamic shared memory
    reduced: bool = False

    @property
    def key(self) -> str:  # "header:id", as the corpus names kernels ("module:function")
        return f"{self.header}:{self.id}"

    @property
    def exprs(self) -> list[str]:
        return [f"{self.template}<{i}>" for i in self.instances]


def load_cuda(path: Path = CORPUS / "flashinfer_cuda.toml") -> tuple[dict[str, Any], list[CudaKernel]]:
    data = tomllib.loads(path.read_text())
    out = []
    for raw in data.get("kernel", []):
        raw = dict(raw)
        raw["instances"] = tuple(raw["instances"])
        if "block" in raw:
            raw["block"] = tuple(raw["block"])
        out.append(CudaKernel(**raw))
    ids = [k.id for k in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: duplicate kernel ids")
    return dict(data.get("corpus", {})), out


def curand_include() -> str | None:
    """A directory with curand_kernel.h (sampling.cuh includes it): the toolkit's, else a pip nvidia-curand's."""
    from kernelpack.frontends.cuda.toolkit import toolkit_paths

    found = [p.parent for p in toolkit_paths("include/curand_kernel.h")]
    for entry in sys.path:
        for sub in ("cu13", "cu12", "curand"):
            p = Path(entry or ".") / "nvidia" / sub / "include" / "curand_kernel.h"
            if p.is_file():
                found.append(p.parent)
    return str(found[0]) if found else None


def include_dirs(root: Path) -> list[str]:
    data = root / "data"
    dirs = [STUBS, data / "include", data / "cccl" / "cub", data / "cccl" / "libcudacxx" / "include",
            data / "cccl" / "thrust"]
    cur = curand_include()
    return [str(d) for d in dirs] + ([cur] if cur else [])


def activation_defs(root: Path) -> dict[str, str]:
    """FlashInfer's activation functions (``act_func_def_str`` of flashinfer/jit/activation.py), read, not imported
    (that module needs jinja2 and FlashInfer's JIT)."""
    import ast

    tree = ast.parse((root / "jit" / "activation.py").read_text())
    consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
              if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "act_func_def_str" for t in n.targets):
            d = n.value
            assert isinstance(d, ast.Dict)
            return {k.value: consts[v.id] for k, v in zip(d.keys, d.values)}  # type: ignore[union-attr]
    raise ValueError("flashinfer/jit/activation.py: no act_func_def_str")


def cuda_source(k: CudaKernel, root: Path) -> str | Path:
    header = root / "data" / "include" / "flashinfer" / k.header
    if not k.prelude:
        return header  # the header itself is the source: kernelpack reads the parameter names from it
    return (f"#include <flashinfer/{k.header}>\nusing namespace flashinfer;\n"
            f"{activation_defs(root)[k.prelude]}\n")


def defined_kernels(root: Path) -> list[str]:
    """Every ``__global__`` function template of the selected headers (``header:name``)."""
    out = []
    for h in HEADERS:
        text = (root / "data" / "include" / "flashinfer" / h).read_text()
        code = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
        code = re.sub(r"\b(__launch_bounds__|[A-Z][A-Z0-9_]*)\s*\([^()]*\)", " ", code)  # launch-bounds macros
        out += [f"{h}:{m}" for m in dict.fromkeys(re.findall(r"__global__[^;{}(]*?\b(\w+)\s*\(", code))]
    return out


def evaluate_sizes(exprs: Sequence[str], header: str, root: Path, options: Sequence[str]) -> dict[str, int]:
    """Each C++ constant expression's value, from a host program compiled with nvcc against ``header`` and run here
    (FlashInfer's launchers pass ``sizeof(TempStorage)`` as the dynamic shared memory)."""
    from kernelpack.frontends.cuda.toolkit import find_nvcc

    nvcc = find_nvcc()
    if nvcc is None:
        raise RuntimeError("nvcc not found")
    body = "\n".join(f'  std::printf("%zu\\n", (size_t)({e}));' for e in exprs)
    src = f"#include <flashinfer/{header}>\n#include <cstdio>\nint main() {{\n{body}\n  return 0;\n}}\n"
    with tempfile.TemporaryDirectory(prefix="fi-sizeof-") as tmp:
        (Path(tmp) / "s.cu").write_text(src)
        cmd = [nvcc, "-std=c++17", "-cudart=static", "-arch=sm_80", *options,
               *[f"-I{d}" for d in include_dirs(root)], "s.cu", "-o", "s"]
        p = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=600)
        if p.returncode:
            raise RuntimeError(f"sizeof program failed: {(p.stderr or p.stdout)[-600:]}")
        values = subprocess.run([str(Path(tmp) / "s")], capture_output=True, text=True, timeout=60).stdout.split()
    return {e: int(v) for e, v in zip(exprs, values)}


def compile_cuda(spec: Spec, archs: Sequence[str]) -> Any:
    import kernelpack
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.core.launchspec import LaunchSpec

    k, smem, root, meta = spec.payload
    launch = LaunchSpec(block=k.block, dynamic_smem=smem) if (k.block or smem) else None
    bundle = kernelpack.cuda.compile(cuda_source(k, root), k.exprs, arch=list(archs), include_dirs=include_dirs(root),
                                     options=list(meta.get("options", ())), compiler=meta.get("compiler", "nvcc"),
                                     launch=launch)
    return Bundle(tuple(dataclasses.replace(a, name=k.id) for a in bundle))


def classify_cuda(err: str) -> str:
    return DSL if "failed to compile" in err else KERNELPACK


def cuda_section(opts: Options) -> tuple[Section, Outcome]:
    sec = Section(PACKAGE, "cuda")
    root = package_root()
    if root is None:
        sec.notes.append("flashinfer-python is not installed (pip install --no-deps flashinfer-python==0.7.2.post1)")
        return sec, Outcome()
    meta, kernels = load_cuda()
    sec.defined = [k.key for k in kernels]
    templates = defined_kernels(root)
    chosen = {f"{k.header}:{k.template.split('::')[-1]}" for k in kernels}
    sec.notes.append(f"{len(templates)} __global__ templates in {', '.join(HEADERS)}; selected: "
                     f"{len(chosen & set(templates))} of them, as {len(kernels)} families (act_and_mul_kernel once "
                     f"per activation); not selected: {sorted(set(templates) - chosen) or 'none'}")
    sel = [k for k in kernels if (not opts.cases or k.id in opts.cases) and (not opts.reduced or k.reduced)]
    sec.reached = {k.key for k in sel}
    if curand_include() is None and any(k.header == "sampling.cuh" for k in sel):
        sec.notes.append("curand_kernel.h not found (pip install --no-deps nvidia-curand): sampling kernels fail")
    archs = opts.archs or tuple(meta.get("archs", ("sm_80", "sm_90a")))
    sizes = _sizes(sel, root, meta, sec)
    specs = [Spec(k.key, None, {}, {}, (k, sizes.get(k.smem), root, meta), [f"{k.header}:{k.template}"])
             for k in sel if not k.smem or k.smem in sizes]
    return sec, compile_specs(sec, specs, compile_cuda, classify_cuda, archs, opts)


def _sizes(sel: list[CudaKernel], root: Path, meta: dict[str, Any], sec: Section) -> dict[str, int]:
    sizes: dict[str, int] = {}
    by_header: dict[str, list[str]] = {}
    for k in sel:
        if k.smem:
            by_header.setdefault(k.header, []).append(k.smem)
    for header, exprs in by_header.items():
        try:
            sizes.update(evaluate_sizes(sorted(set(exprs)), header, root, meta.get("options", ())))
        except Exception as e:  # noqa: BLE001 - those kernels fail, the rest go on
            for k in sel:
                if k.header == header and k.smem:
                    sec.fail(k.key, "compile", ENVIRONMENT, f"dynamic shared memory size: {e}")
    return sizes


# ------------------------------------------------------------------------------------------------ CuTe DSL

def cute_section(opts: Options) -> tuple[Section, Outcome]:
    from . import flashinfer_cute

    return flashinfer_cute.section(opts, package_root())


def sections(opts: Options, dsls: tuple[str, ...]) -> list[tuple[Section, Outcome]]:
    out = []
    if "cuda" in dsls:
        out.append(cuda_section(opts))
    if "cute" in dsls:
        out.append(cute_section(opts))
    return out


# ------------------------------------------------------------------------------------------------ GPU prepare

# The paged KV cache the GPU case of rope_quantize_append_paged_kv_cache appends to (NHD layout, fp8 e4m3)
PAGED_KV = {"num_heads": 2, "page_size": 16, "head_dim": 128, "batch_size": 3}


def paged_kv_bytes(root: Path, options: Sequence[str]) -> dict[str, Any]:
    """``flashinfer::paged_kv_t<__nv_fp8_e4m3, int32_t>`` as FlashInfer's host constructor builds it for
    :data:`PAGED_KV` (its ``uint_fastdiv`` page size holds a ``cuda::fast_mod_div``'s magic numbers), with null
    pointers, and the offsets of its pointer fields: the GPU run fills those in (the struct is by value in the C ABI,
    opaque bytes)."""
    from kernelpack.frontends.cuda.toolkit import find_nvcc

    nvcc = find_nvcc()
    if nvcc is None:
        raise RuntimeError("nvcc not found")
    c = PAGED_KV
    fields = ("k_data", "v_data", "indices", "indptr", "last_page_len", "rope_pos_offset")
    offs = ", ".join(f'\\"{f}\\": %td' for f in fields)
    src = (
        "#include <flashinfer/page.cuh>\n#include <cstdio>\n"
        "using KV = flashinfer::paged_kv_t<__nv_fp8_e4m3, int32_t>;\nint main() {\n"
        f"  KV kv({c['num_heads']}, {c['page_size']}, {c['head_dim']}, {c['batch_size']}, "
        "flashinfer::QKVLayout::kNHD, (__nv_fp8_e4m3*)nullptr, (__nv_fp8_e4m3*)nullptr, (int32_t*)nullptr, "
        "(int32_t*)nullptr, (int32_t*)nullptr, (int32_t*)nullptr);\n"
        "  const unsigned char* p = reinterpret_cast<const unsigned char*>(&kv);\n"
        '  std::printf("{\\"size\\": %zu, \\"hex\\": \\"", sizeof kv);\n'
        '  for (size_t i = 0; i < sizeof kv; ++i) std::printf("%02x", p[i]);\n'
        f'  std::printf("\\", {offs}}}\\n", '
        + ", ".join(f"reinterpret_cast<const unsigned char*>(&kv.{f}) - p" for f in fields)
        + ");\n  return 0;\n}\n")
    with tempfile.TemporaryDirectory(prefix="fi-paged-kv-") as tmp:
        (Path(tmp) / "kv.cu").write_text(src)
        cmd = [nvcc, "-std=c++17", "-cudart=static", "-arch=sm_80", *options,
               *[f"-I{d}" for d in include_dirs(root)], "kv.cu", "-o", "kv"]
        p = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=600)
        if p.returncode:
            raise RuntimeError(f"paged_kv_t program failed: {(p.stderr or p.stdout)[-600:]}")
        out = subprocess.run([str(Path(tmp) / "kv")], capture_output=True, text=True, timeout=60).stdout
    return {"config": dict(c), **json.loads(out)}

GPU_DIR = ROOT / ".gpu" / "corpus-fi"


def gpu_prepare(build: Path = ROOT / "build" / "corpus", dest: Path = GPU_DIR) -> dict[str, Any]:
    """Copy libflashinfer.so, flashinfer.kpack, the headers and a manifest (families, ABIs, launch facts, the
    corpus results) into ``dest`` for scripts/corpus_gpu.py --package flashinfer."""
    lib = build / "flashinfer" / "lib"
    so = lib / "lib" / "libflashinfer.so"
    if not so.is_file():
        raise FileNotFoundError(f"{so}: run python scripts/corpus.py --package flashinfer first")
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "lib").mkdir(parents=True)
    shutil.copy2(so, dest / "lib" / so.name)
    shutil.copytree(lib / "include", dest / "include")
    kpack = build / "flashinfer" / "flashinfer.kpack"
    if kpack.is_file():
        shutil.copy2(kpack, dest / kpack.name)
    import kernelpack

    mod = kernelpack.load(str(so))
    families = {}
    for name in mod.families:
        fam = mod.families[name]
        families[name] = [{"variant": a.variant, "entry": a.entry, "abi": a.abi.describe(),
                           "archs": [str(x) for x in a.archs], "block": a.launch.block,
                           "dynamic_smem": a.launch.dynamic_smem} for a in _artifacts(fam)]
    hosts = {name: [{"variant": c.info.variant, "symbol": c.info.symbol, "archs": list(c.info.archs)}
                    for c in hp.calls] for name, hp in mod.host_programs.items()}
    manifest = {"library": "flashinfer", "families": families, "host_programs": hosts}
    root = package_root()
    if root is not None and any(f.startswith("rope_quantize_append_paged_kv_cache") for f in families):
        try:
            manifest["paged_kv"] = paged_kv_bytes(root, load_cuda()[0].get("options", ()))
        except Exception as e:  # noqa: BLE001 - the GPU run reports that case as failed, with this reason
            manifest["paged_kv_error"] = str(e)
    results = build / "results.json"
    if results.is_file():
        data = json.loads(results.read_text())
        manifest["sections"] = [s for s in data.get("sections", []) if s.get("package") == PACKAGE]
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
    if size > 25 << 20:
        raise RuntimeError(f"{dest}: {size >> 20} MiB, more than the 25 MiB the GPU run may carry")
    return {"dest": str(dest), "bytes": size, "families": len(families), "host_programs": sorted(hosts)}


def _artifacts(fam: Any) -> list[Any]:
    return [s.artifact for s in fam.specs]  # a loaded KernelFamily's specializations, in dispatch order


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="FlashInfer corpus helpers")
    ap.add_argument("--gpu-prepare", action="store_true", help="copy build/corpus/flashinfer into .gpu/corpus-fi/")
    ap.add_argument("--build", type=Path, default=ROOT / "build" / "corpus")
    args = ap.parse_args(argv)
    if args.gpu_prepare:
        print(json.dumps(gpu_prepare(args.build), indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
