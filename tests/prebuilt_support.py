"""Binaries a team's own nvcc build would produce, for the prebuilt frontend's tests: one source
(tests/prebuilt_kernels.cu) built as fatbins under every compression mode, per-arch cubins, a host object, a shared
library with two translation units, and a relocatable (-rdc) fatbin. Built once per session (nvcc runs in parallel)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolchain_support import NVCC

HERE = Path(__file__).parent
SOURCE = HERE / "prebuilt_kernels.cu"
GENCODE = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90a,code=sm_90a",
           "-gencode", "arch=compute_90,code=compute_90"]
MODES = ("default", "size", "speed", "none")  # nvcc -compress-mode

# the C parameter lists of the extern "C" kernels, as a team would write them next to their build
PARAMS = {
    "add": "const float* x, const float* y, float* out, int n",
    "axpy": "float a, const float* x, float* y, long long n",
    "scale_half": "__half s, __half* x, unsigned n",
    "pair": "Pair p, float* out",
    "mixed": "bool on, unsigned char c, short s, double d, size_t n, float* out",
}
FILL_F32, FILL_I32 = "_Z4fillIfEvPT_ii", "_Z4fillIiEvPT_ii"


@dataclass(frozen=True)
class Built:
    root: Path

    def fatbin(self, mode: str = "default") -> Path:
        """``nvcc -fatbin`` for sm_80, sm_90a and compute_90 (mode default); the other modes repack the same cubins
        and PTX with the fatbinary nvcc runs (``-compress-mode=size|speed|none``)."""
        return self.root / f"kernels_{mode}.fatbin"

    def cubin(self, arch: str) -> Path:
        return self.root / f"kernels_{arch}.cubin"

    @property
    def ptx90(self) -> Path:
        return self.root / "kernels_90.ptx"

    @property
    def obj(self) -> Path:
        """``nvcc -c -arch=sm_80``: a host object whose .nv_fatbin holds sm_80 SASS and compute_80 PTX."""
        return self.root / "kernels.o"

    @property
    def shared(self) -> Path:
        """A shared library of two translation units: kernels.o (sm_80) and one with ``neg`` (sm_90a)."""
        return self.root / "libtwo.so"

    @property
    def rdc(self) -> Path:
        return self.root / "rdc.cubin"


def build(out: Path) -> Built:
    """Every binary, compiled with the nvcc here."""
    if not Path(NVCC).exists():
        pytest.skip("nvcc not available to build the prebuilt binaries")
    out.mkdir(parents=True, exist_ok=True)
    other = out / "other.cu"
    other.write_text('extern "C" __global__ void neg(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = -y[i]; }'
                     "\n")
    src = str(SOURCE)
    cmds = [[NVCC, "-fatbin", *GENCODE, src, "-o", str(out / "kernels_default.fatbin")],
            [NVCC, "-cubin", "-arch=sm_80", src, "-o", str(out / "kernels_sm_80.cubin")],
            [NVCC, "-cubin", "-arch=sm_90a", src, "-o", str(out / "kernels_sm_90a.cubin")],
            [NVCC, "-ptx", "-arch=compute_90", src, "-o", str(out / "kernels_90.ptx")],
            [NVCC, "-c", "-Xcompiler", "-fPIC", "-arch=sm_80", src, "-o", str(out / "kernels.o")],
            [NVCC, "-c", "-Xcompiler", "-fPIC", "-arch=sm_90a", str(other), "-o", str(out / "other.o")],
            [NVCC, "-cubin", "-rdc=true", "-arch=sm_80", src, "-o", str(out / "rdc.cubin")]]
    _run_all(cmds)
    fatbinary = str(Path(NVCC).parent / "fatbinary")
    images = [f"--image3=kind=elf,sm=80,file={out / 'kernels_sm_80.cubin'}",
              f"--image3=kind=elf,sm=90a,file={out / 'kernels_sm_90a.cubin'}",
              f"--image3=kind=ptx,sm=90,file={out / 'kernels_90.ptx'}"]
    _run_all([[fatbinary, f"--create={out / f'kernels_{m}.fatbin'}", "-64", *images, f"--compress-mode={m}"]
              for m in MODES if m != "default"]
             + [[NVCC, "-shared", str(out / "kernels.o"), str(out / "other.o"), "-o", str(out / "libtwo.so")]])
    return Built(out)


def _run_all(cmds: list[list[str]]) -> None:
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for c in cmds]
    for c, p in zip(cmds, procs):
        log = p.communicate()[0]
        assert p.returncode == 0, f"{' '.join(c)}\n{log.decode(errors='replace')}"


_BUILT: list[Built] = []


def session_binaries(tmp_path_factory: pytest.TempPathFactory) -> Built:
    if not _BUILT:
        _BUILT.append(build(tmp_path_factory.mktemp("prebuilt")))
    return _BUILT[0]
