"""``csrc/kp_model.h``: the launch model rendered as one C header, included by the C library's runtime (pasted into
every generated translation unit), the Python runtime's C extension and the CuTe host shim and entries.

The file is generated and committed; ``python -m kernelpack.launch.header`` rewrites it and
``tests/test_launch_model.py`` fails when it drifts from the model.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from . import binaries, codes, device
from .plan import GRID_OPS_CODES, OPS

NAME = "kp_model.h"


def render() -> str:
    def defines(rows: Sequence[tuple[str, object]]) -> str:
        return "\n".join(f"#define {n} {v}" for n, v in rows)

    dtypes = "\n".join(f"#define KP_DT_{d.value.upper()} {c} /* {d.c_type}{' storage of fp8 bits' * d.is_fp8} */"
                       for d, c in codes.DTYPE_CODE.items())
    names = ", ".join(f'"{d.value}"' for d in codes.DTYPES)
    torch_dtypes = " \\\n    ".join(f"X({c10}, KP_DT_{d.value.upper()})" for d, (_, c10) in codes.TORCH_DTYPES.items())
    cuda = defines([(f"KP_{n}", v) for n, v in codes.CUDA_RESULTS.items()])
    attrs = defines([(f"KP_CU_DEVICE_ATTRIBUTE_{n}", v) for n, v in codes.DEVICE_ATTRIBUTES.items()]
                    + [(f"KP_CU_FUNC_ATTRIBUTE_{n}", v) for n, v in codes.FUNC_ATTRIBUTES.items()]
                    + [(f"KP_CU_POINTER_ATTRIBUTE_{n}", v) for n, v in codes.POINTER_ATTRIBUTES.items()]
                    + [(f"KP_CU_LAUNCH_ATTRIBUTE_{n}", v) for n, v in codes.LAUNCH_ATTRIBUTES.items()])
    limits = defines([("KP_CUDA_API_VERSION", codes.CUDA_API_VERSION), ("KP_MAX_DEVICES", codes.MAX_DEVICES),
                      ("KP_SMEM_DEFAULT_LIMIT", f"{codes.SMEM_DEFAULT_LIMIT}u"),
                      ("KP_MAX_PORTABLE_CLUSTER", f"{codes.MAX_PORTABLE_CLUSTER}u"),
                      *[(f"KP_MAX_BLOCK_{x}", f"{v}u") for x, v in zip("XYZ", codes.MAX_BLOCK)],
                      ("KP_MAX_BLOCK_THREADS", f"{codes.MAX_BLOCK_THREADS}u"),
                      *[(f"KP_MAX_GRID_{x}", f"{v}u") for x, v in zip("XYZ", codes.MAX_GRID)]])
    flags = defines([(f"KP_LF_{n}", f"{v}u") for n, v in codes.LAUNCH_FLAGS.items()]
                    + [("KP_PDL_MIN_MAJOR", codes.PDL_MIN_MAJOR)])
    ops = defines([(f"KP_OP_{n.upper()}", v) for n, v in OPS.items()])
    gops = defines([(f"KP_G_{n.upper()}", v) for n, v in GRID_OPS_CODES.items()])
    props = defines([(f"KP_DP_{p.name.upper()}", f"{p.code} /* {p.doc} */") for p in device.PROPERTIES]
                    + [("KP_REQUIRES_BONUS", f"{device.REQUIRES_BONUS} /* quality a satisfied requirement adds */"),
                       ("KP_MAC_BLOCK", f"{device.MAC_BLOCK}u /* threads per block of the max_active_clusters query "
                                        f"when the kernel fixes none */")])
    rules = ",\n    ".join(f"{{{int(r.ptx)}, {_char(r.suffix)}, {r.match}, {r.base}, {r.plus}}}"
                              for r in binaries.RULES)
    return f"""/* kp_model.h: kernelpack's launch model (kernelpack/launch/), rendered for C. Generated: do not edit.
 * Regenerate with `python -m kernelpack.launch.header`; tests/test_launch_model.py fails when it drifts.
 *
 * Included by the C library's runtime (pasted into every generated translation unit), the Python runtime's C
 * extension (runtime/_launch.c) and the CuTe host shim and entries (cute_host/). Everything is a macro, a type or
 * a static inline function: no symbol is defined.
 */
#ifndef KP_MODEL_H
#define KP_MODEL_H

#include <stdint.h>

/* ---- element types: kp_dtype values */
#define KP_DT_ANY {codes.DTYPE_ANY} /* untyped */
{dtypes}
#define KP_DTYPE_COUNT {len(codes.DTYPES) + 1}
#define KP_DTYPE_NAMES {{"any", {names}}} /* indexed by kp_dtype */
/* X(c10::ScalarType enumerator, kp_dtype) for every dtype torch names (the torch bridge's table) */
#define KP_TORCH_DTYPES(X) \\
    {torch_dtypes}

/* ---- CUresult values the code reacts to */
{cuda}

/* ---- driver attributes */
{attrs}

/* ---- launch limits */
{limits}
#ifndef KP_MAX_RANK
#define KP_MAX_RANK {codes.MAX_RANK} /* kp_tensor modes (also in every library's public header) */
#endif
#define KP_DYN INT64_MIN /* a tensor mode passed at run time */

/* ---- launch flags (kp_launch.flags, kp_bin_launch.flags; the runtime's pdl= / cooperative=) */
{flags}

/* ---- how a parameter is filled (runtime plans: kernelpack/launch/plan.py) and grid-formula steps */
{ops}
{gops}

/* ---- device properties a launch reads (kernelpack/launch/device.py): device-derived params, requirements */
{props}

/* The dynamic shared memory of the max_active_clusters query: all a block can have, so one block fills an SM. */
static inline uint32_t kp_mac_smem(int32_t smem_optin, uint32_t static_smem) {{
    return smem_optin > 0 && (uint32_t)smem_optin > static_smem ? (uint32_t)smem_optin - static_smem : 0;
}}

/* ---- which binary a device runs (kernelpack/launch/binaries.py): the best quality > 0 wins */
#define KP_MATCH_EXACT {binaries.MATCH_EXACT}      /* exactly the binary's major.minor */
#define KP_MATCH_SAME_MAJOR {binaries.MATCH_SAME_MAJOR} /* the same major, minor >= the binary's */
#define KP_MATCH_AT_MOST {binaries.MATCH_AT_MOST}    /* an SM number >= the binary's */
typedef struct kp_bin_rule {{
    uint8_t ptx;     /* 1: PTX, 0: SASS */
    char suffix;     /* 'a', 'f', or 0 = any suffix no other row of this kind names */
    uint8_t match;   /* KP_MATCH_* */
    uint16_t base;   /* quality where it matches */
    uint8_t plus;    /* add 1: the binary's minor, 2: its SM number */
}} kp_bin_rule;
static const kp_bin_rule kp_bin_rules[] = {{
    {rules}
}};

/* The quality of a binary (PTX when ptx; arch major.minor + suffix) on a device dmajor.dminor; 0 = cannot run. */
static inline int32_t kp_bin_rule_quality(int ptx, int major, int minor, char suffix, int dmajor, int dminor) {{
    const kp_bin_rule* r = 0;
    for (unsigned i = 0; i < sizeof kp_bin_rules / sizeof kp_bin_rules[0]; i++) {{
        const kp_bin_rule* c = &kp_bin_rules[i];
        if (c->ptx != (ptx != 0)) continue;
        if (suffix != 0 && c->suffix == suffix) {{ r = c; break; }}
        if (c->suffix == 0 && r == 0) r = c;
    }}
    if (r == 0) return 0;
    int ok = r->match == KP_MATCH_EXACT ? major == dmajor && minor == dminor
           : r->match == KP_MATCH_SAME_MAJOR ? major == dmajor && minor <= dminor
           : major * 10 + minor <= dmajor * 10 + dminor;
    if (!ok) return 0;
    return (int32_t)r->base + (r->plus == 1 ? minor : r->plus == 2 ? major * 10 + minor : 0);
}}

#endif /* KP_MODEL_H */
"""


def _char(c: str) -> str:
    return f"'{c}'" if c else "0"


def path() -> Path:
    """Where the committed header lives (the package's csrc/)."""
    return Path(str(resources.files("kernelpack").joinpath("csrc").joinpath(NAME)))


def main() -> int:
    path().write_text(render())
    print(f"wrote {path()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
