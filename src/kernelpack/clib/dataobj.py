"""The data object of a generated library: an assembly file that embeds the bundle (``.incbin`` into section
``.kpack``) and holds every table that depends on the binaries' bytes — where each blob lies in the bundle and the
launch facts read from each cubin (REQNTID, explicit cluster, launch bounds, static shared memory).

The C translation unit refers to these through hidden, library-prefixed symbols, so it depends only on what the C
API depends on (ABIs, launch specs, names, arch lists): when only kernel bodies change, the build reassembles this
small file and relinks, reusing the compiled C object (``build.py`` caches it by its text).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..bundle.artifact import KernelArtifact
from ..bundle.embedded import SECTION
from ..core.binary import Binary
from ..core.errors import KernelpackError
from ..core.version import __version__
from ..launch.facts import facts
from .widths import U8, U16, U32, fit, fit_all

# kp_bin_info / kp_blob_info as csrc/kp_runtime.h lays them out (static-asserted there: KP_BIN_INFO_SIZE ...)
BIN_INFO_SIZE = 32
BLOB_INFO_SIZE = 16


def symbols(lib: str) -> dict[str, str]:
    """C name -> the hidden global symbol the data object defines for it."""
    return {"kp_bundle": f"{lib}_kp_bundle", "kp_bundle_size": f"{lib}_kp_bundle_size",
            "kp_blobs": f"{lib}_kp_blobs", "kp_bins": f"{lib}_kp_bins"}


def c_declarations(lib: str) -> str:
    """What the translation unit declares to reach the data object (after kp_runtime.h's types)."""
    s = symbols(lib)
    hidden = '__attribute__((visibility("hidden")))'
    return f"""/* Defined by the data object ({lib}_data.s): the bundle, and the tables that depend on its bytes. */
extern const unsigned char {s['kp_bundle']}[] {hidden};
extern const uint64_t {s['kp_bundle_size']} {hidden};
extern const kp_blob_info {s['kp_blobs']}[] {hidden};
extern const kp_bin_info {s['kp_bins']}[KP_NBIN] {hidden};
#define kp_bundle {s['kp_bundle']}
#define kp_blobs {s['kp_blobs']}
#define kp_bins {s['kp_bins']}
#define KP_BUNDLE_SIZE {s['kp_bundle_size']}
"""


# (reqntid, cluster, max_threads, static_smem) of one binary: what its row holds
RowFacts = tuple[tuple[int, int, int] | None, tuple[int, int, int] | None, int, int]
FactsOf = Callable[[KernelArtifact, Binary, int], RowFacts]  # (artifact, binary, blob index)


def launch_facts(a: KernelArtifact, b: Binary, blob: int) -> RowFacts:
    """The launch model's facts of binary ``b``; those read from its cubin go into its row."""
    f = facts(a, b)
    return f.reqntid, f.cluster, f.max_threads, f.static_smem


def _bin_rows(a: KernelArtifact, m: dict[str, Any], ptx_blobs: set[int], facts_of: FactsOf) -> list[str]:
    rows = []
    for b, mb in zip(a.binaries, m["binaries"], strict=True):
        reqntid, cluster, max_threads, static_smem = facts_of(a, b, mb["blob"])
        if b.kind != "cubin":
            ptx_blobs.add(mb["blob"])
        where = f"kernel {a.label} ({b.arch})"
        suffix = ord(b.arch.suffix) if b.arch.suffix else 0
        r, c = reqntid or (0, 0, 0), cluster or (0, 0, 0)
        fit(mb["blob"], U32, where, "blob index")  # kp_bin_info's fields, each at its width (widths.py)
        fit_all((b.arch.major, b.arch.minor, suffix), U8, where, "arch")
        fit_all(r, U32, where, "required block (REQNTID)")
        fit_all((*c, max_threads), U16, where, "cluster or launch bounds")
        fit(static_smem, U32, where, "static shared memory")
        rows.append(f"\t.long {mb['blob']}\t/* {a.label} {b.arch}{' PTX' if b.kind == 'ptx' else ''} */\n"
                    f"\t.byte {b.arch.major}, {b.arch.minor}, {suffix}, {int(b.kind == 'ptx')}\n"
                    f"\t.long {r[0]}, {r[1]}, {r[2]}\n"
                    f"\t.short {c[0]}, {c[1]}, {c[2]}, {max_threads}\n"
                    f"\t.long {static_smem}\n")
    return rows


def _blob_fields(lib: str, k: int, b: dict[str, Any], bundle_size: int) -> str:
    """Blob ``k``'s offset and size (kp_blob_info: 32-bit each, the bundle < 4 GiB), checked to lie in the bundle;
    its raw size too."""
    where = f"library {lib}: blob {k}"
    offset, size = fit(b["offset"], U32, where, "offset"), fit(b["size"], U32, where, "size")
    fit(b.get("raw_size", 0), U32, where, "raw_size")
    if offset + size > bundle_size:
        raise KernelpackError(f"{where}: bytes {offset}..{offset + size} lie past the bundle's {bundle_size}")
    return f"{offset}, {size}"


def _global(sym: str, align: int) -> str:
    return f"\t.balign {align}\n\t.globl {sym}\n\t.hidden {sym}\n\t.type {sym}, %object\n{sym}:\n"


def data_asm(lib: str, arts: tuple[KernelArtifact, ...], manifest: dict[str, Any], bundle_size: int,
             facts_of: FactsOf = launch_facts) -> str:
    """The assembly text of library ``lib``'s data object (``.incbin`` of ``lib.kpack``, found through ``-I``).
    ``facts_of``: each binary's row facts (default: read from its cubin; ``clib/memo.py`` passes remembered ones)."""
    s = symbols(lib)
    ptx_blobs: set[int] = set()
    bins = [row for a, m in zip(arts, manifest["artifacts"], strict=True)
            for row in _bin_rows(a, m, ptx_blobs, facts_of)]
    nbin = len(bins)
    if len(manifest["blobs"]) > nbin:
        raise KernelpackError(f"library {lib}: the bundle holds more blobs than binaries")
    blobs = "".join(f"\t.long {_blob_fields(lib, k, b, bundle_size)}, {int(k in ptx_blobs)}, {b.get('raw_size', 0)}\n"
                    for k, b in enumerate(manifest["blobs"]))  # raw_size: the zlib stream's expanded size
    return (f"/* Generated by kernelpack {__version__}: the data of library {lib}. Do not edit.\n"
            f" * The bundle ({bundle_size} bytes, {len(manifest['blobs'])} blobs) and the tables derived from its "
            f"binaries; see kernelpack/clib/dataobj.py. */\n"
            f"\t.pushsection {SECTION}, \"a\", %progbits\n{_global(s['kp_bundle'], 64)}"
            f"\t.incbin \"{lib}.kpack\"\n\t.size {s['kp_bundle']}, {bundle_size}\n\t.popsection\n\n"
            f"\t.section .rodata.{lib}_kp_data, \"a\", %progbits\n"
            f"{_global(s['kp_bundle_size'], 8)}\t.quad {bundle_size}\n\t.size {s['kp_bundle_size']}, 8\n\n"
            f"{_global(s['kp_blobs'], 4)}{blobs}\t.size {s['kp_blobs']}, {BLOB_INFO_SIZE * len(manifest['blobs'])}\n\n"
            f"{_global(s['kp_bins'], 4)}{''.join(bins)}\t.size {s['kp_bins']}, {BIN_INFO_SIZE * nbin}\n\n"
            f"\t.section .note.GNU-stack, \"\", %progbits\n")
