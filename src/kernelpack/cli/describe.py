"""``kernelpack inspect``: what a cubin, bundle or built library holds, as rich tables or JSON."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ..bundle.kpack import MAGIC, Bundle, check_header
from ..core.cubin import Cubin, CubinKernel, is_cubin, read_cubin
from ..core.errors import KernelpackError
from ..core.files import read_bounded
from ..frontends.cuda.demangle import demangle, is_mangled, spell


def find_cuda_tool(name: str) -> str | None:
    """A CUDA binary tool (cuobjdump, nvdisasm): PATH, the toolkit, then the pip nvidia-* packages."""
    found = shutil.which(name)
    if found:
        return found
    from ..frontends.cuda.toolkit import toolkit_paths

    candidates = toolkit_paths(f"bin/{name}")
    return str(candidates[0]) if candidates else None


def load_any(path: str | os.PathLike[str], *, verify: bool = False) -> Cubin | Bundle:
    """Read a cubin, a .kpack bundle, or a library built by kernelpack (its embedded bundle): a regular file within
    ``KERNELPACK_MAX_FILE_BYTES`` (``kernelpack.core.files``), read once. ``verify``: a .kpack's dispatch records are
    compared with the ones its entries give too (``BundleIndex.verify``)."""
    data = read_bounded(path, "file", check_head=lambda head, size: _known_head(head, size, str(path)))
    if data.startswith(MAGIC):
        if verify:
            from ..bundle.index import BundleIndex

            index = BundleIndex(data, str(path))
            index.verify()  # every blob, chunk, binary and dispatch record
            return index.bundle()
        return Bundle.from_bytes(data, source=str(path))
    if is_cubin(data):
        return read_cubin(data)
    try:
        from ..bundle.embedded import read_embedded_bundle
    except ImportError:
        read_embedded_bundle = None  # type: ignore[assignment]
    if read_embedded_bundle is not None:
        return read_embedded_bundle(path, data=data)
    raise KernelpackError(f"{path}: not a cubin, a kernelpack bundle or a kernelpack library")


def _known_head(head: bytes, size: int, source: str) -> None:
    """Before the file is read whole: a bundle's header states its size; anything else must be an ELF file (cubin
    or library) or an ar archive."""
    if head.startswith(MAGIC):
        check_header(head, size, source)
    elif not head.startswith((b"\x7fELF", b"!<arch>\n")):
        raise KernelpackError(f"{source}: not a cubin, a kernelpack bundle or a kernelpack library")


def _resources(ck: CubinKernel) -> dict[str, Any]:
    return {
        "registers": ck.registers,
        "max_registers": ck.max_registers,
        "stack_bytes": ck.stack_bytes,
        "static_smem": ck.static_smem,
        "smem_reserved": ck.smem_reserved,
        "reqntid": list(ck.reqntid) if ck.reqntid else None,
        "max_threads": list(ck.max_threads) if ck.max_threads else None,
        "cluster_dims": list(ck.cluster_dims) if ck.cluster_dims else None,
        "explicit_cluster": ck.explicit_cluster,
        "param_bytes": ck.param_bytes,
    }


def _cxx_param_types(name: str) -> list[str] | None:
    if not is_mangled(name):
        return None
    try:
        return [spell(t) for t in demangle(name).params]
    except KernelpackError:
        return None


def describe(obj: Cubin | Bundle, *, library: bool = False) -> dict[str, Any]:
    """A JSON-ready description (the ``--json`` output); ``library``: the bundle came out of a built library (its
    ``kind`` is then ``library``)."""
    if isinstance(obj, Cubin):
        kernels = []
        for k in obj.kernels:
            types = _cxx_param_types(k.name)
            params = [{"ordinal": p.ordinal, "offset": p.offset, "size": p.size,
                       "c_type": types[i] if types and i < len(types) else None} for i, p in enumerate(k.params)]
            kernels.append({"name": k.name, "params": params, **_resources(k)})
        return {"kind": "cubin", "arch": str(obj.arch), "toolkit": obj.toolkit_version, "kernels": kernels}
    from ..launch.facts import layout_index, layouts

    arts = []
    for a in obj.artifacts:
        per_arch = []
        for b in a.binaries:
            # each binary's own launch facts (kernelpack.launch.facts): its arch's LaunchSpec and parameter layout
            entry: dict[str, Any] = {"arch": str(b.arch), "target": str(b.target), "kind": b.kind,
                                     "bytes": len(b.data), "sha256": b.sha256,
                                     "launch": a.launch_for(b.arch).to_json(), "layout": layout_index(a, b)}
            if b.kind == "cubin":
                ck = b.cubin.kernel(a.entry)
                entry.update(_resources(ck), offsets=list(a.abi_for(b.arch).offsets(ck.param_base)))
            per_arch.append(entry)
        out: dict[str, Any] = {
            "name": a.name, "variant": a.variant, "entry": a.entry, "params": _params(a.abi),
            "launch": a.launch.to_json(), "provenance": a.provenance.to_json(), "binaries": per_arch,
        }
        lays = layouts(a)
        if len(lays) > 1:  # the binaries of some archs take other kernel parameters (the same caller arguments)
            out["layouts"] = [{"archs": [str(b.arch) for b in a.binaries if layout_index(a, b) == i],
                               "params": _params(abi)} for i, (abi, _) in enumerate(lays)]
        if a.requirements:
            out["requires"] = dict(a.requirements)
        if a.range_rules:
            out["ranges"] = [r.text() for r in a.range_rules]
        arts.append(out)
    return {"kind": "library" if library else "bundle", "artifacts": arts}


def device_choice(obj: Cubin | Bundle, device: str) -> dict[str, Any]:
    """Which binary a device (``sm_120``, here or not) gets from each kernel family, by the launch model's rule
    (kernelpack.launch.binaries), as the C library's NAME_binary_for_device and ``mod.kernel.binary_for`` answer: per
    family ``binary`` (all its specializations agree), ``error`` (none has one, KP_ERROR_NO_BINARY_FOR_ARCH), or
    ``specializations`` (they differ: the answer of each)."""
    from ..launch.binaries import choice, device_arch, family_choice

    major, minor = device_arch(device)
    if isinstance(obj, Cubin):
        fams = {k.name: [(k.name, [(obj.arch, False)])] for k in obj.kernels}
    else:
        fams = {name: [(a.label, [(b.arch, b.kind == "ptx") for b in a.binaries]) for a in arts]
                for name, arts in obj.families().items()}
    out: dict[str, Any] = {}
    for name, specs in fams.items():
        binary, why, agreed = family_choice(name, specs, major, minor)
        if binary is not None:
            out[name] = {"binary": binary}
        elif agreed:
            out[name] = {"error": "KP_ERROR_NO_BINARY_FOR_ARCH", "message": why}
        else:
            out[name] = {"specializations": {label: choice(label, bins, major, minor)[0] or "no binary"
                                             for label, bins in specs}}
    runs = all("binary" in c or ("specializations" in c and "no binary" not in c["specializations"].values())
               for c in out.values())
    return {"device": f"sm_{major}{minor}", "families": out, "runs": runs}


def render_device(desc: dict[str, Any]) -> None:
    """Print :func:`device_choice` as a table: family, binary (or why none)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    t = Table("kernel", "binary", title=f"binaries a {desc['device']} device gets", title_justify="left")
    for name, c in desc["families"].items():
        if "binary" in c:
            text = c["binary"] + (" (JIT-compiled by the driver on first load)" if c["binary"].endswith("PTX") else "")
        elif "error" in c:
            text = f"{c['error']}: {c['message']}"
        else:
            text = "; ".join(f"{label}: {b}" for label, b in c["specializations"].items())
        t.add_row(escape(name), escape(text))
    Console(width=200).print(t)


def _params(abi: Any) -> list[dict[str, Any]]:
    return [{"name": p.name, "c_type": p.type.c_type, "size": p.type.size, "align": p.type.align,
             "divisibility": p.divisibility, "role": p.role} for p in abi.params]


def _dims(d: list[int] | None) -> str:
    return "x".join(map(str, d)) if d else "-"


def render(desc: dict[str, Any], *, verbose: bool = False) -> None:
    """Print the description as rich tables (``verbose``: each binary's provenance and hash too)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    res_cols = ("arch", "regs", "stack", "static smem", "block", "cluster", "param bytes", "dyn smem")

    def res_row(arch: str, r: dict[str, Any]) -> list[str]:
        ls = r.get("launch") or {}
        cluster = _dims(r["cluster_dims"]) + (" (explicit)" if r["explicit_cluster"] else "")
        if not r["explicit_cluster"] and ls.get("cluster"):
            cluster = f"{_dims(ls['cluster'])} (launch)"
        limit = f"<= {_dims(r['max_threads'])}" if r["max_threads"] else "any"
        block = _dims(r["reqntid"]) if r["reqntid"] else f"{_dims(ls['block'])} (fixed)" if ls.get("block") else limit
        smem = f"{r['static_smem']} (+{r['smem_reserved']} sys)" if r["smem_reserved"] else str(r["static_smem"])
        capped = r["max_registers"] and r["max_registers"] < 255
        regs = f"{r['registers']}" + (f" (cap {r['max_registers']})" if capped else "")
        return [arch, regs, str(r["stack_bytes"]), smem, block, cluster, str(r["param_bytes"]),
                str(ls.get("dynamic_smem") or 0)]

    if desc["kind"] == "cubin":
        console.print(f"[bold]cubin[/] {desc['arch']} (toolkit {desc['toolkit'] or 'unknown'}), "
                      f"{len(desc['kernels'])} kernel(s)")
        for k in desc["kernels"]:
            t = Table(title=escape(k["name"]), title_justify="left")
            for c in ("#", "C type", "offset", "size"):
                t.add_column(c)
            for p in k["params"]:
                t.add_row(str(p["ordinal"]), p["c_type"] or "?", str(p["offset"]), str(p["size"]))
            console.print(t)
            r = Table(*res_cols[:-1])
            r.add_row(*res_row(desc["arch"], k)[:-1])
            console.print(r)
        return
    console.print(f"[bold]{desc['kind']}[/], {len(desc['artifacts'])} kernel specialization(s)")
    for a in desc["artifacts"]:
        label = f"{a['name']}[{a['variant']}]" if a["variant"] else a["name"]
        prov = a["provenance"]
        requires = ", ".join(f"{n} == {v}" for n, v in a.get("requires", {}).items())
        flags = [f for f in ("pdl", "cooperative") if (a.get("launch") or {}).get(f)]
        console.print(f"\n[bold cyan]{escape(label)}[/]  entry {escape(a['entry'])}  "
                      f"({prov['frontend']} {prov['frontend_version']})"
                      + (f"  requires {requires}" if requires else "")
                      + (f"  when {escape(', '.join(a['ranges']))}" if a.get("ranges") else "")
                      + (f"  launch flags: {', '.join(flags)}" if flags else ""))
        lays = a.get("layouts") or [{"archs": [b["arch"] for b in a["binaries"]], "params": a["params"]}]
        for i, lay in enumerate(lays):
            cubins = [b for b in a["binaries"] if b["kind"] == "cubin" and b.get("layout", 0) == i]
            title = f"parameters of {', '.join(lay['archs'])}" if len(lays) > 1 else None
            t = Table("#", "name", "C type", "size", *[f"offset {b['arch']}" for b in cubins], title=title,
                      title_justify="left")
            for j, p in enumerate(lay["params"]):
                extra = f" /{p['divisibility']}" if p["divisibility"] > 1 else ""
                hidden = "" if p["role"] == "arg" else f" ({p['role']})"
                t.add_row(str(j), p["name"] + hidden, p["c_type"] + extra, str(p["size"]),
                          *[str(b["offsets"][j]) for b in cubins])
            console.print(t)
        r = Table(*res_cols, "bytes")
        for b in a["binaries"]:
            if b["kind"] == "cubin":
                r.add_row(*res_row(b["arch"], b), str(b["bytes"]))
            else:
                r.add_row(b["target"] + " PTX", *["-"] * (len(res_cols) - 1), str(b["bytes"]))
        console.print(r)
        if verbose:
            opts = " ".join(prov.get("options") or []) or "-"
            console.print(f"  compiler {escape(str(prov.get('compiler') or '?'))}; options {escape(opts)}; source "
                          f"sha256 {prov.get('source_sha256') or '-'}", highlight=False)
            for b in a["binaries"]:
                console.print(f"  {b['target'] if b['kind'] == 'ptx' else b['arch']} {b['kind']} sha256 {b['sha256']}",
                              highlight=False)


def disassemble(obj: Cubin | Bundle, path: str | os.PathLike[str]) -> str:
    """SASS of every cubin, via cuobjdump (or nvdisasm); a KernelpackError saying how to get it when absent."""
    tool = find_cuda_tool("cuobjdump")
    if tool is None:
        raise KernelpackError("--sass needs cuobjdump: pip install 'kernelpack[tools]' "
                              "(nvidia-cuda-cuobjdump) or install the CUDA toolkit")
    blobs: list[tuple[str, bytes]]
    if isinstance(obj, Cubin):
        blobs = [(str(obj.arch), read_bounded(path, "cubin"))]
    else:
        seen: dict[str, tuple[str, bytes]] = {}
        for a in obj.artifacts:
            for b in a.binaries:
                if b.kind == "cubin":
                    seen.setdefault(b.sha256, (f"{a.label} {b.arch}", b.data))
        blobs = list(seen.values())
    out = []
    with tempfile.TemporaryDirectory(prefix="kernelpack-sass-") as tmp:
        for i, (label, data) in enumerate(blobs):
            f = Path(tmp) / f"{i}.cubin"
            f.write_bytes(data)
            proc = subprocess.run([tool, "-sass", str(f)], capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise KernelpackError(f"{tool} failed on {label}", log=proc.stderr)
            out.append(f"// ===== {label}\n{proc.stdout}")
    return "\n".join(out)
