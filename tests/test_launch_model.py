"""The launch model (kernelpack/launch/) is the one source of the facts both back ends need: the generated C header
matches it, it matches the real cuda.h, C and Python apply its rules alike, and no hand-written source restates
one of its facts."""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import pytest

from kernelpack.core.arch import Arch
from kernelpack.launch import binaries, codes, header
from toolchain_support import CC, CXX

SRC = Path(__file__).resolve().parents[1] / "src" / "kernelpack"
CSRC = SRC / "csrc"


def test_generated_header_is_up_to_date():
    committed = (CSRC / header.NAME).read_text()
    assert committed == header.render(), (
        "csrc/kp_model.h drifted from kernelpack/launch/: regenerate it with `python -m kernelpack.launch.header`")


def test_model_values_match_the_real_cuda_h(tmp_path):
    inc = Path("/usr/local/cuda/include")
    if not (inc / "cuda.h").exists():
        pytest.skip("no cuda.h to compare with")
    checks = [f"KP_{n} == {n}" for n in codes.CUDA_RESULTS]
    for prefix, table in (("CU_DEVICE_ATTRIBUTE_", codes.DEVICE_ATTRIBUTES),
                          ("CU_FUNC_ATTRIBUTE_", codes.FUNC_ATTRIBUTES),
                          ("CU_POINTER_ATTRIBUTE_", codes.POINTER_ATTRIBUTES),
                          ("CU_LAUNCH_ATTRIBUTE_", codes.LAUNCH_ATTRIBUTES)):
        checks += [f"KP_{prefix}{n} == {prefix}{n}" for n in table]
    checks += ["sizeof(kp_CUlaunchAttribute) == sizeof(CUlaunchAttribute)",
               "sizeof(kp_CUlaunchConfig) == sizeof(CUlaunchConfig)",
               "offsetof(kp_CUlaunchConfig, attrs) == offsetof(CUlaunchConfig, attrs)",
               "offsetof(kp_CUlaunchConfig, numAttrs) == offsetof(CUlaunchConfig, numAttrs)",
               f"CUDA_VERSION >= {codes.CUDA_API_VERSION}"]
    src = tmp_path / "check.c"
    src.write_text('#include <cuda.h>\n#include "kp_cuda.h"\n' + "".join(
        f'_Static_assert({c}, "{c}");\n' for c in checks))
    subprocess.run([CC, "-std=c11", "-fsyntax-only", "-Wall", "-Werror", f"-I{inc}", f"-I{CSRC}", str(src)],
                   check=True)


def test_c_and_python_choose_binaries_alike(tmp_path):
    """kp_bin_rule_quality (C: the C library, the CuTe host entries) against binaries.quality (the runtime) for
    every binary kind x device from sm_50 to sm_121."""
    archs = [(ma, mi) for ma in (5, 6, 7, 8, 9, 10, 11, 12) for mi in range(0, 10, 3 if ma != 8 else 1)]
    cases = [(ptx, ma, mi, suf, dma, dmi) for ptx in (0, 1) for (ma, mi) in archs for suf in ("", "a", "f")
             for (dma, dmi) in archs]
    src = tmp_path / "q.c"
    rows = ",\n".join(f"{{{p}, {a}, {b}, {header._char(s)}, {c}, {d}}}" for p, a, b, s, c, d in cases)
    src.write_text(f'#include <stdio.h>\n#include "kp_model.h"\nstatic const int T[][6] = {{\n{rows}\n}};\n'
                   "int main(void) {\n  for (unsigned i = 0; i < sizeof T / sizeof T[0]; i++)\n"
                   "    printf(\"%d\\n\", kp_bin_rule_quality(T[i][0], T[i][1], T[i][2], (char)T[i][3], T[i][4], "
                   "T[i][5]));\n  return 0;\n}\n")
    exe = tmp_path / "q"
    subprocess.run([CC, "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{CSRC}", str(src), "-o", str(exe)], check=True)
    got = [int(x) for x in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]
    want = [binaries.quality(Arch(a, b, s), bool(p), c, d) for p, a, b, s, c, d in cases]
    assert got == want
    assert sum(q > 0 for q in want) > len(cases) // 10  # the grid exercises every row of the rule


def test_binary_rule_follows_the_compatibility_rules():
    q = binaries.quality
    assert q(Arch.parse("sm_90a"), False, 9, 0) > q(Arch.parse("sm_90"), False, 9, 0) > q(Arch.parse("sm_80"), False,
                                                                                          9, 0) == 0
    assert q(Arch.parse("sm_80"), False, 8, 6) > q(Arch.parse("sm_80"), True, 8, 6) > 0  # SASS before PTX
    assert q(Arch.parse("sm_86"), False, 8, 6) > q(Arch.parse("sm_80"), False, 8, 6)  # the newest minor first
    assert q(Arch.parse("sm_90a"), False, 10, 0) == 0 and q(Arch.parse("sm_90"), True, 10, 0) > 0  # PTX JITs upward
    assert q(Arch.parse("sm_90a"), True, 10, 0) == 0  # arch-specific PTX: that arch only
    assert q(Arch.parse("sm_90"), True, 12, 0) > q(Arch.parse("sm_80"), True, 12, 0)  # the newest PTX first
    assert q(Arch.parse("sm_100f"), False, 10, 3) > 0 and q(Arch.parse("sm_100f"), False, 11, 0) == 0  # family
    assert q(Arch.parse("sm_100f"), True, 10, 3) > 0 and q(Arch.parse("sm_100f"), True, 12, 0) == 0  # family PTX
    assert q(Arch.parse("sm_100a"), False, 10, 3) == 0 and q(Arch.parse("sm_100a"), False, 10, 0) > 0
    assert binaries.best([(Arch.parse("sm_90a"), False), (Arch.parse("sm_80"), True)], 10, 0) == 1  # PTX fallback
    assert binaries.best([(Arch.parse("sm_90a"), False)], 10, 0) is None


def test_public_dtype_enum_is_the_model_numbering(tmp_path):
    from kernelpack.clib.cdecl import common_header

    src = tmp_path / "d.c"
    src.write_text("#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n" + common_header()
                   + '#include "kp_model.h"\n'
                   + "".join(f'_Static_assert({codes.dtype_enum_name(d)} == KP_DT_{d.value.upper()}, "{d.value}");\n'
                             for d in codes.DTYPES))
    subprocess.run([CC, "-std=c11", "-fsyntax-only", "-Wall", "-Werror", f"-I{CSRC}", str(src)], check=True)


# facts of the model that no hand-written source may spell as a literal (the generated header excepted)
_C_RESTATED = re.compile(r"\b(49152|201|0x7fffffff|2147483647|65535)\b|#define\s+KP_(MAX_DEVICES|SMEM_DEFAULT|DYN\b|"
                         r"CUDA_(SUCCESS|ERROR|API)|CU_|MAX_RANK|MAX_PORTABLE_CLUSTER)|\benum\s*\{\s*(DT_|OP_|G_)")
_PY_RESTATED = re.compile(r"48 \* 1024|\b49152\b|= 201\b|\(1, 2, 3, 4\)|status == \d|\bDTYPE_CODE = \{|"
                          r"\bMAX_PORTABLE_CLUSTER = \d|\bATTR_\w+ = \d|"
                          r"\b(99|163|227) \* 1024\b|\b(101376|166912|232448)\b|\bSmLimits\(")  # per-arch limits


def test_no_hand_written_source_restates_a_model_fact():
    c_files = [*CSRC.glob("*.[ch]"), *(SRC / "runtime").glob("*.[ch]"), *(SRC / "runtime").glob("*.cpp"),
               *(SRC / "cute_host").glob("*.c")]
    bad = []
    for f in c_files:
        # the dry-run driver (runtime/_dryrun*.c) stands for NVIDIA's driver: it states the driver's facts itself,
        # independently of kernelpack's model, so that a wrong model fact is caught by it rather than shared with it
        if f.name == header.NAME or f.name.startswith("_dryrun"):
            continue
        for i, line in enumerate(f.read_text().splitlines(), 1):
            code = line.split("//")[0]
            if _C_RESTATED.search(code) and "/*" not in code[:code.find(_C_RESTATED.search(code).group(0))]:
                bad.append(f"{f.relative_to(SRC)}:{i}: {line.strip()}")
    for f in SRC.rglob("*.py"):
        if f.parent.name == "launch":
            continue
        for i, line in enumerate(f.read_text().splitlines(), 1):
            if _PY_RESTATED.search(line.split("#")[0]):
                bad.append(f"{f.relative_to(SRC)}:{i}: {line.strip()}")
    assert not bad, "facts of the launch model restated outside it:\n" + "\n".join(bad)


def test_model_header_compiles_standalone_as_c99_and_cpp17(tmp_path):
    for compiler, std, ext in ((CC, "-std=c99", "c"), (CXX, "-std=c++17", "cpp")):
        src = tmp_path / f"m.{ext}"
        src.write_text('#include "kp_model.h"\n#include "kp_cuda.h"\nint use(void);\nint use(void) { return '
                       'kp_bin_rule_quality(0, 9, 0, 0, 9, 0); }\n')
        subprocess.run([compiler, std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-c", f"-I{CSRC}", str(src), "-o",
                        str(tmp_path / f"m_{ext}.o")], check=True)


def test_statuses_name_a_runtime_exception_which_names_the_status():
    from kernelpack.runtime.errors import DriverError, error_for_status

    names = {s.name for s in codes.STATUS}
    assert len(names) == len(codes.STATUS) and sorted(s.value for s in codes.STATUS) == list(range(len(codes.STATUS)))
    for s in codes.STATUS[1:]:
        cls = error_for_status(s.value)
        assert cls.__name__ == s.python, s.name
        if cls is DriverError:
            assert DriverError("x", status=s.value).status == s.value
        elif s.python not in ("BundleError", "MemoryError"):
            assert cls.status == s.value, s.name


def test_every_combination_of_dtype_codes_is_distinct():
    assert len(set(codes.DTYPE_CODE.values())) == len(codes.DTYPES)
    assert list(itertools.accumulate([1] * len(codes.DTYPES))) == [codes.DTYPE_CODE[d] for d in codes.DTYPES]


def test_bind_constexprs_puts_the_constexpr_in_text_and_tuple_formulas_alike() -> None:
    from kernelpack.core.errors import KernelpackError
    from kernelpack.core.launchspec import bind_constexprs

    consts = {"BLOCK": 64, "SCALE": 1.5}
    assert bind_constexprs("ceil_div(n, BLOCK)", consts) == ("ceil_div", ("arg", "n", None), 64)
    assert bind_constexprs(("ceil_div", ("arg", "n", None), "BLOCK"), consts) == ["ceil_div", ("arg", "n", None), 64]
    assert bind_constexprs(1, consts) == 1
    with pytest.raises(KernelpackError, match="names 'BLOK', which is no integer constexpr.*did you mean 'BLOCK'"):
        bind_constexprs(("mul", 2, "BLOK"), consts)
    with pytest.raises(KernelpackError, match="constexpr SCALE is 1.5, not an integer"):
        bind_constexprs("ceil_div(n, SCALE)", consts)
