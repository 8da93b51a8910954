"""The interpreter's shared one-character objects survive compiling and launching.

CPython keeps one immortal object per one-byte ``bytes`` and per one-character ``str`` (``b" " * 1`` and
``b"x "[1:]`` are that object). A C function that writes into such an object changes the constant for the whole
process. It happened: NVRTC wrote the NUL of an empty compile log into ``b" " * 1``; Python 3.12's parser builds
one-character f-string parts from that very object, so every module compiled afterwards lost its ``" "`` parts
(``f"{type} {name}"`` became ``int32_tn`` in a generated C header and ``Tensora`` in a torch schema).

``runtime_support.assert_singletons_intact`` is the check; ``test_runtime_launch.py`` runs it after every
test too.
"""

from __future__ import annotations

import sys

import pytest

from kernelpack.core.arch import Arch
from kernelpack.frontends.cuda.toolkit import CudaOptions, compile_cubin, nvrtc_available
from runtime_support import assert_singletons_intact
from toolchain_support import needs_nvrtc

CLEAN_KERNEL = 'extern "C" __global__ void kp_clean(float* x) { x[threadIdx.x] = 1.0f; }\n'


@needs_nvrtc
def test_nvrtc_compile_with_an_empty_log_leaves_the_byte_singletons_intact():
    out = compile_cubin(CLEAN_KERNEL, Arch.parse("sm_90a"), CudaOptions(), [], "nvrtc")
    assert out.cubin[:4] == b"\x7fELF" and out.log == ""
    assert_singletons_intact()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="the parser reads f-string parts from bytes since 3.12")
def test_a_module_compiled_after_an_nvrtc_compile_keeps_its_spaces():
    if nvrtc_available():
        compile_cubin(CLEAN_KERNEL, Arch.parse("sm_80"), CudaOptions(), [], "nvrtc")
    ns: dict[str, object] = {}
    exec(compile('def decl(t, n):\n    return f"{t} {n}"\n', "<decl>", "exec"), ns)
    assert ns["decl"]("int32_t", "n") == "int32_t n"  # type: ignore[operator]
