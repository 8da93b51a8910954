"""Native parts of kernelpack, built at install time (metadata lives in pyproject.toml).

* ``kernelpack.runtime._launch`` -- the fast launch path, plain C, built for the running CPython: it reads int and
  float arguments inline (CPython's compact ints), ~27 instructions per scalar argument fewer than through the
  limited API's calls (docs/benchmarks.md). ``KERNELPACK_BUILD_ABI3=1`` builds it with the limited API (abi3, one
  binary for CPython >= 3.12) instead. Optional: without it the runtime falls back to its pure-Python path and says
  so once.
* ``kernelpack.runtime._wheel_launch`` -- the same source built with the limited API of CPython 3.10
  (``_wheel_launch.abi3.so``, its module named ``_launch``: one binary for every CPython >= 3.10, vectorcall where
  the interpreter is 3.12 or newer). It is not imported here: ``kernelpack wheel`` puts it into the runtime each
  generated wheel carries (docs/wheels.md).
  Optional: without it wheels carry the pure-Python path and say so.
* ``kernelpack.runtime._dryrun`` -- kernelpack's dry-run CUDA driver (a plain shared library opened with dlopen,
  never imported; docs/testing.md). Optional: without it the runtime builds it on first use with the C compiler.
* ``kernelpack.runtime._torch_bridge`` -- C++ against the torch found at build time (``pip install
  --no-build-isolation`` so the build sees it), letting the C path read torch tensors and torch's current stream
  without calling Python. Optional; used only with the torch version it was built for. Set
  ``KERNELPACK_BUILD_TORCH_BRIDGE=0`` to skip it.

In a checkout: ``python setup.py build_ext --inplace``.
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup

RUNTIME = "src/kernelpack/runtime"
CSRC = "src/kernelpack/csrc"  # kp_model.h: the launch model both back ends include
LIMITED = (os.environ.get("KERNELPACK_BUILD_ABI3", "0") == "1" and sys.version_info >= (3, 12)
           and not sysconfig.get_config_var("Py_GIL_DISABLED"))


# the launch extension carries kernelpack's version; the runtime refuses an extension of another (runtime/fast.py)
VERSION = re.search(r'__version__ = "([^"]+)"', Path("src/kernelpack/core/version.py").read_text())[1]
WHEEL_ABI3 = 0x030A0000  # the limited API of the generated wheels' runtime: kernelpack/wheel/runtime.py ABI3_PYTHON


# _launch.c is the extension's one translation unit: it includes _launch.h and its parts (_launch_*.c, in order), and
# is the only file compiled (a unity build: the parts are never compiled on their own)
LAUNCH_SOURCE = f"{RUNTIME}/_launch.c"


def launch_extension(name: str = "kernelpack.runtime._launch", limited: int | None = None,
                     source: str = LAUNCH_SOURCE) -> Extension:
    """The launch extension: version-specific, or for the limited API of CPython ``limited`` (0x030C0000: 3.12)."""
    # what the build reads besides the source: a change to any of them rebuilds it (and an sdist carries them)
    depends = sorted(str(p) for p in [*Path(RUNTIME).glob("_launch*.c"), *Path(RUNTIME).glob("*.h")])
    macros = [("KP_VERSION", f'"{VERSION}"')]
    return Extension(
        name,
        [source],
        depends=[*depends, f"{CSRC}/kp_model.h"],
        include_dirs=[RUNTIME, CSRC],
        define_macros=macros + ([("Py_LIMITED_API", hex(limited))] if limited else []),
        py_limited_api=limited is not None,
        extra_compile_args=["-O2", "-std=c11", "-fvisibility=hidden", "-Wall", "-Wno-missing-braces"],
        optional=True,
    )


def _cuda_include(torch_dir: Path) -> str | None:
    candidates = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    site = torch_dir.parent
    candidates += [str(p.parent) for p in site.glob("nvidia/*/include/cuda_runtime_api.h")]
    for c in candidates:
        inc = Path(c) / "include" if c and not c.endswith("include") else Path(c)
        if c and (inc / "cuda_runtime_api.h").is_file():
            return str(inc)
    return None


def torch_bridge_extension() -> Extension | None:
    if os.environ.get("KERNELPACK_BUILD_TORCH_BRIDGE", "1") == "0":
        return None
    try:
        import torch
        from torch.utils import cpp_extension
    except Exception:  # noqa: BLE001 - no usable torch at build time: no bridge
        return None
    torch_dir = Path(torch.__file__).parent
    lib_dir = torch_dir / "lib"
    libs = ["c10", "torch", "torch_cpu", "torch_python"]
    macros = [("KP_TORCH_VERSION", f'"{torch.__version__}"'),
              ("_GLIBCXX_USE_CXX11_ABI", str(int(torch._C._GLIBCXX_USE_CXX11_ABI)))]
    includes = [*cpp_extension.include_paths(), RUNTIME, CSRC]
    cuda_inc = _cuda_include(torch_dir) if torch.version.cuda else None
    if cuda_inc and (lib_dir / "libc10_cuda.so").exists() and (torch_dir / "include/c10/cuda/CUDAStream.h").exists():
        macros.append(("KP_TORCH_CUDA", "1"))
        includes.append(cuda_inc)
        libs.append("c10_cuda")
    return Extension(
        "kernelpack.runtime._torch_bridge",
        [f"{RUNTIME}/_torch_bridge.cpp"],
        include_dirs=includes,
        define_macros=macros,
        library_dirs=[str(lib_dir)],
        runtime_library_dirs=[str(lib_dir)],
        libraries=libs,
        extra_compile_args=["-O2", "-std=c++17", "-fvisibility=hidden", "-w"],
        language="c++",
        optional=True,
    )


def dryrun_driver() -> Extension:
    """kernelpack's dry-run CUDA driver (runtime/_dryrun.c): a plain shared library the runtime and C programs open
    with dlopen, built here as if it were an extension module so that wheels carry it (runtime/dryrun.py builds it
    on first use where it was not)."""
    parts = sorted(str(p) for p in Path(RUNTIME).glob("_dryrun_*.c"))
    return Extension(
        "kernelpack.runtime._dryrun",
        [f"{RUNTIME}/_dryrun.c"],
        depends=parts,
        define_macros=[("KP_DRYRUN_PYINIT", "PyInit__dryrun")],
        libraries=["pthread"],
        extra_compile_args=["-O1", "-std=c99", "-fvisibility=hidden", "-Wall"],
        optional=True,
    )


extensions = [launch_extension(limited=0x030C0000 if LIMITED else None), dryrun_driver()]
if not sysconfig.get_config_var("Py_GIL_DISABLED") and os.environ.get("KERNELPACK_BUILD_WHEEL_RUNTIME", "1") != "0":
    extensions.append(launch_extension("kernelpack.runtime._wheel_launch", WHEEL_ABI3,
                                       f"{RUNTIME}/_wheel_launch.c"))
bridge = torch_bridge_extension()
if bridge is not None:
    extensions.append(bridge)

setup(ext_modules=extensions)
