"""The build-machine half of each step: compile what the GPU run reads into ``.gpu/`` (git-ignored, carried).

Each function takes the ``.gpu`` folder and fills its own part of it; the GPU machine has Triton 3.6 and neither CuTe
DSL nor cuTile, so these artifacts -- not ones compiled there -- are what its tests and benchmarks check. Imports are
made inside the functions: ``scripts/gpu.py run`` reads the table without them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _wrote(path: Path, what: str = "") -> None:
    print(f"wrote {path} ({path.stat().st_size} bytes)" + (f": {what}" if what else ""))


def _labels(bundle: Any) -> str:
    return ", ".join(f"{a.label}({'/'.join(map(str, a.archs))})" for a in bundle)


def _fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def demo(gpu: Path) -> None:
    """demo.kpack: the demo kernels (sm_80 + sm_90a), read by the CUDA C++ and concurrency GPU tests."""
    from kernelpack.cli.demo import compile_examples

    gpu.mkdir(parents=True, exist_ok=True)
    _wrote(compile_examples(("sm_80", "sm_90a")).write(gpu / "demo.kpack"))


def frontends(gpu: Path) -> None:
    """frontends/{triton,cutile}.kpack: the Triton (this machine's version) and cuTile bundles of the GPU tests."""
    import frontend_builds as fb

    out = gpu / "frontends"
    out.mkdir(parents=True, exist_ok=True)
    for name, build in (("triton.kpack", fb.triton_bundle), ("cutile.kpack", fb.cutile_bundle)):
        bundle = build()
        _wrote(bundle.write(out / name), _labels(bundle))


def cute(gpu: Path) -> None:
    """cute/: CuTe DSL kernel-level artifacts (kernels.kpack: ew_add f32/bf16 and scale_shift on sm_80 + sm_90a) and
    their C library (kpkern/); host programs linked with the driver shim (kpcute/: ew_add, scale_shift, Hopper gemm
    f16/bf16 on sm_90a); one library of all of it plus frontends/*.kpack (kpmix/); manifest.json (read by
    tests/test_cute_gpu.py and bench/cute_gemm.py). Needs the frontends step first."""
    import cutlass

    import kernelpack
    import kernelpack.cute as kc
    from cute_support import example, host_programs
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.clib.host import build_host_library

    t0 = time.time()
    ea, ps = example("elementwise_add"), example("policy_scale")
    frontend_bundles = [gpu / "frontends" / "triton.kpack", gpu / "frontends" / "cutile.kpack"]
    missing = [str(p) for p in frontend_bundles if not p.is_file()]
    if missing:  # the mixed library's GPU test calls Triton and cuTile kernels: never build it without them
        raise RuntimeError(f"cute: {', '.join(missing)} missing; prepare the frontends step first")
    out = _fresh(gpu / "cute")
    archs = ["sm_80", "sm_90a"]
    dtypes = ((cutlass.Float32, "f32"), (cutlass.BFloat16, "bf16"))
    kernels = Bundle.of(
        *(kc.compile(ea.elementwise_add, *ea.example_args(dt), arch=archs, name="ew_add", variant=v)
          for dt, v in dtypes),
        kc.compile(ps.ScaleShift(), *ps.example_args(), arch=archs, name="scale_shift"),
    )
    kernels.write(out / "kernels.kpack")
    kernelpack.Library("kpkern", kernels).build(out / "kpkern")

    programs = host_programs()  # ew_add f32/bf16 and scale_shift (sm_80 + sm_90a), gemm f16/bf16 (sm_90a)
    lib = build_host_library("kpcute", programs, out / "kpcute")
    hosts = [p for p in programs if p.name == "gemm"]  # the others share names with the kernel-level families
    kernelpack.Library("kpmix", kernels, *[Bundle.read(p) for p in frontend_bundles], *hosts).build(out / "kpmix")

    manifest = {
        "cute_dsl": kc.dsl_version(),
        "kernels": [{"name": a.name, "variant": a.variant, "abi": a.abi.describe(), "launch": a.launch.to_json(),
                     "archs": [str(x) for x in a.archs]} for a in kernels],
        "host_programs": [{"entry": f"kpcute_{p.symbol}", "params": [[q.name, q.type.c_type] for q in p.params],
                           "archs": [str(o.arch) for o in p.objects]} for p in programs],
        "shared": str(lib.shared.relative_to(out)),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"wrote {out} in {time.time() - t0:.1f} s:", ", ".join(sorted(p.name for p in out.rglob("*") if p.is_file())))


def runtime(gpu: Path) -> None:
    """runtime/: tests.kpack (the runtime's GPU tests), bench.kpack (spin) and many.kpack (100 kernels) for the launch
    benchmark and the first-launch profile."""
    from kernelpack.frontends.cuda import compile as cuda
    from runtime_support import build_test_bundle

    out = gpu / "runtime"
    out.mkdir(parents=True, exist_ok=True)
    build_test_bundle(out / "build", compiler="nvcc").write(out / "tests.kpack")
    cuda.compile(ROOT / "tests/fake_runtime/kernels.cu", ["spin"], arch=["sm_90a"], compiler="nvcc").write(
        out / "bench.kpack")
    cuda.compile(ROOT / "bench/many_kernels.cu", [f"k{i}" for i in range(100)], arch=["sm_90a"],
                 compiler="nvcc").write(out / "many.kpack")
    for p in sorted(out.glob("*.kpack")):
        print(f"{p}: {p.stat().st_size} bytes")


def _buildable(dsls: tuple[str, ...] | None = None) -> tuple[list[Any], list[str]]:
    """The example projects (of ``dsls``) this machine can build, and the DSLs it cannot (said on stdout)."""
    from example_builds import ALL

    can, missing = [], []
    for ex in ALL:
        if dsls is not None and ex.dsl not in dsls:
            continue
        if ex.buildable():
            can.append(ex)
        else:
            missing.append(ex.dsl)
            print(f"skip examples/{ex.dsl}: {ex.needs or 'a CUDA C++ compiler'} is not installed")
    return can, missing


def _manifest(out: Path, data: dict[str, Any], missing: list[str]) -> None:
    (out / "manifest.json").write_text(json.dumps({**data, "missing": missing}, indent=1))
    if missing:
        raise RuntimeError(f"not built here: examples/{', examples/'.join(missing)} (their DSL is not installed)")


def examples(gpu: Path, jobs: int = 2) -> None:
    """examples/<dsl>/: every example project (examples/<dsl>/kernelpack.toml) built as a library;
    tests/test_examples.py compiles each examples/<dsl>/main.cpp against it on the GPU machine and runs it and
    examples/<dsl>/run.py."""
    from example_builds import build_example

    out = _fresh(gpu / "examples")
    can, missing = _buildable()
    built = {}
    for ex in can:
        t0 = time.perf_counter()
        built[ex.dsl] = [r.kernel for r in build_example(ex, out / ex.dsl, jobs=jobs).rows]
        print(f"built examples/{ex.dsl} -> {out / ex.dsl} in {time.perf_counter() - t0:.1f} s: "
              f"{', '.join(built[ex.dsl])}")
    _manifest(out, {"built": built}, missing)


def wheels(gpu: Path, jobs: int = 2) -> None:
    """wheel/: the wheels of the CUDA C++ and Triton example projects (``kernelpack wheel``; what the GPU machine could
    also build); tests/test_wheel_gpu.py installs them there offline and runs every kernel against torch."""
    from kernelpack.wheel import build_wheel

    out = _fresh(gpu / "wheel")
    can, missing = _buildable(("cuda", "triton"))
    built = {}
    with tempfile.TemporaryDirectory(prefix="kp-gpu-wheels-") as tmp:
        for ex in can:
            result = build_wheel(ex.copy(Path(tmp) / ex.dsl), out, jobs=jobs)
            built[ex.name] = result.path.name
            print(f"wrote {result.path} ({result.size} bytes)")
    _manifest(out, {"wheels": built}, missing)


def cutile_lists(gpu: Path) -> None:
    """cutile_lists/: cuTile kernels taking lists of arrays (tests/cutile_list_kernels.py: group_scale f32/f16, the
    grouped GEMM group_matmul, and scale_one -- group_scale on one array, without a list -- as the launch-cost
    baseline) for sm_90a: lists.kpack and its C library kplists/ (read by tests/test_cutile_lists_gpu.py and
    bench/list_launch.py)."""
    import cutile_list_kernels as k
    import kernelpack
    import kernelpack.cutile as kc
    from kernelpack.bundle.kpack import Bundle

    out = _fresh(gpu / "cutile_lists")
    bundle = Bundle.of(kc.compile(k.group_scale, k.SCALE, arch="sm_90a"),
                       kc.compile(k.group_matmul, k.MATMUL, arch="sm_90a"),
                       kc.compile(k.scale_one, k.SCALE_ONE, arch="sm_90a"))
    _wrote(bundle.write(out / "lists.kpack"), _labels(bundle))
    lib = kernelpack.Library("kplists", bundle).build(out / "kplists")
    _wrote(lib.shared)


def per_arch(gpu: Path) -> None:
    """per_arch/per_arch.kpack (tests/per_arch_builds.py): a cuTile matmul whose thread count differs per arch, a Triton
    matmul over tensor descriptors lowered per arch, kernels reading the SM count and max active clusters, builds for
    132 and 108 SMs; tests/test_per_arch_gpu.py launches them."""
    import per_arch_builds as pb

    out = gpu / "per_arch"
    out.mkdir(parents=True, exist_ok=True)
    bundle = pb.bundle()
    _wrote(bundle.write(out / "per_arch.kpack"), _labels(bundle))


def launchcost(gpu: Path, before: str = "2872c9c") -> None:
    """launchcost/: the launch-cost-vs-argument-count kernels (bench/argcount.py: 0, 4, 19, 64 parameters) for sm_90a
    as argcount.kpack (the runtime's rows), argcount.cubin (raw-driver and peer rows) and the C library kpargs
    (clib/); before/: the runtime's sources at the commit before the launch-cost work (``before``), which the
    bench_launch_before step builds and benchmarks in the same GPU session."""
    import argcount

    from kernelpack.bundle.kpack import Bundle
    from kernelpack.clib import Library
    from kernelpack.frontends.cuda import compile as cuda

    arch = "sm_90a"
    out = _fresh(gpu / "launchcost")
    cu = out / "argcount.cu"
    cu.write_text(argcount.source())
    arts = cuda.compile(cu, [f"args{n}" for n in argcount.COUNTS], arch=[arch], compiler="nvcc")
    Bundle.of(arts).write(out / "argcount.kpack")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    subprocess.run([nvcc, "-cubin", f"-arch={arch}", str(cu), "-o", str(out / "argcount.cubin")], check=True)
    res = Library("kpargs", *arts).build(out / "clib")
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", before, "src", "setup.py", "pyproject.toml"],
                         check=True, capture_output=True).stdout
    (out / "before").mkdir()
    subprocess.run(["tar", "-x", "-C", str(out / "before")], input=tar, check=True)
    print(f"{out / 'before'}: the runtime at {before} ({len(tar)} bytes of sources)")
    print(f"C library: {res.shared} (header {res.include_dir})")


def ptx(gpu: Path) -> None:
    """ptx/ptx80.kpack: kernels carrying only compute_80 PTX for the H200's driver to JIT (tests/test_ptx_gpu.py):
    CUDA C++ through nvcc (PTX ISA 9.0, which the CUDA 13.0 driver JITs; NVRTC 13.5 would write 9.5), Triton and,
    where the CuTe DSL is installed, a CuTe kernel."""
    import kernelpack.frontends.cuda.compile as kcuda
    from kernelpack.bundle.kpack import Bundle

    arch = ["compute_80"]
    src = (ROOT / "src" / "kernelpack" / "examples" / "vector_ops.cu").read_text()
    parts = [kcuda.compile(src, {"ptx_axpy": "axpy"}, arch=arch, compiler="nvcc")]
    try:
        import kernelpack.frontends.triton.compile as kt
        from triton_kernels import add_kernel
    except ImportError as e:
        print(f"no Triton here ({e}): the Triton kernel is left out")
    else:
        parts.append(kt.compile(add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                                constexprs={"BLOCK": 1024}, arch=arch, name="ptx_tr_add"))
    try:
        import cutlass

        import kernelpack.cute as kc
        from cute_support import example
    except ImportError as e:
        print(f"no CuTe DSL here ({e}): the CuTe kernel is left out")
    else:
        ea = example("elementwise_add")
        parts.append(kc.compile(ea.elementwise_add, *ea.example_args(cutlass.Float32), arch=arch, name="ptx_cute_add"))
    bundle = Bundle.of(*parts)
    if any(b.kind != "ptx" for a in bundle for b in a.binaries):
        raise RuntimeError("ptx: compute_80 must give PTX only")
    out = gpu / "ptx"
    out.mkdir(parents=True, exist_ok=True)
    _wrote(bundle.write(out / "ptx80.kpack"), ", ".join(f"{a.label}({', '.join(map(repr, a.binaries))})"
                                                          for a in bundle))


def pdl(gpu: Path) -> None:
    """pdl/pdl.kpack: tests/pdl_kernels.cu for sm_90, pdl_secondary flagged for programmatic dependent launch and
    grid_center for cooperative launch (tests/test_launch_flags_gpu.py)."""
    import kernelpack

    out = gpu / "pdl"
    out.mkdir(parents=True, exist_ok=True)
    bundle = kernelpack.cuda.compile(ROOT / "tests" / "pdl_kernels.cu", ["pdl_primary", "pdl_secondary", "grid_center"],
                                     arch=["sm_90"], pdl=["pdl_secondary"], cooperative=["grid_center"])
    _wrote(bundle.write(out / "pdl.kpack"),
           ", ".join(f"{a.name}(pdl={a.launch.pdl}, cooperative={a.launch.cooperative})" for a in bundle))


def tuning(gpu: Path) -> None:
    """ranges/matmul_configs.kpack: every config of the autotuned Triton matmul (tests/tuning_gpu_kernels.py) compiled
    for sm_90a as one family (tests/test_tuning_gpu.py)."""
    from tuning_gpu_kernels import compile_bundle

    out = gpu / "ranges"
    out.mkdir(parents=True, exist_ok=True)
    _wrote(compile_bundle("sm_90a").write(out / "matmul_configs.kpack"))


def smem(gpu: Path) -> None:
    """smem/smem.kpack: an autotuned Triton matmul (tests/smem_kernels.py) whose configs WIDE, BIG and SMALL were
    compiled for sm_80 and sm_90a, each left out for the arch whose shared memory it exceeds (WIDE for sm_90a, BIG for
    sm_80); tests/test_smem_limits_gpu.py launches what dispatch picks on the H200."""
    import warnings

    import smem_kernels as sk

    out = gpu / "smem"
    out.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(record=True) as dropped:
        warnings.simplefilter("always")
        bundle = sk.compile_family((sk.WIDE, sk.BIG, sk.SMALL), ["sm_80", "sm_90a"])
    _wrote(bundle.write(out / "smem.kpack"), f"{_labels(bundle)}; {'; '.join(str(w.message) for w in dropped)}")


def fp8(gpu: Path) -> None:
    """fp8/fp8.kpack: tests/fp8_kernels.cu (__nv_fp8_e4m3/__nv_fp8_e5m2 -> f32) with NVRTC for sm_90
    (tests/test_fp8_gpu.py compares them with torch's own conversion)."""
    import kernelpack

    out = gpu / "fp8"
    out.mkdir(parents=True, exist_ok=True)
    bundle = kernelpack.cuda.compile(ROOT / "tests" / "fp8_kernels.cu",
                                     ["widen<__nv_fp8_e4m3>", "widen<__nv_fp8_e5m2>", "widen_e4m3"], arch=["sm_90"],
                                     compiler="nvrtc")
    _wrote(bundle.write(out / "fp8.kpack"),
           "; ".join(f"{a.label}({a.abi.params[0].type.pointee.value}*)" for a in bundle))


LOAD_SHAPES = ("100:10", "1000:100", "10000:1000", "10000:100", "100:10:19", "1000:100:19", "10000:100:19")


def loadscale(gpu: Path) -> None:
    """loadscale/: bench/load_scale.py's synthesized bundles and C libraries (timed once here on the fake driver);
    what the GPU run does not read is removed (the carry is limited to 64 MiB)."""
    out = gpu / "loadscale"
    subprocess.run([sys.executable, str(ROOT / "bench" / "load_scale.py"), "--work", str(out), "--arch", "sm_90a",
                    "--rounds", "1", "--shapes", *LOAD_SHAPES, "--clib", "1000", "10000"], check=True)
    unread = ("clib-*/synth/lib/libsynth.a", "clib-*/synth/include/synth.hpp")
    for junk in (out / "pycache", *(p for pattern in unread for p in out.glob(pattern))):
        if junk.is_dir():
            shutil.rmtree(junk)
        elif junk.exists():
            junk.unlink()


def capture(gpu: Path) -> None:
    """capture/gpuless/: the GPU-less capture (device h200) of tests/capture_gpu_script.py, which
    tests/test_capture_gpu.py compares with the GPU-mode capture of the same script on the H200."""
    out = gpu / "capture"
    shutil.rmtree(out, ignore_errors=True)
    work = out / "work"
    work.mkdir(parents=True)
    for src, dst in (("capture_kernels.py", "capture_kernels.py"), ("capture_gpu_script.py", "script.py")):
        shutil.copy(ROOT / "tests" / src, work / dst)
    subprocess.run([sys.executable, "-m", "kernelpack.cli", "capture", "-q", "-o", str(out / "gpuless"), "--device",
                    "h200", "--", "python", "script.py"], check=True, cwd=work,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(work)])})
    state = json.loads((out / "gpuless" / "capture.json").read_text())
    _wrote(out / "gpuless" / "capture.json", ", ".join(f["name"] for f in state["families"]))


def capture_liger(gpu: Path) -> None:
    """capture_liger/gpuless/: the GPU-less capture (device h200) of liger-kernel's Triton script of calls
    (corpus/liger_triton.toml), its capture.json only, which tests/test_capture_liger_gpu.py compares with the
    GPU-mode capture of the same calls on the H200; capture_liger/site/: liger's pure-Python sources for that run
    (4 MiB: the corpus step's whole folder is over the carry limit); needs liger-kernel here."""
    from corpus.gpu_prepare import copy_package

    out = gpu / "capture_liger"
    shutil.rmtree(out, ignore_errors=True)
    work = out / "project"
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    subprocess.run([sys.executable, "-m", "kernelpack.cli", "capture", "-q", "-o", str(work), "--device", "h200", "--",
                    sys.executable, "-m", "corpus.cases", "corpus/liger_triton.toml", "--device", "h200"], check=True,
                   cwd=ROOT, env=env)
    (out / "gpuless").mkdir(parents=True)
    shutil.move(str(work / "capture.json"), out / "gpuless" / "capture.json")
    shutil.rmtree(work)
    state = json.loads((out / "gpuless" / "capture.json").read_text())
    _wrote(out / "gpuless" / "capture.json", f"{len(state['families'])} families")
    _wrote(out / "site", f"{copy_package('liger_kernel', out / 'site')} files of liger-kernel")


_FI_BUILD = """
import glob, os, subprocess, sys
from flashinfer.jit.activation import gen_act_and_mul_module
from flashinfer.jit.rope import gen_rope_module
for spec in (gen_act_and_mul_module("silu"), gen_rope_module()):
    try:
        spec.build(verbose=False)
    except RuntimeError:  # its link asks for -lcuda, a stub this machine may lack: the objects need only cudart
        objs = sorted(glob.glob(str(spec.build_dir / "*.o")))
        subprocess.run(["c++", *objs, "-shared", "-L" + sys.argv[1], "-lcudart", "-o", str(spec.jit_library_path)],
                       check=True)
    print(spec.jit_library_path)
"""


def capture_native(gpu: Path) -> None:
    """capture_native/: tests/native_runtime.cu built with nvcc (-shared -cudart static, sm_90a) into
    libnative_runtime.so; FlashInfer's silu_and_mul and rope CUDA modules built by flashinfer's own JIT for sm_90a
    (flashinfer/*.so, linked against libcudart.so.13: the GPU machine's torch has it) and tvm-ffi for the GPU
    machine's python 3.12 (site/, pip download) -- the FlashInfer part left out when either cannot be had here."""
    import tempfile

    out = gpu / "capture_native"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-cudart", "static", "-gencode",
                    "arch=compute_90a,code=sm_90a", str(ROOT / "tests" / "native_runtime.cu"), "-o",
                    str(out / "libnative_runtime.so")], check=True)
    _wrote(out / "libnative_runtime.so")
    cudart = next((p.parent for p in sorted(Path("/usr/local").glob("cuda*/lib*/libcudart.so"))), None)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "FLASHINFER_WORKSPACE_BASE": tmp, "FLASHINFER_CUDA_ARCH_LIST": "9.0a", "MAX_JOBS": "2"}
        built = subprocess.run([sys.executable, "-c", _FI_BUILD, str(cudart or "/usr/local/cuda/lib64")], env=env,
                               capture_output=True, text=True)
        wheel = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                                "--python-version", "3.12", "apache-tvm-ffi", "-d", tmp], capture_output=True,
                               text=True)
        wheels = sorted(Path(tmp).glob("apache_tvm_ffi-*.whl"))
        if built.returncode != 0 or wheel.returncode != 0 or not wheels:
            print(f"capture_native: FlashInfer's modules left out: {(built.stderr or wheel.stderr)[-800:]}")
            return
        (out / "flashinfer").mkdir()
        for line in built.stdout.split():
            shutil.copy(line, out / "flashinfer" / Path(line).name)
        import zipfile

        with zipfile.ZipFile(wheels[0]) as z:
            z.extractall(out / "site")
    _wrote(out / "flashinfer", ", ".join(sorted(p.name for p in (out / "flashinfer").iterdir())))
    _wrote(out / "site", wheels[0].name)


def corpus(gpu: Path) -> None:
    """corpus/: the liger-kernel corpus built (scripts/corpus.py --package liger) and copied with liger's pure-Python
    sources (corpus/gpu_prepare.py); needs liger-kernel, cuTile and the CuTe DSL installed (a few minutes)."""
    from corpus.gpu_prepare import prepare

    subprocess.run([sys.executable, str(ROOT / "scripts" / "corpus.py"), "--package", "liger", "-q"], check=True,
                   cwd=ROOT)
    print(json.dumps(prepare(ROOT / "build" / "corpus", gpu / "corpus"), indent=1))


def corpus_fi(gpu: Path) -> None:
    """corpus-fi/: the FlashInfer corpus built (scripts/corpus.py --package flashinfer, about 8 minutes on 2 cores)
    and copied: libflashinfer.so, its headers, flashinfer.kpack, manifest.json (python -m corpus.flashinfer
    --gpu-prepare); needs flashinfer-python, nvcc and the CuTe DSL."""
    from corpus import flashinfer

    subprocess.run([sys.executable, str(ROOT / "scripts" / "corpus.py"), "--package", "flashinfer", "-q"],
                   check=True, cwd=ROOT)
    print(json.dumps(flashinfer.gpu_prepare(ROOT / "build" / "corpus", gpu / "corpus-fi"), indent=1))


def fa4(gpu: Path) -> None:
    """fa4/: FlashAttention-4 precompiled (corpus/fa4: forward, backward and its pre/post kernels, sm_80/sm_90a/sm_100a,
    head dims 64/128, causal or not, bf16/f16) as libfa4.so + headers, its wheel, the backward's buffer padding
    (fa4_meta.json) and manifest.json with FA4's own JIT time measured here; needs flash-attn-4 4.0.0b36,
    quack-kernels 0.6.5 and apache-tvm-ffi (--no-deps) beside the CuTe DSL."""
    sys.path.insert(0, str(ROOT / "corpus" / "fa4"))
    from gpu_prepare import gpu_prepare

    manifest = gpu_prepare(gpu / "fa4")
    print(json.dumps({k: v for k, v in manifest.items() if k != "entries"}, indent=1))
