"""The FlashInfer corpus on the GPU (``scripts/corpus_gpu.py --package flashinfer``): every kernel of libflashinfer.so
launched from C++ and from Python, checked and timed.

Input: ``.gpu/corpus-fi/`` (``python -m corpus.flashinfer --gpu-prepare`` on the build machine): libflashinfer.so,
its headers, flashinfer.kpack and manifest.json. For each kernel family (CUDA C++) and host program (CuTe DSL) of
the manifest, for each variant (element type): fresh random inputs, outputs pre-filled with a sentinel (NaN / -1)
(corpus.flashinfer_cases, corpus.flashinfer_sampling), then

* C++: a harness compiled here with g++ (-std=c++17 -Wall -Wextra -Werror) against ``flashinfer.h``/``.hpp`` and
  linked with ``-lflashinfer`` calls the typed C entry (``flashinfer_<family>_<variant>``, or the host program's
  entry); Python only hands it the argument bytes, laid out per the prototype read from ``flashinfer.h`` (the
  harness checks each parameter's size against it before the call);
* Python: ``kernelpack.load(libflashinfer.so).<family>(...)``;

each result compared with a torch float64 reference (FlashInfer's own JIT needs nvcc+ninja and network, absent on the
GPU machine: the reference is the math of the kernel), every output element checked written, and the time of both
launches measured (``corpus.gpu_timing``): kernel time -- CUDA events around back-to-back launches queued behind a
sleep kernel, so the GPU has a backlog and the events measure GPU execution rather than the host's launch cost --
and, apart, the host time to issue one launch (median over ``reps`` / 5 batches). A markdown table and JSON
(``corpus_gpu_flashinfer.json``) go to the output folder. A kernel that fails is recorded and the run goes on.
"""

from __future__ import annotations

import ctypes
import json
import re
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelpack.runtime.cstructs import KpLaunch

from . import flashinfer_cases as cases
from . import flashinfer_sampling as sampling
from .flashinfer_cases import Case, PagedKv, _t
from .gpu_check import runs_on, split_params
from .gpu_runner import compile_harness, ensure_extension, write_report

LIB = "flashinfer"

CUDA_CASES: dict[str, Callable[[str], Case]] = {**cases.CUDA_CASES, **sampling.CASES}
HOST_CASES: dict[str, Callable[[str], Case]] = cases.HOST_CASES



# ------------------------------------------------------------------------------------------------ C via ctypes

SCALARS = {"float": ctypes.c_float, "double": ctypes.c_double, "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32,
           "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t, "bool": ctypes.c_bool,
           "_Bool": ctypes.c_bool, "int8_t": ctypes.c_int8, "uint8_t": ctypes.c_uint8, "int": ctypes.c_int,
           "int16_t": ctypes.c_int16, "uint16_t": ctypes.c_uint16}


class Header:
    """Prototypes and by-value structs of flashinfer.h, as ctypes types."""

    def __init__(self, text: str) -> None:
        self.text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        self.structs: dict[str, type] = {}
        for m in re.finditer(r"typedef struct (\w+) \{([^}]*)\} (\w+);", self.text):
            fields = []
            for decl in m.group(2).split(";"):
                decl = decl.strip()
                if not decl:
                    continue
                typ, name = decl.rsplit(None, 1)
                arr = re.match(r"(\w+)\[(\d+)\]", name)
                if arr:
                    fields.append((arr.group(1), self.ctype(typ) * int(arr.group(2))))
                else:
                    fields.append((name.lstrip("*"), self.ctype(typ + ("*" if name.startswith("*") else ""))))
            self.structs[m.group(3)] = type(m.group(3), (ctypes.Structure,), {"_fields_": fields})

    def ctype(self, typ: str) -> Any:
        typ = typ.replace("const ", "").strip()
        if typ.endswith("*"):
            return ctypes.c_void_p
        if typ in self.structs:
            return self.structs[typ]
        if typ in SCALARS:
            return SCALARS[typ]
        if typ == "kp_dtype" or typ.startswith("enum"):
            return ctypes.c_int
        raise KeyError(f"no ctypes type for {typ!r}")

    def prototype(self, symbol: str) -> list[tuple[str, Any]]:
        m = re.search(r"kp_status " + re.escape(symbol) + r"\(([^)]*)\);", self.text)
        if not m:
            raise KeyError(f"{symbol} is not declared in {LIB}.h")
        return [(name, self.ctype(ctype)) for ctype, name in split_params(m.group(1))]


def c_value(ct: Any, v: Any, torch: Any) -> Any:
    if isinstance(v, torch.Tensor):
        if ct is ctypes.c_void_p:
            return ctypes.c_void_p(v.data_ptr())
        return fill_struct(ct, v)
    if v is None:
        return ctypes.c_void_p(0) if ct is ctypes.c_void_p else ct(0)
    if isinstance(v, ctypes.c_void_p):
        return v
    if isinstance(v, (ctypes.Array, ctypes.Structure)):  # a by-value C++ struct: the entry takes its address
        return ctypes.c_void_p(ctypes.addressof(v)) if ct is ctypes.c_void_p else v
    return ct(v)


def fill_struct(st: Any, t: Any) -> Any:
    """A CuTe tensor descriptor {data; shape<i>; stride<i>} (dynamic modes only) from a torch tensor."""
    s = st()
    for name, _ in st._fields_:
        if name == "data":
            s.data = t.data_ptr()
        elif name.startswith("shape"):
            setattr(s, name, t.shape[int(name[5:])])
        elif name.startswith("stride"):
            setattr(s, name, t.stride()[int(name[6:])])
    return s


# ------------------------------------------------------------------------------------------------ C++ harness

HARNESS_HEAD = """// Generated by corpus/flashinfer_gpu.py: each entry of libflashinfer called from C++.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "flashinfer.hpp"

namespace {
template <class T> T load(std::uint64_t address) {
    T value;
    std::memcpy(&value, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(address)), sizeof value);
    return value;
}
template <class... P, std::size_t... I>
int call(kp_status (*f)(P...), const std::uint64_t* args, std::index_sequence<I...>) {
    return static_cast<int>(f(load<P>(args[I])...));
}
template <class... P> int call(kp_status (*f)(P...), const std::uint64_t* args) {
    return call(f, args, std::index_sequence_for<P...>{});
}
template <class... P> std::size_t sizes(kp_status (*)(P...), std::size_t* out) {
    const std::size_t each[] = {sizeof(P)..., 0};
    std::memcpy(out, each, sizeof...(P) * sizeof(std::size_t));
    return sizeof...(P);
}
}  // namespace

extern "C" const char* kpx_last_error(void) { return flashinfer_last_error(); }
"""


def harness_source(symbols: list[str]) -> str:
    """C++ source: ``kpx_call_<i>(args)`` calls ``symbols[i]`` with each parameter read from the address in
    ``args[j]``; ``kpx_sizes_<i>(out)`` gives the parameters' sizes (checked against the ctypes values first)."""
    body = [HARNESS_HEAD]
    for i, sym in enumerate(symbols):
        body.append(f'extern "C" int kpx_call_{i}(const std::uint64_t* args) {{ return call(&{sym}, args); }}\n'
                    f'extern "C" std::size_t kpx_sizes_{i}(std::size_t* out) {{ return sizes(&{sym}, out); }}\n')
    return "\n".join(body)


def build_harness(lib_dir: Path, symbols: list[str], work: Path) -> ctypes.CDLL:
    """The harness for ``symbols`` compiled against ``lib_dir`` (include/, lib/libflashinfer.so) and loaded."""
    try:
        return compile_harness(harness_source(symbols), lib_dir, LIB, work, "flashinfer_harness")
    except RuntimeError as e:
        raise RuntimeError(f"g++ {lib_dir}: {str(e)[-2000:]}") from None


class Harness:
    def __init__(self, dll: ctypes.CDLL, symbols: list[str]) -> None:
        self.dll = dll
        self.index = {s: i for i, s in enumerate(symbols)}
        self.dll.kpx_last_error.restype = ctypes.c_char_p

    def caller(self, symbol: str, values: list[Any], *alive: Any) -> Callable[[], int]:
        """A call of ``symbol`` with ``values`` (ctypes objects, one per parameter: their bytes are the argument)."""
        i = self.index[symbol]
        sizes = (ctypes.c_size_t * 64)()
        szf = getattr(self.dll, f"kpx_sizes_{i}")
        szf.restype = ctypes.c_size_t
        n = szf(sizes)
        if n != len(values):
            raise TypeError(f"{symbol}: takes {n} parameters, {len(values)} given")
        for j, v in enumerate(values):
            if ctypes.sizeof(v) != sizes[j]:
                raise TypeError(f"{symbol}: parameter {j} is {sizes[j]} bytes in C++, {ctypes.sizeof(v)} here")
        addrs = (ctypes.c_uint64 * max(1, n))(*[ctypes.addressof(v) for v in values])
        fn = getattr(self.dll, f"kpx_call_{i}")
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p]
        keep = (values, addrs, alive)  # alive as long as the call is (``alive``: what the values point into)

        def go() -> int:
            return int(fn(ctypes.cast(keep[1], ctypes.c_void_p)))
        return go

    def last_error(self) -> str:
        msg = self.dll.kpx_last_error()
        return msg.decode() if msg else ""


# ------------------------------------------------------------------------------------------------ the run

def time_launches(fn: Callable[[], Any], reps: int) -> tuple[float, float]:
    """(kernel µs, host µs) per launch: ``corpus.gpu_timing.measure`` over ``max(5, reps // 5)`` batches of 10."""
    from corpus.gpu_timing import measure

    t = measure(fn, max(5, reps // 5), batch=10)
    return t.kernel_us, t.host_us


def written(c: Case) -> str:
    torch = _t()
    for i, t in enumerate(c.outputs):
        if t.dtype.is_floating_point and torch.isnan(t.float()).any():
            return f"output {i}: {int(torch.isnan(t.float()).sum())}/{t.numel()} elements not written"
    return ""


def run_one(kind: str, name: str, variant: str, make: Callable[[str], Case], lib: Any, harness: Harness | None,
            hdr: Header, symbol: str, reps: int) -> dict[str, Any]:
    import torch

    row: dict[str, Any] = {"kind": kind, "family": name, "variant": variant, "c": "-", "python": "-"}
    stream = torch.cuda.current_stream()
    try:
        proto = hdr.prototype(symbol)
        if kind != "host":  # a kernel entry's first parameter is the launch configuration, passed by c_launch
            if not proto or proto[0][0] != "kp_cfg":
                raise KeyError(f"{symbol}: first parameter is not kp_cfg")
            proto = proto[1:]
        if harness is None:
            raise RuntimeError("the C++ harness did not build")
    except Exception as e:  # noqa: BLE001
        row["c"] = f"FAIL prototype: {e}"
        proto = None

    def c_launch(c: Case) -> Callable[[], int]:
        assert proto is not None and harness is not None
        args = [*c.args, ctypes.c_void_p(stream.cuda_stream)] if c.host else c.args
        if len(args) != len(proto):
            raise TypeError(f"{symbol}: the case gives {len(args)} arguments, the prototype has {len(proto)}")
        vals = [c_value(t, v, torch) for (_, t), v in zip(proto, args)]
        if not c.host:
            cfg = KpLaunch((ctypes.c_uint32 * 3)(*c.grid), (ctypes.c_uint32 * 3)(*(c.block or (0, 0, 0))), c.smem,
                           (ctypes.c_uint32 * 3)(0, 0, 0), stream.cuda_stream)
            return harness.caller(symbol, [ctypes.c_void_p(ctypes.addressof(cfg)), *vals], cfg)
        return harness.caller(symbol, vals)

    def py_launch(c: Case) -> Callable[[], Any]:
        f = lib[name]  # the family's (or host program's) Python callable
        args = [None if isinstance(v, ctypes.c_void_p) else bytes(v) if isinstance(v, (ctypes.Array, ctypes.Structure))
                else v for v in c.args]  # a by-value C++ struct: its bytes
        if c.host:
            return lambda: f(*args)
        kw: dict[str, Any] = {"grid": c.grid}
        if c.smem:  # else the kernel's own LaunchSpec.dynamic_smem (sampling: sizeof(TempStorage)), as C's 0 means
            kw["smem"] = c.smem
        if c.block:
            kw["block"] = c.block
        return lambda: f(*args, **kw)

    for path, launcher in (("c", c_launch), ("python", py_launch)):
        if path == "c" and proto is None:
            continue
        try:
            torch.manual_seed(hash((name, variant, path)) & 0xFFFF)
            case = make(variant)
            go = launcher(case)
            st = go()
            torch.cuda.synchronize()
            if path == "c" and st != 0:
                raise RuntimeError(f"status {st}: {harness.last_error() if harness else ''}")
            problem = written(case) or (case.check() if case.check else "")
            if problem:
                row[path] = f"WRONG {problem}"
                continue
            row[path] = "ok"
            kernel_us, host_us = time_launches(go, reps)
            row[f"{path}_us"], row[f"{path}_host_us"] = round(kernel_us, 2), round(host_us, 2)
        except Exception as e:  # noqa: BLE001 - recorded, the run goes on
            row[path] = f"FAIL {type(e).__name__}: {str(e)[:300]}"
            row.setdefault("traceback", traceback.format_exc()[-1500:])
            torch.cuda.synchronize()
    if "c_us" in row and "python_us" in row:
        row["py_vs_c"] = round(row["python_us"] / row["c_us"], 3) if row["c_us"] == row["c_us"] else "-"
    return row


def run(gpu_dir: Path, out: Path, reps: int, only: list[str] | None, dry_run: bool) -> int:
    """The run over ``gpu_dir`` (.gpu/corpus-fi), its reports under ``out`` (the harness in a temporary folder); with
    ``dry_run``, only load the library, read every entry's prototype, find its case and build the harness."""
    manifest = json.loads((gpu_dir / "manifest.json").read_text())
    PagedKv.manifest = manifest
    so_path = gpu_dir / "lib" / f"lib{LIB}.so"
    hdr = Header((gpu_dir / "include" / f"{LIB}.h").read_text())
    import kernelpack

    lib = kernelpack.load(str(so_path))
    todo = [("kernel", f, a["variant"], f"{LIB}_{f}_{a['variant']}" if a["variant"] else f"{LIB}_{f}")
            for f, arts in manifest["families"].items() for a in arts]
    todo += [("host", h, v, s) for h, v, s in _host_entries(lib, manifest)]
    todo = [t for t in todo if not only or t[1] in only]
    problems = [f"{k} {f}: no GPU case" for k, f, _, _ in todo if f not in (HOST_CASES if k == "host" else CUDA_CASES)]
    for _, _, _, sym in todo:
        try:
            hdr.prototype(sym)
        except KeyError as e:
            problems.append(str(e))
    harness: Harness | None = None
    symbols = sorted({sym for _, _, _, sym in todo})
    try:
        so = build_harness(gpu_dir, symbols, Path(tempfile.mkdtemp(prefix="kp-flashinfer-harness-")))
        harness = Harness(so, symbols)
    except Exception as e:  # noqa: BLE001 - the Python path still runs; every C++ row says why not
        problems.append(f"C++ harness: {e}")
    print(f"{so_path}: {len(manifest['families'])} families, {len(manifest['host_programs'])} host programs, "
          f"{len(todo)} launches to check; problems: {problems or 'none'}")
    if dry_run:
        return 1 if problems else 0
    ensure_extension()
    import torch

    out.mkdir(parents=True, exist_ok=True)
    rows = []
    t0 = time.time()
    major, minor = torch.cuda.get_device_capability()
    device_sm = f"{major}{minor}"
    for kind, fam, variant, sym in todo:
        archs = entry_archs(manifest, kind, fam, variant)
        if archs and not runs_on(archs, (major, minor)):
            rows.append({"kind": kind, "family": fam, "variant": variant, "c": f"skipped: built for {archs}",
                         "python": f"skipped: device is sm_{device_sm}"})
            continue
        make = (HOST_CASES if kind == "host" else CUDA_CASES).get(fam)
        if make is None:
            rows.append({"kind": kind, "family": fam, "variant": variant, "c": "FAIL no GPU case",
                         "python": "FAIL no GPU case"})
            continue
        rows.append(run_one(kind, fam, variant, make, lib, harness, hdr, sym, reps))
        r = rows[-1]
        print(f"{fam:42s} {variant:28s} C++ {r['c'][:60]:10s} {r.get('c_us', '-'):>9} us  "
              f"Py {r['python'][:60]:10s} {r.get('python_us', '-'):>9} us", flush=True)
    ran = [r for r in rows if not r["c"].startswith("skipped")]
    ok = [r for r in ran if r["c"] == "ok" and r["python"] == "ok"]
    within = [r for r in ok if abs(r.get("py_vs_c", 1) - 1) <= 0.03]
    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "launches": len(ran),
               "skipped (no binary for this device)": len(rows) - len(ran),
               "both_ok": len(ok), "py_within_3pct_of_c": len(within), "seconds": round(time.time() - t0, 1),
               "reference": "torch float64 (FlashInfer's JIT needs nvcc, ninja and network: not on the GPU machine)"}
    write_report(out / "corpus_gpu_flashinfer.md", markdown(rows))
    print(json.dumps(summary, indent=1))
    (out / "corpus_gpu_flashinfer.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    return 0 if len(ok) == len(ran) else 1


def entry_archs(manifest: dict[str, Any], kind: str, fam: str, variant: str) -> list[str]:
    """The archs an entry carries binaries for, as the manifest says ([] when it does not)."""
    entries = manifest["host_programs" if kind == "host" else "families"].get(fam, [])
    return next((list(e.get("archs", [])) for e in entries if e.get("variant") == variant), [])


def markdown(rows: list[dict[str, Any]]) -> str:
    """The results as a markdown table (C++ is the g++ harness over the C library, Python is kernelpack.load):
    kernel time per launch (GPU, back to back behind a backlog) of each path and their ratio, then the host time
    to issue one launch of each."""
    out = ["| kind | family | variant | C++ | C++ kernel µs | Python | Python kernel µs | Python / C++ kernel | "
           "C++ host µs | Python host µs |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["kind"], r["family"], r["variant"] or "-", r["c"], r.get("c_us", "-"), r["python"],
                 r.get("python_us", "-"), r.get("py_vs_c", "-"), r.get("c_host_us", "-"), r.get("python_host_us", "-")]
        out.append("| " + " | ".join(str(c).replace("|", "\\|")[:160] for c in cells) + " |")
    return "\n".join(out)


def _host_entries(lib: Any, manifest: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(host program, variant, C symbol) of every entry, as the manifest lists them (checked against the library)."""
    out = []
    for name, entries in manifest["host_programs"].items():
        have = {c.info.symbol for c in lib.host_programs[name].calls}
        for e in entries:
            if e["symbol"] not in have:
                raise KeyError(f"host program {name}: {e['symbol']} is not in the library")
            out.append((name, e["variant"], e["symbol"]))
    return out

