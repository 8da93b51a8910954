"""``kernelpack demo``: compile the example kernels for several archs, bundle them, inspect the bundle.

Runs on a machine with no GPU: compiling needs only NVRTC (``pip install 'kernelpack[nvrtc]'``) or nvcc.
"""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

from rich.console import Console

DEFAULT_ARCHS = ("sm_80", "sm_90a")
EXAMPLE_KERNELS = {
    "vector_ops.cu": ["axpy", "scale<float>", "scale<__half>", "scale<double>", "row_sum", "affine"],
}


def example_path(name: str) -> Path:
    return Path(str(resources.files("kernelpack").joinpath("examples").joinpath(name)))


def compile_examples(archs: tuple[str, ...] | list[str] = DEFAULT_ARCHS):  # type: ignore[no-untyped-def]
    """All example kernels as one bundle."""
    from ..bundle.kpack import Bundle
    from ..frontends.cuda import compile as cuda

    return Bundle.of(*(cuda.compile(example_path(f), names, arch=list(archs), options=["-O3"])
                       for f, names in EXAMPLE_KERNELS.items()))


def run_demo(out: str | Path, archs: list[str] | None = None) -> int:
    from .describe import describe
    from .render import render

    console = Console()
    out = Path(out)
    archs = archs or list(DEFAULT_ARCHS)
    t0 = time.perf_counter()
    bundle = compile_examples(archs)
    path = bundle.write(out / "demo.kpack")
    console.print(f"[green]compiled[/] {len(bundle)} kernel specializations for {', '.join(archs)} "
                  f"in {time.perf_counter() - t0:.2f} s -> {path} ({path.stat().st_size} bytes)")
    render(describe(bundle))
    try:
        from ..clib import build_library
    except ImportError:
        return 0
    t0 = time.perf_counter()
    result = build_library("kpdemo", [path], out / "lib")
    console.print(f"[green]built[/] the C/C++ library in {time.perf_counter() - t0:.2f} s (needs only libc, libdl and "
                  f"the NVIDIA driver at run time):")
    outputs = (("shared", result.shared), ("static", result.static), ("C header", result.header),
               ("C++ header", result.cpp_header), ("CMake", result.cmake_config), ("pkg-config", result.pkgconfig))
    for label, p in outputs:
        size = f" ({p.stat().st_size} bytes)" if label in ("shared", "static") else ""
        console.print(f"  {label:<10} {p}{size}")
    return 0
