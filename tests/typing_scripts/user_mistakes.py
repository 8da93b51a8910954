"""Mistakes a type checker must see in a user's script (never run): tests/test_typing.py expects each line marked
``# error: CODE`` to be reported with that code, and no other."""

from __future__ import annotations

import kernelpack


def mistakes() -> None:
    mod = kernelpack.load("k.kpack")
    mod.axpy(2.0, grid=1, block="256")  # error: arg-type
    mod.axpy(2.0, grid=1, smem=1.5)  # error: arg-type
    n: int = mod.axpy.binary_for("sm_90")  # error: assignment
    kernelpack.load(42)  # error: arg-type
    print(kernelpack.cuda.compile("k.cu", ["k"], arch=["sm_90a"]).nope)  # error: attr-defined
    print(kernelpack.cute.export(print, arch="sm_90a").nope)  # error: attr-defined
    print(n)
