"""A cuTile kernel that tileiras fails to compile: the CompileError names the kernel and the arch and carries what
tileiras said -- its stderr, its remarks (tileiras run again on cuTile's bytecode with ``--remarks=all``), and the
cause behind return code 5 where kernelpack can tell it (parameters beyond what a CUDA kernel may take) -- where
cuTile's own error says only ``CompilerExecutionError: Return code 5``."""

from __future__ import annotations

import pytest

ct = pytest.importorskip("cuda.tile")

import kernelpack.frontends.cutile.compile as kc  # noqa: E402
from cutile_list_kernels import TOO_MANY, first_of_many  # noqa: E402
from kernelpack.core.errors import CompileError  # noqa: E402
from kernelpack.frontends.cutile.diagnose import _flags  # noqa: E402


def test_a_tileiras_failure_carries_tileiras_own_diagnostics(module_cache):
    with pytest.raises(CompileError) as info:
        kc.compile(first_of_many, TOO_MANY, arch="sm_90a", cache=module_cache)
    e = info.value
    assert e.message.startswith("kernel first_of_many (sm_90a): tileiras failed (return code 5): failed to compile "
                                "Tile IR program; the kernel's parameters take 32816 bytes, more than the 32764 a "
                                "CUDA kernel may take"), e.message
    assert "tileiras' remarks are in the log (" in e.message
    log = e.log
    assert "tileiras run again for its remarks: tileiras " in log and "--remarks=all" in log
    assert "return code 5" in log and "error: failed to compile Tile IR program" in log
    assert "stdout (remarks):\nin function: first_of_many:" in log
    assert "remark[" in log and "cutile_list_kernels.py" in log  # each remark at its source line
    assert "CompilerExecutionError" in log  # cuTile's own error follows


def test_cuTiles_remark_options_make_way_for_ours():
    flags = _flags("--gpu-name sm_90 -O3 --lineinfo --remark-format=yaml --remarks=all "
                   "--remarks-output-file=/tmp/x.remarks.yaml", "sm_90")
    assert flags == ["--gpu-name", "sm_90", "-O3", "--lineinfo"]
    assert _flags("", "sm_100") == ["--gpu-name", "sm_100"]
