"""Check a typed ABI against the parameter table a cubin records for its kernel entry."""

from __future__ import annotations

from .abi import Abi
from .arch import Arch
from .cubin import CubinKernel
from .errors import AbiMismatch


def verify_abi(kernel: str, abi: Abi, ck: CubinKernel, arch: Arch) -> None:
    """Raise AbiMismatch unless ``abi`` has the cubin's param count, order, sizes and offsets.

    Offsets are computed with the cubin's own parameter base: alignment applies to the absolute
    constant-bank address, so the same ABI can sit at different offsets on different archs.
    """
    where = f"kernel {kernel} ({arch})"
    if len(abi.params) != len(ck.params):
        raise AbiMismatch(
            f"{where}: the ABI has {len(abi.params)} parameters ({abi.describe() or 'none'}) "
            f"but the cubin entry {ck.name} has {len(ck.params)} "
            f"(sizes {[p.size for p in ck.params]})"
        )
    offsets = abi.offsets(ck.param_base)
    for i, (p, kp, off) in enumerate(zip(abi.params, ck.params, offsets)):
        if p.type.size != kp.size:
            raise AbiMismatch(
                f"{where}: parameter {i} '{p.name}' ({p.type.c_type}): expected {p.type.size} bytes, "
                f"the cubin has {kp.size} bytes"
            )
        if off != kp.offset:
            raise AbiMismatch(
                f"{where}: parameter {i} '{p.name}' ({p.type.c_type}, align {p.type.align}): expected offset "
                f"{off}, the cubin has offset {kp.offset}"
            )
    if ck.params and ck.param_bytes and abi.param_bytes(ck.param_base) > ck.param_bytes:
        raise AbiMismatch(
            f"{where}: the ABI needs {abi.param_bytes(ck.param_base)} parameter bytes, the cubin has {ck.param_bytes}"
        )
