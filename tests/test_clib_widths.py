"""A generated library holds each integer its bundle gives as a C type: kp_bin_launch's 32-bit block, cluster and
dynamic shared memory, int64 literals for divisibilities and device
requirements (clib/widths.py). A bundle is data: anyone can write one with consistent hashes. A value its field cannot
hold is refused before any file is written, naming the kernel and the field; before, the compiler truncated the
literal (a warning at most) and the library launched with what the bundle did not say."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

import fuzz_support as fz
from kernelpack.bundle.artifact import deferred_verification
from kernelpack.bundle.kpack import Bundle
from kernelpack.clib.generate import generate  # the function (kernelpack.clib.generate is also the module)
from kernelpack.core.errors import KernelpackError

Edit = Callable[[dict[str, Any]], None]


def _launch(key: str, value: Any) -> Edit:
    return lambda a: a["launch"].__setitem__(key, value)


# (edit of kernel add's manifest entry, what the error names): each value was generated as a truncated literal
U32 = r"uint32_t \(0..4294967295\)"
I64 = r"int64_t \(-9223372036854775808..9223372036854775807\)"
TOO_WIDE: dict[str, tuple[Edit, str]] = {
    "dynamic_smem": (_launch("dynamic_smem", 2**32 + 16), r"LaunchSpec.dynamic_smem is 4294967312; a generated "
                                                          r"library holds it as " + U32),
    "block": (_launch("block", [2**32 + 32, 1, 1]), r"LaunchSpec.block is 4294967328; .* " + U32),
    "cluster": (_launch("cluster", [2**32 + 2, 1, 1]), r"LaunchSpec.cluster is 4294967298; .* " + U32),
    "requirement": (lambda a: a.__setitem__("requires", {"sm_count": 2**64 + 132}),
                    r"device requirement sm_count is 18446744073709551748; .* " + I64),
    "divisibility": (lambda a: a["abi"][3].__setitem__("divisibility", 2**64 + 4),
                     r"parameter 'n': its divisibility is 18446744073709551620; .* int64_t \(1..9223372036854775807\)"),
}


def _forged(bundle: Bundle, edit: Edit) -> Bundle:
    manifest = fz.manifest_of(bundle.to_bytes())
    m = copy.deepcopy(manifest)
    edit(next(a for a in m["artifacts"] if a["name"] == "add"))
    with deferred_verification():  # as kernelpack.load reads a bundle: the cubins (and their limits) left for later
        return Bundle.from_bytes(fz.repack(bundle.to_bytes(), m, 2))


@pytest.mark.parametrize("case", sorted(TOO_WIDE))
def test_an_integer_its_c_field_cannot_hold_is_refused_naming_kernel_and_field(runtime_bundle, case):
    edit, message = TOO_WIDE[case]
    with pytest.raises(KernelpackError, match=r"kernel add: " + message + r": the bundle is malformed"):
        generate("w", _forged(runtime_bundle, edit))


def test_wide_values_that_fit_their_fields_are_generated_as_they_are(runtime_bundle):
    src = generate("w", _forged(runtime_bundle, lambda a: (a["abi"][3].__setitem__("divisibility", 2**40),
                                                           a["launch"].__setitem__("dynamic_smem", 2**32 - 1))))
    assert "n % 1099511627776 == 0" in src.tu and "4294967295u" in src.tu
