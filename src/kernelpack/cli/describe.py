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
from . import facts


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
            "name": a.name, "variant": a.variant, "entry": a.entry, "params": facts.abi_params(a.abi),
            "launch": a.launch.to_json(), "provenance": a.provenance.to_json(), "binaries": per_arch,
            "config": facts.config(a), "grid": facts.grid_rule(a),
        }
        lays = layouts(a)
        if len(lays) > 1:  # the binaries of some archs take other kernel parameters (the same caller arguments)
            out["layouts"] = [{"archs": [str(b.arch) for b in a.binaries if layout_index(a, b) == i],
                               "params": facts.abi_params(abi)} for i, (abi, _) in enumerate(lays)]
        if a.requirements:
            out["requires"] = dict(a.requirements)
        if a.range_rules:
            out["ranges"] = [r.text() for r in a.range_rules]
        arts.append(out)
    return {"kind": "library" if library else "bundle", "artifacts": arts, "families": facts.dispatch(obj),
            "devices": facts.devices(obj)}


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
