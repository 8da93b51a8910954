"""The GPU run's logic, kept free of any GPU so that it is tested on the build machine.

* :func:`read_manifest`: the corpus manifest (``.gpu/corpus/manifest.json``) as :class:`Entry` rows;
* :func:`match_family`: which compiled family serves a Triton launch (kernel, constexpr values, launch options);
* :func:`parse_prototypes` / :func:`driver_source`: a C++ driver over the library's C entries (one
  ``corpus_<family>(const kp_launch*, const uint64_t* slots)`` per family whose parameters are pointers, dtypes and
  scalars), compiled on the GPU machine with g++ against the C library and called through ctypes;
* :func:`pack_slots`: a launch's values as those slots, by the C parameter names;
* :func:`compare` and :func:`render`: the pass/fail rule and the markdown table.
"""

from __future__ import annotations

import ctypes
import json
import math
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpack.core.names import c_name
from kernelpack.runtime.cstructs import kp_tensor


@dataclass(frozen=True)
class Entry:
    dsl: str
    kernel: str  # module:function
    family: str
    variant: str
    family_key: Mapping[str, Any]
    sources: tuple[str, ...]
    launch: Mapping[str, Any] = field(default_factory=dict)  # cuTile/CuTe: the recorded launch (grid, args)
    archs: tuple[str, ...] = ()  # what the binaries were built for
    host_program: bool = False  # a CuTe host program (else kernel-level artifacts)


def read_manifest(path: Path) -> tuple[dict[str, Any], list[Entry]]:
    """(libraries, compiled entries) of a corpus manifest."""
    data = json.loads(Path(path).read_text())
    out = []
    for s in data.get("specs", []):
        if not s.get("compiled"):
            continue
        key = json.loads(s["key"]) if isinstance(s.get("key"), str) else {}
        hp = s.get("host_program")
        archs = hp.get("archs", []) if hp else [x for a in s.get("artifacts", []) for x in a.get("archs", [])]
        out.append(Entry(s["dsl"], s["kernel"], s["family"], s.get("variant", ""), key.get("f", {}),
                         tuple(s.get("sources", ())), s.get("launch") or {}, tuple(dict.fromkeys(archs)),
                         hp is not None))
    return data.get("libraries", {}), out


def runs_on(archs: Sequence[str], capability: tuple[int, int]) -> bool:
    """Whether a binary for one of ``archs`` runs on a device of ``capability``: ``sm_XY`` on any device of at
    least XY, ``sm_XYa`` only on XY (arch-specific instructions); ``compute_XY`` (PTX) on any of at least XY."""
    dev = capability[0] * 10 + capability[1]
    for a in archs:
        m = re.fullmatch(r"(sm|compute)_(\d+)([af]?)", a)
        if m and (int(m.group(2)) == dev if m.group(3) else int(m.group(2)) <= dev):
            return True
    return False


def match_family(entries: Sequence[Entry], kernel: str, bound: Mapping[str, Any],
                 options: Mapping[str, Any]) -> Entry | None:
    """The entry of ``kernel`` whose constexprs equal the launch's values and whose options are the launch's."""
    for e in entries:
        if e.kernel != kernel or e.dsl != "triton":
            continue
        consts = e.family_key.get("constexprs", {})
        if any(n not in bound or not _same(bound[n], v) for n, v in consts.items()):
            continue
        opts = e.family_key.get("options", {})
        if any(not _same(options.get(k), v) for k, v in opts.items()):
            continue
        if any(k not in opts for k in options if k in ("num_warps", "num_stages", "num_ctas")):
            continue
        if any(n not in bound for n in e.family_key.get("args", [])):
            continue
        return e
    return None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    if a is None or b is None:
        return a is b
    return a == b or repr(a) == b or str(a) == b


# ------------------------------------------------------------------------------------------- the C++ driver

_PROTO = re.compile(r"\w+_API kp_status (?P<lib>[A-Za-z0-9]+)_(?P<fam>\w+)\(const kp_launch\* kp_cfg"
                    r"(?P<params>[^;)]*)\);")
_SCALARS = {"int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "float",
            "double", "bool", "kp_dtype"}


@dataclass(frozen=True)
class Param:
    ctype: str
    name: str
    # a by-value tensor-descriptor struct (a CuTe host program's tensor): its fields (C type, name), filled by
    # the driver from a kp_tensor (data, shape{i}, stride{i})
    descriptor: tuple[tuple[str, str], ...] = ()

    @property
    def pointer(self) -> bool:
        return self.ctype.endswith("*")


def parse_prototypes(header: str, lib: str) -> dict[str, list[Param]]:
    """Entry name (without the ``lib_`` prefix) -> its parameters after ``kp_cfg``."""
    out: dict[str, list[Param]] = {}
    for m in _PROTO.finditer(header):
        if m.group("lib") != lib:
            continue
        out[m.group("fam")] = [Param(ctype, name) for ctype, name in split_params(m.group("params"))]
    return out


def split_params(text: str) -> list[tuple[str, str]]:
    """A C parameter list as (type, name) pairs, a declarator's ``*`` moved to the type (``void`` alone: none)."""
    out = []
    for raw in (p.strip() for p in text.split(",")):
        if raw in ("", "void"):
            continue
        ctype, name = raw.rsplit(None, 1)
        stars = len(name) - len(name.lstrip("*"))
        out.append((ctype.strip() + "*" * stars, name[stars:]))
    return out


_STRUCT = re.compile(r"typedef struct (?P<name>\w+) \{(?P<body>[^}]*)\} (?P=name);")
_FIELD = re.compile(r"^\s*(?P<ctype>\w+(?: \w+)*\**)\s+(?P<name>\w+);", re.M)
_HOST_PROTO = re.compile(r"^kp_status (?P<lib>[A-Za-z0-9]+)_(?P<fam>\w+)\((?P<params>[^;)]*)\);", re.M)


def parse_descriptors(header: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """Tensor-descriptor structs of the header (a ``data`` field, then ``shape{i}``/``stride{i}`` fields)."""
    out = {}
    for m in _STRUCT.finditer(header):
        fields = tuple((f.group("ctype").strip(), f.group("name")) for f in _FIELD.finditer(m.group("body")))
        if fields and fields[0][1] == "data" and all(re.fullmatch(r"(shape|stride)\d+", n) for _, n in fields[1:]):
            out[m.group("name")] = fields
    return out


def parse_host_prototypes(header: str, lib: str) -> dict[str, list[Param]]:
    """CuTe host-program entries (``kp_status lib_NAME(<descriptor structs, scalars>, void* stream)``, no
    ``kp_launch``): name -> parameters, descriptor structs marked."""
    structs = parse_descriptors(header)
    out: dict[str, list[Param]] = {}
    for m in _HOST_PROTO.finditer(header):
        if m.group("lib") != lib or m.group("params").lstrip().startswith("const kp_launch*"):
            continue
        out[m.group("fam")] = [Param(ctype, name, structs.get(ctype, ()))
                               for ctype, name in split_params(m.group("params"))]
    return out


def supported(params: Sequence[Param]) -> str:
    """Empty when the driver can call the entry; else why not."""
    for p in params:
        if p.descriptor:
            continue
        base = p.ctype.replace("const ", "").rstrip("*").strip()
        if p.pointer and (base in _SCALARS or base in ("void", "kp_bf16", "kp_f16", "kp_tensor")) \
                and p.ctype.count("*") == 1:
            continue
        if not p.pointer and p.ctype in _SCALARS:
            continue
        return f"parameter {p.name} of type {p.ctype}"
    return ""


def _unpack(p: Param, i: int) -> str:
    if p.descriptor:
        return f"make_{p.ctype}(reinterpret_cast<const kp_tensor*>(static_cast<uintptr_t>(s[{i}])))"
    if p.pointer:
        return f"reinterpret_cast<{p.ctype}>(static_cast<uintptr_t>(s[{i}]))"
    if p.ctype == "float":
        return f"as_f32(s[{i}])"
    if p.ctype == "double":
        return f"as_f64(s[{i}])"
    if p.ctype == "bool":
        return f"s[{i}] != 0"
    return f"static_cast<{p.ctype}>(s[{i}])"


def _maker(ctype: str, fields: Sequence[tuple[str, str]]) -> str:
    """``make_<struct>(const kp_tensor*)``: a descriptor struct from a kp_tensor (mode i's extent and stride)."""
    body = [f"{ctype} v; std::memset(&v, 0, sizeof v);"]
    for ft, fn in fields:
        if fn == "data":
            body.append(f"v.data = static_cast<{ft}>(t->data);")
        else:
            kind, i = re.fullmatch(r"(shape|stride)(\d+)", fn).groups()  # type: ignore[union-attr]
            body.append(f"v.{fn} = static_cast<{ft}>(t->{kind}[{i}]);")
    return f"[[maybe_unused]] static {ctype} make_{ctype}(const kp_tensor* t) {{ {' '.join(body)} return v; }}"


def driver_source(lib: str, entries: Mapping[str, Sequence[Param]], hosts: Mapping[str, Sequence[Param]] | None = None
                  ) -> str:
    """C++17 source of the driver: ``extern "C" int corpus_<family>(const kp_launch*, const uint64_t*)``, for
    kernel families and (``hosts``) CuTe host programs, whose entries take no launch configuration."""
    hosts = hosts or {}
    lines = [f'#include "{lib}.h"', "#include <cstdint>", "#include <cstring>", "",
             "[[maybe_unused]] static float as_f32(uint64_t v) { uint32_t b = static_cast<uint32_t>(v); float f; "
             "std::memcpy(&f, &b, 4); return f; }",
             "[[maybe_unused]] static double as_f64(uint64_t v) { double d; std::memcpy(&d, &v, 8); return d; }"]
    makers = {p.ctype: p.descriptor for ps in (*entries.values(), *hosts.values()) for p in ps if p.descriptor}
    lines += [_maker(c, f) for c, f in sorted(makers.items())]
    lines += ["", 'extern "C" {', f'const char* corpus_last_error(void) {{ return {lib}_last_error(); }}']
    for fam, params in sorted(entries.items()):
        if supported(params) or fam in hosts:
            continue
        args = "".join(f", {_unpack(p, i)}" for i, p in enumerate(params))
        unused = "" if params else " (void)s;"
        lines.append(f"int corpus_{fam}(const kp_launch* cfg, const uint64_t* s) {{{unused} "
                     f"return static_cast<int>({lib}_{fam}(cfg{args})); }}")
    for fam, params in sorted(hosts.items()):
        if supported(params):
            continue
        args = ", ".join(_unpack(p, i) for i, p in enumerate(params))
        unused = "" if params else " (void)s;"
        lines.append(f"int corpus_{fam}(const kp_launch* cfg, const uint64_t* s) {{ (void)cfg;{unused} "
                     f"return static_cast<int>({lib}_{fam}({args})); }}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def driver_command(src: Path, lib_dir: Path, lib: str, out: Path, cxx: str = "g++") -> list[str]:
    """g++ -Werror, against the library's C header and shared library (rpath: its directory)."""
    libs = (lib_dir / "lib").resolve()
    return [cxx, "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
            f"-I{lib_dir / 'include'}", str(src), f"-L{libs}", f"-l{lib}", f"-Wl,-rpath,{libs}", "-o", str(out)]


def pack_slots(params: Sequence[Param], values: Mapping[str, Any], keep: list[Any] | None = None) -> list[int]:
    """One 64-bit slot per C parameter, from the launch's values by name (a tensor gives its ``data_ptr()`` and,
    for ``<name>_dtype``, its dtype; for a ``kp_tensor*`` parameter, the address of a ``kp_tensor`` built here and
    kept alive in ``keep``). Raises KeyError naming a parameter without a value."""
    keep = keep if keep is not None else []
    slots = []
    values = {**{c_name(k): v for k, v in values.items()}, **values}  # the header's names are hygienic C names
    for p in params:
        if p.name in values:
            v = values[p.name]
        elif p.ctype == "kp_dtype" and p.name.endswith("_dtype") and p.name[:-6] in values:
            v = values[p.name[:-6]]
            slots.append(kp_tensor(v).dtype)  # the kp_dtype code the runtime gives this tensor
            continue
        else:
            raise KeyError(f"C parameter {p.name} ({p.ctype}) has no value")
        if p.descriptor or p.ctype.replace("const ", "").strip() == "kp_tensor*":  # a kp_tensor built here
            desc = kp_tensor(v)
            keep.append(desc)
            slots.append(ctypes.addressof(desc))
        elif p.pointer:
            slots.append(0 if v is None else int(v.data_ptr() if hasattr(v, "data_ptr") else v))
        elif p.ctype == "float":
            slots.append(struct.unpack("<I", struct.pack("<f", float(v)))[0])
        elif p.ctype == "double":
            slots.append(struct.unpack("<Q", struct.pack("<d", float(v)))[0])
        else:
            slots.append(int(v) & 0xFFFFFFFFFFFFFFFF)
    return slots


# ------------------------------------------------------------------------------------------- results


# Element-wise tolerance per precision (rtol, atol), and a norm-wise term: a fraction of the tensor's largest
# magnitude (SCALE_TOL). Why: kernelpack's binaries are compiled by another Triton than the JIT reference on the
# GPU machine (3.9 here, 3.6 there); the two place roundings differently (a bf16 product kept in fp32 or rounded,
# a reduction's order), so results differ by about one unit in the last place of the precision the kernel computes
# in -- for sums of terms, one unit of the largest term, which after cancellation can exceed an element's own
# tolerance (liger poly_norm bf16: RSTD 0.0074 off at ~1.0, i.e. one bf16 ulp (2^-7); Y 0.125 off where x^3 terms
# cancel). The precision is the launch's lowest floating precision (a bf16-input kernel computing an fp32 output
# is compared at bf16). SCALE_TOL is 2 ulps of the tensor's largest magnitude at that precision: an element never
# written (NaN), a wrong index or a wrong formula is still off by far more. C++ vs Python is exact (same binary).
TOLERANCE = {"float32": (1e-3, 1e-4), "float64": (1e-6, 1e-8), "float16": (1e-2, 1e-3), "bfloat16": (2e-2, 1e-2)}
SCALE_TOL = {"float32": 2.0 ** -22, "float64": 2.0 ** -51, "float16": 2.0 ** -9, "bfloat16": 2.0 ** -6}
_PRECISION_ORDER = ("bfloat16", "float16", "float32", "float64")


def launch_precision(tensors: Sequence[Any]) -> str | None:
    """The lowest floating precision among a launch's tensors (None when none is floating)."""
    names = {str(t.dtype).removeprefix("torch.") for t in tensors if t.dtype.is_floating_point}
    return next((n for n in _PRECISION_ORDER if n in names), None)


def compare(name: str, ref: Any, got: Any, precision: str | None = None, exact: bool = False) -> str:
    """Empty when ``got`` matches ``ref`` (NaN where both are NaN: an element neither wrote); else the mismatch.

    Floating tensors: within TOLERANCE and SCALE_TOL of ``precision`` (default: the tensor's own dtype) -- or
    bit-equal when ``exact``."""
    import torch

    if ref.shape != got.shape or ref.dtype != got.dtype:
        return f"{name}: shape/dtype {tuple(got.shape)}/{got.dtype}, expected {tuple(ref.shape)}/{ref.dtype}"
    if not ref.dtype.is_floating_point:
        bad = int((ref != got).sum())
        return f"{name}: {bad} of {ref.numel()} elements differ" if bad else ""
    prec = precision or str(ref.dtype).removeprefix("torch.")
    r, g = ref.double(), got.double()
    unwritten = int((torch.isnan(g) & ~torch.isnan(r)).sum())
    if exact:
        close = (g == r) | (torch.isnan(g) & torch.isnan(r))
    else:
        rtol, atol = TOLERANCE.get(prec, (1e-3, 1e-4))
        finite = r[torch.isfinite(r)]
        scale = float(finite.abs().max()) if finite.numel() else 0.0
        close = torch.isclose(g, r, rtol=rtol, atol=atol + SCALE_TOL.get(prec, 0.0) * scale, equal_nan=True)
    bad = int((~close).sum())
    if not bad:
        return ""
    err = float((g - r).abs().nan_to_num(0.0).max())
    what = f", {unwritten} never written" if unwritten else ""
    how = "bits" if exact else f"{prec} tolerance"
    return f"{name}: {bad} of {ref.numel()} elements differ (max abs err {err:.3g}{what}; {how})"


@dataclass
class Row:
    dsl: str
    family: str
    where: str
    python: str = "-"
    cpp: str = "-"
    t_package_us: float | None = None  # kernel time per launch (GPU, back to back behind a backlog)
    t_kernelpack_us: float | None = None
    h_package_us: float | None = None  # host time to issue one launch
    h_kernelpack_us: float | None = None

    @property
    def ratio(self) -> float | None:
        if self.t_package_us and self.t_kernelpack_us and not math.isnan(self.t_package_us + self.t_kernelpack_us):
            return self.t_kernelpack_us / self.t_package_us
        return None

    @property
    def passed(self) -> bool:
        """Python launched and matched (or ran, where there is no reference) and C++ did not fail."""
        return self.python.startswith(("pass", "ran")) and not self.cpp.startswith("FAIL")


def render(rows: Sequence[Row]) -> str:
    """The markdown table (one row per family and case point) and a summary line. Times in microseconds per
    launch: kernel time (GPU) of the package's launch and kernelpack's and their ratio (the 3% target), then the
    host time to issue one launch of each."""
    out = ["| DSL | family | case | Python | C++ | package kernel us | kernelpack kernel us | kernel ratio | "
           "package host us | kernelpack host us |",
           "|---|---|---|---|---|---|---|---|---|---|"]

    def t(v: float | None) -> str:
        return f"{v:.2f}" if v is not None and not math.isnan(v) else "-"

    for r in rows:
        ratio = f"{r.ratio:.3f}" if r.ratio is not None else "-"
        out.append(f"| {r.dsl} | `{r.family}` | {r.where} | {_cell(r.python)} | {_cell(r.cpp)} | "
                   f"{t(r.t_package_us)} | {t(r.t_kernelpack_us)} | {ratio} | {t(r.h_package_us)} | "
                   f"{t(r.h_kernelpack_us)} |")
    launched = [r for r in rows if not r.python.startswith("n/a")]
    n = len(launched)
    ok = sum(r.passed for r in launched)
    skipped = len(rows) - n
    ratios = sorted(r.ratio for r in rows if r.ratio is not None)
    med = ratios[len(ratios) // 2] if ratios else None
    within = sum(1 for x in ratios if x <= 1.03)
    out.append("")
    head = f"{ok}/{n} launches pass (Python and C++)" + (f", {skipped} families not launched" if skipped else "")
    out.append(f"{head}; kernel time ratio kernelpack/package: median {med:.3f}, {within}/{len(ratios)} within 3%"
               if med is not None else f"{head}; no timings")
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")[:160]
