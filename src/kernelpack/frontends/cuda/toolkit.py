"""Run a CUDA C++ compiler (NVRTC in-process, or nvcc) for one arch and return the cubin (``sm_90a``), or the PTX
(a virtual arch, ``compute_90``).

Both backends take the same option set and return the same result, including the mangled symbol that
each requested name expression became, so the frontend does not care which one ran.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...core import config
from ...core.arch import Arch
from ...core.errors import CompileError

# Minimal C headers (stdint.h, stdlib.h) so that sources including <cuda.h> for CUtensorMap compile under NVRTC.
NVRTC_SHIMS = str(Path(__file__).with_name("nvrtc_include"))
_INCLUDES_CUDA_H = re.compile(r'^\s*#\s*include\s*[<"]cuda\.h[>"]', re.M)


@dataclass(frozen=True)
class CudaOptions:
    """Compiler options common to NVRTC and nvcc."""

    defines: tuple[tuple[str, str | None], ...] = ()
    include_dirs: tuple[str, ...] = ()
    maxrregcount: int | None = None
    lineinfo: bool = False
    std: str = "c++17"
    extra: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.maxrregcount is not None and (not isinstance(self.maxrregcount, int) or self.maxrregcount < 16):
            raise CompileError(f"maxrregcount must be an int >= 16 (got {self.maxrregcount!r})")

    def common_flags(self) -> list[str]:
        flags = [f"-std={self.std}"]
        for name, value in self.defines:
            flags.append(f"-D{name}" if value is None else f"-D{name}={value}")
        flags += [f"-I{d}" for d in self.include_dirs]
        if self.maxrregcount is not None:
            flags.append(f"--maxrregcount={self.maxrregcount}")
        if self.lineinfo:
            flags.append("-lineinfo")
        return flags


@dataclass(frozen=True)
class CompileOutput:
    cubin: bytes  # PTX text (no NUL) when the arch was virtual
    lowered: dict[str, str]  # name expression -> symbol in the cubin ("" when the backend cannot tell)
    log: str
    compiler: str  # e.g. "nvrtc 13.5" or "nvcc 13.0"


_PIP_CUDA_DIRS = ("cu13", "cu12", "cuda_runtime", "cuda_nvrtc", "cuda_cuobjdump", "cuda_nvdisasm")


def toolkit_paths(rel: str) -> list[Path]:
    """Existing files ``rel`` (e.g. ``include/cuda.h``, ``bin/cuobjdump``) in the CUDA toolkit, then in the pip
    nvidia-* packages, in that order of preference."""
    out: list[Path] = []
    home = config.knobs().cuda_home
    if home is not None:
        out.append(home / rel)
    try:
        import nvidia  # type: ignore[import-not-found]

        out += [Path(base) / sub / rel for base in nvidia.__path__ for sub in _PIP_CUDA_DIRS]
    except ImportError:
        pass
    return [p for p in out if p.is_file()]


def cuda_include_dirs() -> list[str]:
    """Directories holding cuda.h / cuda_fp16.h: the toolkit's, else the pip nvidia-* packages'."""
    return list(dict.fromkeys(str(p.parent) for p in toolkit_paths("include/cuda.h")))


def nvrtc_available() -> bool:
    try:
        from cuda.bindings import nvrtc

        err, *_ = nvrtc.nvrtcVersion()
        return int(err) == 0
    except Exception:  # noqa: BLE001 - missing package or missing libnvrtc both mean "no"
        return False


def find_nvcc() -> str | None:
    k = config.knobs()
    if k.nvcc:
        return k.nvcc
    if k.cuda_home is not None and (k.cuda_home / "bin" / "nvcc").is_file():
        return str(k.cuda_home / "bin" / "nvcc")
    return shutil.which("nvcc")


def choose_backend() -> str:
    want = config.knobs().cuda_compiler
    if want in ("auto", "nvrtc") and nvrtc_available():
        return "nvrtc"
    if want == "nvrtc":
        raise CompileError("KERNELPACK_CUDA_COMPILER=nvrtc but NVRTC is not importable: "
                           "pip install 'kernelpack[nvrtc]' (cuda-bindings + nvidia-cuda-nvrtc)")
    if find_nvcc() is None:
        raise CompileError("no CUDA C++ compiler: install NVRTC with pip install 'kernelpack[nvrtc]', "
                           "or put nvcc on PATH / set KERNELPACK_NVCC or CUDA_HOME")
    return "nvcc"


def backend_version(backend: str) -> str:
    if backend == "nvrtc":
        from cuda.bindings import nvrtc

        _, major, minor = nvrtc.nvrtcVersion()
        return f"nvrtc {major}.{minor}"
    nvcc = find_nvcc() or "nvcc"
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"cannot run {nvcc}: {e}") from None
    m = re.search(r"release (\d+\.\d+)", out)
    return f"nvcc {m.group(1) if m else 'unknown'}"


def compile_cubin(source: str, arch: Arch, options: CudaOptions, name_expressions: Sequence[str],
                  backend: str, *, filename: str = "kernel.cu") -> CompileOutput:
    """A cubin for ``sm_XY``; PTX text for ``compute_XY`` (never SASS for a virtual arch)."""
    if backend == "nvrtc":
        return _nvrtc(source, arch, options, name_expressions, filename)
    return _nvcc(source, arch, options, name_expressions, filename)


def _nvrtc(source: str, arch: Arch, options: CudaOptions, exprs: Sequence[str], filename: str) -> CompileOutput:
    from cuda.bindings import nvrtc

    def check(result: tuple, what: str) -> tuple:  # type: ignore[type-arg]
        if int(result[0]) != 0:
            raise CompileError(f"NVRTC {what} failed: {result[0]!r}")
        return result[1:]

    (prog,) = check(nvrtc.nvrtcCreateProgram(source.encode(), filename.encode(), 0, [], []), "create")
    try:
        for e in exprs:
            check(nvrtc.nvrtcAddNameExpression(prog, e.encode()), f"add name expression {e!r}")
        # NVRTC optimizes device code by default and rejects host -O levels.
        extra = [f for f in options.extra if f not in ("-O1", "-O2", "-O3")]
        flags = [f"--gpu-architecture={arch}", *options.common_flags(), *extra]
        flags += [f"-I{d}" for d in (*cuda_include_dirs(), NVRTC_SHIMS)]
        if _INCLUDES_CUDA_H.search(source):
            flags.append("-default-device")  # cuda.h declares host functions NVRTC would reject
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(flags), [f.encode() for f in flags])
        (size,) = check(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        # NVRTC writes into the buffer: a bytearray, never bytes (b" " * 1 is the interpreter's shared b" "
        # singleton; writing its NUL there broke every later 1-character f-string part on Python 3.12)
        buf = bytearray(size)
        check(nvrtc.nvrtcGetProgramLog(prog, buf), "log")
        log = bytes(buf).rstrip(b"\0").decode(errors="replace")
        version = backend_version("nvrtc")
        if int(status) != 0:
            raise CompileError(f"{version} failed to compile {filename} for {arch} (flags: {' '.join(flags)})",
                               log=log)
        if arch.virtual:
            (csize,) = check(nvrtc.nvrtcGetPTXSize(prog), "PTX size")
            cubin = bytearray(csize)
            check(nvrtc.nvrtcGetPTX(prog, cubin), "get PTX")
            cubin = cubin.rstrip(b"\0")
        else:
            (csize,) = check(nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
            cubin = bytearray(csize)
            check(nvrtc.nvrtcGetCUBIN(prog, cubin), "get cubin")
        lowered = {}
        for e in exprs:
            (name,) = check(nvrtc.nvrtcGetLoweredName(prog, e.encode()), f"lowered name of {e!r}")
            lowered[e] = name.decode() if isinstance(name, bytes) else str(name)
        return CompileOutput(bytes(cubin), lowered, log, version)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _nvcc(source: str, arch: Arch, options: CudaOptions, exprs: Sequence[str], filename: str) -> CompileOutput:
    nvcc = find_nvcc()
    if nvcc is None:
        raise CompileError("nvcc not found: put it on PATH or set KERNELPACK_NVCC / CUDA_HOME")
    # Taking each name expression's address in host code instantiates templates for the device pass; a probe
    # kernel per expression takes the kernel's address as a template argument, so the probe's mangled name holds
    # the kernel's own (nvcc has no nvrtcGetLoweredName; demangled spellings differ: half vs __half, 8 vs 8u).
    refs = ""
    if exprs:
        refs = _NVCC_LOWER + "void* __kp_name_refs[] = {" + ", ".join(
            f"(void*)&{e}, (void*)&__kp_lower<{i}, &{e}>" for i, e in enumerate(exprs)) + "};"
    with tempfile.TemporaryDirectory(prefix="kernelpack-nvcc-") as tmp:
        src = Path(tmp) / Path(filename).with_suffix(".cu").name
        src.write_text(source + "\n" + refs + "\n")
        out = Path(tmp) / ("out.ptx" if arch.virtual else "out.cubin")
        cmd = [nvcc, "-ptx" if arch.virtual else "-cubin", f"-arch={arch}", "-O3", *options.common_flags(),
               *options.extra, "-o", str(out), str(src)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ))
        except (OSError, subprocess.SubprocessError) as e:
            raise CompileError(f"cannot run {nvcc}: {e}") from None
        log = (proc.stdout + proc.stderr).strip()
        version = backend_version("nvcc")
        if proc.returncode != 0 or not out.is_file():
            raise CompileError(f"{version} failed to compile {filename} for {arch}: {' '.join(cmd)}", log=log)
        data = out.read_bytes()
        if arch.virtual:  # PTX: names come from the cubin built beside it for the same SM
            return CompileOutput(data.rstrip(b"\0"), dict.fromkeys(exprs, ""), log, version)
        return CompileOutput(data, _lowered_from_probes(data, exprs), log, version)


_NVCC_LOWER = "template <int I, auto F> __global__ void __kp_lower() {}\n"


def _lowered_from_probes(cubin: bytes, exprs: Sequence[str]) -> dict[str, str]:
    """Each expression's kernel symbol, read from the mangled name of its ``__kp_lower<i, &kernel>`` probe
    (``_Z10__kp_lowerILi<i>EXadL<symbol>EEEvv``); "" where no probe says (the caller matches demangled names)."""
    from ...core.cubin import read_cubin

    try:
        names = [k.name for k in read_cubin(cubin).kernels]
    except Exception:  # noqa: BLE001 - the caller reports an unreadable cubin
        return dict.fromkeys(exprs, "")
    out = {}
    for i, e in enumerate(exprs):
        probes = [_unsubstituted(n) for n in names if n.startswith(f"_Z10__kp_lowerILi{i}E")]
        hits = [n for n in names
                if not n.startswith("_Z10__kp_lower") and probes and f"L{_unsubstituted(n)}E" in probes[0]]
        out[e] = hits[0] if len(hits) == 1 else ""
    return out


def _unsubstituted(symbol: str) -> str:
    """``symbol`` with its substitution references (``S_``, ``S0_``, ``S1A_``...) made alike: inside the probe's
    mangled name the kernel's own name numbers them from the probe's components (``PT0_S4_`` becomes ``PT0_S5_``)."""
    return re.sub(r"S[0-9A-Z]*_", "S_", symbol)
