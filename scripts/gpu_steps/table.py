"""The GPU steps as data: what each prepares here (GPU-less) into ``.gpu/`` and what it runs there.

A command is argv with placeholders: ``{py}`` the running interpreter (the GPU machine's python3), ``{out}`` the log
folder, ``{gpu}`` the carried artifacts (``.gpu``); ``GPU_TESTS``/``CPU_TESTS`` in the environment replace the test
files of the ``tests``/``cpu_tests`` steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import delivery
from . import prepare as p


@dataclass(frozen=True)
class Cmd:
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)  # added to the run's environment (placeholders allowed)
    cwd: str = ""  # relative to the repository root (placeholders allowed); "" is the root
    files: tuple[str, ...] = ()  # test files, after argv
    files_from: str = ""  # an environment variable that, when set, replaces ``files`` (space-separated)


def py(*argv: str, env: Mapping[str, str] | None = None, cwd: str = "") -> Cmd:
    return Cmd(("{py}", *argv), dict(env or {}), cwd)


def pytest(*files: str, gpu: str = "", files_from: str = "") -> Cmd:
    """pytest over ``files``: with ``gpu`` (the step's name), the GPU tests only and a JUnit report beside the log."""
    opts = ("-m", "gpu", "-q", "-rfEs", f"--junitxml={{out}}/{gpu}.xml") if gpu else ("-q", "-rfE")
    return Cmd(("{py}", "-m", "pytest", "-p", "no:cacheprovider", *opts), files=files, files_from=files_from)


def gpu_tests(name: str, *files: str) -> Cmd:
    return pytest(*files, gpu=name)


@dataclass(frozen=True)
class Step:
    name: str
    doc: str
    prepare: Callable[[Path], None] | None = None  # fills its part of .gpu/ here
    carries: tuple[str, ...] = ()  # what prepare writes, relative to .gpu/
    needs: tuple[str, ...] = ()  # steps whose artifacts the run reads (prepared with this one)
    run: tuple[Cmd, ...] = ()  # there, in order, each under the step's cap
    cap: int = 300  # seconds for the whole run part
    optional: bool = False  # left out of `prepare` with no step named (needs packages not installed by default)


CPU_TESTS = ("tests/test_runtime_bridge.py", "tests/test_runtime_launch.py", "tests/test_runtime_plan.py",
             "tests/test_runtime_derived.py", "tests/test_descriptor_launch.py", "tests/test_runtime_singletons.py",
             "tests/test_clib_build.py", "tests/test_load_first_use.py", "tests/test_lazy_load.py",
             "tests/test_dispatch_record.py")
LOAD_SHAPES = p.LOAD_SHAPES

STEPS: tuple[Step, ...] = (
    # ---- artifacts, each with the GPU tests that read it
    Step("demo", "demo kernels (CUDA C++, sm_80 + sm_90a)", p.demo, ("demo.kpack",),
         run=(gpu_tests("demo", "tests/test_gpu_cuda.py", "tests/test_concurrency_gpu.py"),)),
    Step("frontends", "Triton (this machine's version) and cuTile bundles", p.frontends,
         ("frontends/triton.kpack", "frontends/cutile.kpack"),
         run=(gpu_tests("frontends", "tests/test_triton_gpu.py", "tests/test_cutile_gpu.py",
                        "tests/test_frontends_cpp_gpu.py"),)),
    Step("cute", "CuTe DSL kernels, host programs (driver shim) and the mixed library", p.cute, ("cute/manifest.json",),
         needs=("frontends",),
         run=(gpu_tests("cute", "tests/test_cute_gpu.py", "tests/test_cute_host_runtime_gpu.py",
                        "tests/test_clib_mixed_gpu.py"),)),
    Step("runtime", "the runtime's test, spin and 100-kernel bundles", p.runtime,
         ("runtime/tests.kpack", "runtime/bench.kpack", "runtime/many.kpack"),
         run=(gpu_tests("runtime", "tests/test_runtime_gpu.py"),)),
    Step("examples", "every example project built as a library", p.examples, ("examples/manifest.json",),
         run=(gpu_tests("examples", "tests/test_examples.py"),), cap=400),
    Step("cutile_lists", "cuTile kernels taking lists of arrays (sm_90a): bundle and C library; Python, C, cost",
         p.cutile_lists, ("cutile_lists/lists.kpack", "cutile_lists/kplists"),
         run=(gpu_tests("cutile_lists", "tests/test_cutile_lists_gpu.py"),
              py("bench/list_launch.py", "--json", "{out}/list_launch.json")), cap=240),
    Step("per_arch", "per-arch launch facts (cuTile, Triton TMA, SM-count builds)", p.per_arch,
         ("per_arch/per_arch.kpack",), run=(gpu_tests("per_arch", "tests/test_per_arch_gpu.py"),)),
    Step("wheels", "wheels of the CUDA C++ and Triton examples", p.wheels, ("wheel/manifest.json",),
         run=(gpu_tests("wheels", "tests/test_wheel_gpu.py"),)),
    Step("delivery", "a generated wheel: torch custom ops (compile, CUDA graphs), --split arch wheels, the kernel-hub "
         "export; installed offline into an empty venv and timed (bench/wheel_delivery.py)",
         delivery.prepare, ("delivery/manifest.json",),
         run=(gpu_tests("delivery", "tests/test_wheel_torch_gpu.py", "tests/test_wheel_split_gpu.py"),
              py("bench/wheel_delivery.py", "--rounds", "9", "--wheel", "{gpu}/delivery/ex_cuda-1.0.0-cp310-abi3-"
                 "manylinux_2_17_x86_64.whl")), cap=400),
    Step("launchcost", "argument-count kernels, their C library, the runtime before the launch-cost work",
         p.launchcost, ("launchcost/argcount.kpack", "launchcost/argcount.cubin", "launchcost/clib",
                        "launchcost/before/src")),
    Step("ptx", "compute_80 PTX-only kernels for the driver to JIT", p.ptx, ("ptx/ptx80.kpack",),
         run=(gpu_tests("ptx", "tests/test_ptx_gpu.py"),)),
    Step("pdl", "PDL and cooperative launch kernels", p.pdl, ("pdl/pdl.kpack",),
         run=(gpu_tests("pdl", "tests/test_launch_flags_gpu.py"),)),
    Step("tuning", "every config of the autotuned Triton matmul, one family", p.tuning,
         ("ranges/matmul_configs.kpack",), run=(gpu_tests("tuning", "tests/test_tuning_gpu.py"),)),
    Step("smem", "an autotuned Triton family with configs left out for the arch they do not fit", p.smem,
         ("smem/smem.kpack",), run=(gpu_tests("smem", "tests/test_smem_limits_gpu.py"),)),
    Step("fp8", "fp8 widening kernels (NVRTC)", p.fp8, ("fp8/fp8.kpack",),
         run=(gpu_tests("fp8", "tests/test_fp8_gpu.py"),)),
    Step("loadscale", "bench/load_scale.py's synthesized bundles and C libraries", p.loadscale,
         ("loadscale/synth-100-10-sm_90a.kpack", "loadscale/synth-10000-100-sm_90a.kpack")),
    Step("capture", "a GPU-less capture (device h200) of tests/capture_gpu_script.py; there, the GPU-mode capture of "
                    "the same script with Triton's real autotuner, compared", p.capture,
         ("capture/gpuless/capture.json",), run=(gpu_tests("capture", "tests/test_capture_gpu.py"),), cap=200),
    Step("capture_liger", "the GPU-less capture (device h200) of liger's Triton script of calls; there, the GPU-mode "
                          "capture of the same calls with liger's autotuners measuring, compared", p.capture_liger,
         ("capture_liger/gpuless/capture.json",),
         run=(gpu_tests("capture_liger", "tests/test_capture_liger_gpu.py"),), cap=480, optional=True),
    Step("capture_native", "CUDA C++ that launches its own kernels and FlashInfer's CUDA modules, captured on the GPU "
                           "by the driver recorder (--native), built and replayed bit-exact", p.capture_native,
         ("capture_native/libnative_runtime.so",),
         run=(gpu_tests("capture_native", "tests/test_capture_native_gpu.py"),), cap=300),
    Step("corpus", "the liger-kernel corpus library and liger's Python sources", p.corpus, ("corpus/manifest.json",),
         optional=True),
    Step("corpus_fi", "the FlashInfer corpus library; runs every entry from C++ and Python", p.corpus_fi,
         ("corpus-fi/manifest.json",), optional=True,
         run=(py("scripts/corpus_gpu.py", "--package", "flashinfer", "--reps", "10", "--out", "{out}"),), cap=40),
    Step("fa4", "FlashAttention-4 precompiled (corpus/fa4): fwd/bwd vs torch, from Python and C++; the bench",
         p.fa4, ("fa4/manifest.json",), optional=True,
         run=(gpu_tests("fa4", "tests/test_fa4_gpu.py"),
              py("bench/fa4_attention.py", "--json", "{out}/fa4_bench.json")), cap=420),
    # ---- runs over the artifacts above
    Step("tests", "every GPU test of the suite", needs=("demo", "frontends", "cute", "runtime", "examples", "per_arch",
                                                       "wheels", "ptx", "pdl", "tuning", "smem", "fp8",
                                                       "cutile_lists", "delivery"),
         run=(pytest("tests", gpu="tests", files_from="GPU_TESTS"),), cap=580),
    Step("cpu_tests", "the fake-driver launch-path tests against this machine's python and torch",
         run=(pytest(*CPU_TESTS, files_from="CPU_TESTS"),), cap=120),
    Step("corpus_triton", "liger's Triton kernels vs its JIT, from Python and C++", needs=("corpus",),
         run=(py("scripts/corpus_gpu.py", "--dsl", "triton", "--reps", "8", "--out", "{out}/corpus_triton.md"),),
         cap=120),
    Step("corpus_cute", "the corpus's recorded CuTe and cuTile launches, from Python and C++", needs=("corpus",),
         run=(py("scripts/corpus_gpu.py", "--dsl", "cute", "--dsl", "cutile", "--reps", "8", "--out",
                 "{out}/corpus_cute.md"),), cap=70),
    Step("bench_clib", "bench/clib_launch.py: the C library's launch cost", run=(py("bench/clib_launch.py", "--kernels",
                                                                                    "200"),), cap=45),
    Step("bench_launch", "bench/launch_overhead.py: Python launch cost against the peers", needs=("runtime",
                                                                                                "launchcost"),
         run=(py("bench/launch_overhead.py", "--json", "{out}/bench.json"),), cap=130),
    Step("bench_launch_before", "bench/launch_overhead.py with the runtime before the launch-cost work",
         needs=("runtime", "launchcost"),
         run=(py("setup.py", "-q", "build_ext", "--inplace", cwd="{gpu}/launchcost/before"),
              py("bench/launch_overhead.py", "--json", "{out}/bench_before.json",
                 env={"PYTHONPATH": "{gpu}/launchcost/before/src"})), cap=200),
    Step("bench_load", "bench/load_scale.py: load and first launch at 100 to 10,000 kernels", needs=("loadscale",),
         run=(py("bench/load_scale.py", "--work", "{gpu}/loadscale", "--rounds", "3", "--shapes", *LOAD_SHAPES),),
         cap=75),
    Step("bench_triton", "bench/triton_launch.py: kernelpack vs Triton's own JIT launch",
         run=(py("bench/triton_launch.py"),), cap=120),
    Step("bench_cute_gemm", "bench/cute_gemm.py: the CuTe Hopper GEMM host program", needs=("cute",),
         run=(py("bench/cute_gemm.py"),), cap=120),
    Step("profile_load", "import/load/first-use profile of a 10,000-kernel bundle", needs=("loadscale",),
         run=(py("scripts/gpu_steps/profile_load.py", "{gpu}/loadscale/synth-10000-100-sm_90a.kpack", "k0"),), cap=40),
    Step("first_launch", "a process's first launch with torch tensors, phase by phase", needs=("runtime",),
         run=(py("scripts/gpu_steps/first_launch.py", "{gpu}/runtime/many.kpack", "--runs", "3"),), cap=40),
    Step("first_launch_synth", "first use and launch of synthesized families (2 and 19 parameters)",
         needs=("loadscale",),
         run=(py("scripts/gpu_steps/first_launch.py", "{gpu}/loadscale/synth-100-10-sm_90a.kpack", "--synth", "k5:2",
                 "--runs", "5"),
              py("scripts/gpu_steps/first_launch.py", "{gpu}/loadscale/synth-10000-100-sm_90a-p19.kpack", "--synth",
                 "k50:19", "--runs", "5")), cap=60),
    Step("sanitize", "each frontend's GPU tests under compute-sanitizer memcheck and racecheck",
         needs=("demo", "frontends", "cute", "runtime", "cutile_lists"),
         run=(py("scripts/gpu_steps/sanitize.py", "--out", "{out}/sanitize"),), cap=590),
)

BY_NAME: dict[str, Step] = {s.name: s for s in STEPS}
DEFAULT_RUN = ("tests",)


def resolve(names: list[str]) -> list[Step]:
    """The steps named, in the order given; a name that is no step raises KeyError naming the known ones."""
    bad = [n for n in names if n not in BY_NAME]
    if bad:
        raise KeyError(f"no step {', '.join(bad)}; steps: {', '.join(BY_NAME)}")
    return [BY_NAME[n] for n in names]


def to_prepare(names: list[str]) -> list[Step]:
    """The steps whose prepare part ``prepare NAMES`` runs, in table order: the named ones and what they need (every
    non-optional step when none is named)."""
    wanted = {s.name for s in STEPS if not s.optional} if not names else set()
    todo = list(names)
    while todo:
        step = BY_NAME[todo.pop()]
        if step.name not in wanted:
            wanted.add(step.name)
            todo += step.needs
    return [s for s in STEPS if s.name in wanted and s.prepare is not None]
