"""A family whose specializations each fix their block -- a Triton family of configs with different num_warps --
takes no ``block``: its signature, help() and wheel stub say ``block=None``, and a call without one launches the
chosen specialization's own block (issue 30, item 7: the docs said "callers give only the grid" while the stub
demanded a block). The stub names every launch option, ``pdl`` and ``cooperative`` too. GPU-less (the fake
driver)."""

from __future__ import annotations

import pytest

import kernelpack
from kernelpack.bundle.kpack import Bundle


@pytest.fixture(scope="module")
def configs(module_cache: object) -> Bundle:
    pytest.importorskip("triton")
    import kernelpack.triton as kt
    from triton_kernels import add_kernel

    return kt.compile(add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                      constexprs={"BLOCK": 1024}, arch=["sm_90a"], name="add",
                      specializations=[{"variant": "w4", "num_warps": 4},
                                       {"variant": "w8", "num_warps": 8, "divisibility": "all"}])


def test_a_family_of_configs_takes_no_block(configs: Bundle, fake) -> None:
    from kernelpack.runtime import docs
    from kernelpack.wheel.package import _family_stub

    mod = kernelpack.load(configs)
    fam = mod.add.family
    assert "grid, block=None, smem=None" in docs.signature_text(fam)
    stub = "\n".join(_family_stub("add", fam, "kp", "add"))
    assert "block: kp.Dim3 | None = None" in stub
    assert "pdl: kp.Bool | None = None" in stub and "cooperative: kp.Bool | None = None" in stub
    mod.add(0x1000, 0x2000, 0x3000, 64, grid=1)  # aligned, n % 16 == 0: w8
    mod.add(0x1004, 0x2000, 0x3000, 64, grid=1)  # unaligned: w4
    assert [x["block"] for x in fake.launches()] == [(256, 1, 1), (128, 1, 1)]
