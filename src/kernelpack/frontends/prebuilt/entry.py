"""Prebuilt binaries: cubins and fatbins from any nvcc/ptxas build, shipped like kernels kernelpack compiled.

    bundle = kernelpack.prebuilt.compile(["kernels.fatbin"], {
        "add": "const float* x, const float* y, float* out, int n",   # extern "C": its C parameter list
        "_Z5scaleIfEvT_PS0_l": None,                                  # C++: the mangled name spells the types
    })

``files``: cubins, fatbins (split into their per-arch cubins and PTX: :mod:`kernelpack.frontends.prebuilt.fatbin`), PTX
text, or host
objects / shared libraries / executables whose ``.nv_fatbin`` section holds the device code; paths or bytes.
``kernels``: per kernel entry symbol (mangled for C++), its C parameter list, an :class:`~kernelpack.core.abi.Abi`, None
(a mangled C++ symbol spells its parameter types) or a :class:`Kernel` (also naming the family, the variant and the
launch). Kernels the binaries hold but ``kernels`` does not list are ignored. Each binary's arch is its own (the
cubin's ELF header, the PTX ``.target``); every listed kernel must be in a binary of every arch that holds any of
them, and its ABI is verified against every cubin's parameter table (and every PTX entry's parameter sizes).

In a project, ``[[cubin]]``::

    [[cubin]]
    files = ["prebuilt/kernels.fatbin", "prebuilt/*.cubin"]   # globs, relative to the project
    archs = ["sm_80", "sm_90a", "compute_90"]                # optional: keep only these binaries

    [cubin.kernels]                                          # symbol = C parameter list, or a table
    add = "const float* x, const float* y, float* out, int n"
    _Z5scaleIfEvT_PS0_l = { name = "scale", variant = "f32", block = [256] }   # + params, dynamic_smem, pdl, ...
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from ...bundle.artifact import KernelArtifact, Provenance
from ...bundle.kpack import Bundle
from ...core.abi import Abi
from ...core.arch import Arch
from ...core.binary import Binary
from ...core.cubin import CubinKernel, KParam, is_cubin, read_cubin
from ...core.errors import AbiError, AbiMismatch, CompileError, CubinError, KernelpackError, ProjectError
from ...core.files import read_bounded
from ...core.launchspec import LaunchSpec
from ...core.ptx import PtxParam, ptx_entries, ptx_target, verify_ptx_abi
from ...core.verify import verify_abi
from ...core.version import __version__
from .. import fields as fl
from ..base import Entry, Frontend, Output, Step
from ..cuda.cxxtypes import abi_from_cxx, abi_from_params
from ..cuda.demangle import demangle, is_mangled, spell
from .fatbin import fatbin_section, is_fatbin, is_host_elf, read_fatbin

FileSpec = str | os.PathLike[str] | bytes
ArchSpec = str | Arch | Sequence[str | Arch]
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Kernel:
    """How to ship one kernel of the binaries, where a C parameter list alone is not enough.

    ``params``: a C parameter list (``"const float* x, int n"``; any other type name is a struct passed by value,
    sized by the cubin), an :class:`Abi`, or None (a mangled C++ symbol spells its parameter types). ``name``: the
    family (default: the symbol, or the C++ function's name). ``variant``: default the C++ template arguments
    (``scale<float>`` -> ``float``), else none. ``launch``: what a launch must use (block for a kernel written for
    one block shape, dynamic shared memory...).
    """

    params: str | Abi | None = None
    _: KW_ONLY
    name: str | None = None
    variant: str | None = None
    launch: LaunchSpec | None = None

    def __post_init__(self) -> None:
        if self.params is not None and not isinstance(self.params, (str, Abi)):
            raise CompileError(f"Kernel.params must be a C parameter list, an Abi or None (got "
                               f"{type(self.params).__name__} {self.params!r:.60})")
        if self.name is not None and not (isinstance(self.name, str) and _IDENT.match(self.name)):
            raise CompileError(f"Kernel.name must be a C identifier (got {self.name!r:.60})")
        if self.variant is not None and not (isinstance(self.variant, str) and re.fullmatch(r"\w*", self.variant,
                                                                                             re.ASCII)):
            raise CompileError(f"Kernel.variant may hold only letters, digits and _ (got {self.variant!r:.60})")
        if self.launch is not None and not isinstance(self.launch, LaunchSpec):
            raise CompileError(f"Kernel.launch must be a LaunchSpec (got {type(self.launch).__name__})")


KernelSpec = str | Abi | Kernel | None


@dataclass(frozen=True)
class Image:
    """One binary found in the inputs (a cubin or PTX; a fatbin holds several), with the kernels it holds."""

    where: str  # "k.fatbin: entry 2 (byte 5048)" | "k80.cubin"
    binary: Binary
    kernels: Mapping[str, CubinKernel | tuple[PtxParam, ...]]  # entry symbol -> its parameter table

    @property
    def key(self) -> tuple[str, Arch]:
        return self.binary.kind, self.binary.arch

    @property
    def name(self) -> str:
        """``sm_90a`` for a cubin, ``compute_90 PTX`` for PTX."""
        return _arch_name(self.key)


def compile(  # noqa: A001 - the frontend verb, as kernelpack.cuda.compile
    files: FileSpec | Sequence[FileSpec],
    kernels: str | Sequence[str] | Mapping[str, KernelSpec],
    *,
    arch: ArchSpec | None = None,
    launch: LaunchSpec | Mapping[str, LaunchSpec] | None = None,
) -> Bundle:
    """Ship the ``kernels`` of prebuilt binaries as a bundle (see the module's description).

    ``arch``: keep only the binaries of these archs (``sm_80`` a cubin, ``compute_90`` PTX); default: all.
    ``launch``: a LaunchSpec for every kernel, or per symbol (a :class:`Kernel`'s own ``launch`` wins).
    """
    return _ship(_specs(kernels, launch), _select(read_binaries(files), arch))


def _ship(specs: dict[str, Kernel], bins: list[Image]) -> Bundle:
    """One artifact per kernel, with its binary of every arch in play (every arch holding any listed kernel)."""
    in_play = sorted({b.key for b in bins if any(s in b.kernels for s in specs)}, key=_order)
    held = sorted({k for b in bins for k in b.kernels})
    artifacts = []
    for symbol, spec in specs.items():
        if not any(symbol in b.kernels for b in bins):
            raise CompileError(f"kernel {symbol}: in none of the binaries ({_carried(bins)}); they hold: "
                               f"{', '.join(held) or 'no kernels'}")
        chosen = [_pick(symbol, key, bins) for key in in_play]
        artifacts.append(_artifact(symbol, spec, chosen))
    return Bundle(tuple(artifacts))


# ------------------------------------------------------------------------------------------------ inputs


def read_binaries(files: FileSpec | Sequence[FileSpec]) -> list[Image]:
    """Every cubin and PTX in ``files`` (fatbins and host objects split), in input order."""
    items = [files] if isinstance(files, (str, bytes, os.PathLike)) else list(files)
    if not items:
        raise CompileError("no files given: pass cubins, fatbins or objects with device code")
    out: list[Image] = []
    for i, f in enumerate(items):
        if not isinstance(f, (bytes, str, os.PathLike)):
            raise CompileError(f"files[{i}]: expected a path or bytes (got {type(f).__name__})")
        name = f"bytes #{i + 1}" if isinstance(f, bytes) else str(f)
        try:
            out += _split(name, f if isinstance(f, bytes) else read_bounded(f, "prebuilt binary", error=CubinError))
        except MemoryError:  # what its entries expand to is within KERNELPACK_MAX_FILE_BYTES, the memory here is not
            raise CubinError(f"{name}: not enough memory to read the binaries it holds (their sizes are within "
                             f"KERNELPACK_MAX_FILE_BYTES: lower it to refuse such files before reading them)") from None
    return out


def _split(name: str, data: bytes) -> list[Image]:
    if is_cubin(data):
        return [_cubin(name, data)]
    if is_fatbin(data) or is_host_elf(data):
        if is_host_elf(data):
            section = fatbin_section(data, name)
            if section is None:
                raise CubinError(f"{name}: an ELF file with no .nv_fatbin section (no CUDA device code in it)")
            data, name = section, f"{name} (.nv_fatbin)"
        entries = read_fatbin(data, name)
        return [_cubin(e.where, e.data) if e.kind == "cubin" else _ptx(e.where, e.data) for e in entries]
    if b".entry" in data[:1 << 20] and b".target" in data[:1 << 20]:
        return [_ptx(name, data.rstrip(b"\0"))]
    raise CubinError(f"{name}: not a cubin, a fatbin, PTX or an object with CUDA device code (starts with "
                     f"{bytes(data[:8])!r})")


def _cubin(where: str, data: bytes) -> Image:
    try:
        c = read_cubin(data)
    except CubinError as e:
        raise CubinError(f"{where}: {e.message}") from None
    return Image(where, Binary(c.arch, bytes(data)), {k.name: k for k in c.kernels})


def _ptx(where: str, data: bytes) -> Image:
    try:
        text = data.decode()
        return Image(where, Binary(ptx_target(text), bytes(data), "ptx"), ptx_entries(text))
    except UnicodeDecodeError:
        raise CubinError(f"{where}: PTX that is not UTF-8 text") from None
    except KernelpackError as e:
        raise CubinError(f"{where}: {e.message}") from None


def _arch_name(key: tuple[str, Arch]) -> str:
    kind, a = key
    return str(a) if kind == "cubin" else f"compute_{a.major}{a.minor}{a.suffix} PTX"


def _order(key: tuple[str, Arch]) -> tuple[int, Arch]:
    return (0 if key[0] == "cubin" else 1), key[1]


def _carried(bins: list[Image]) -> str:
    return ", ".join(_arch_name(k) for k in sorted({b.key for b in bins}, key=_order)) or "nothing"


def _select(bins: list[Image], arch: ArchSpec | None) -> list[Image]:
    if arch is None:
        return bins
    wanted: set[tuple[str, Arch]] = set()
    for a in [arch] if isinstance(arch, (str, Arch)) else list(arch):
        parsed = Arch.parse(a)  # compute_XY: the PTX of that virtual arch
        wanted.add(("ptx" if parsed.virtual else "cubin", parsed.real))
    missing = [_arch_name(k) for k in sorted(wanted - {b.key for b in bins}, key=_order)]
    if missing:
        raise CompileError(f"arch {', '.join(missing)} asked for, but the binaries carry {_carried(bins)}")
    return [b for b in bins if b.key in wanted]


# ------------------------------------------------------------------------------------------------ kernels


def _specs(kernels: str | Sequence[str] | Mapping[str, KernelSpec],
           launch: LaunchSpec | Mapping[str, LaunchSpec] | None) -> dict[str, Kernel]:
    if isinstance(kernels, str):
        kernels = [kernels]
    pairs = list(kernels.items()) if isinstance(kernels, Mapping) else [(k, None) for k in kernels]
    if not pairs:
        raise CompileError("no kernels named: pass {symbol: 'C parameter list'}")
    out: dict[str, Kernel] = {}
    for symbol, v in pairs:
        if not isinstance(symbol, str) or not symbol:
            raise CompileError(f"kernel symbols must be non-empty strings (got {symbol!r:.60})")
        k = v if isinstance(v, Kernel) else Kernel(v)
        if k.launch is None and launch is not None:
            k = replace(k, launch=launch.get(symbol) if isinstance(launch, Mapping) else launch)
        out[symbol] = k
    return out


def _pick(symbol: str, key: tuple[str, Arch], bins: list[Image]) -> Image:
    """The one binary of ``key`` holding ``symbol`` (identical copies are one)."""
    same = [b for b in bins if b.key == key]
    found = {b.binary.sha256: b for b in same if symbol in b.kernels}
    if not found:
        held = "; ".join(f"{b.where} holds {', '.join(b.kernels) or 'no kernels'}" for b in same)
        raise CompileError(f"kernel {symbol}: not in the {_arch_name(key)} binaries ({held}); every arch that holds "
                           f"any of the listed kernels must hold them all (choose archs, or list these kernels in "
                           f"their own call or [[cubin]] entry)")
    if len(found) > 1:
        raise CompileError(f"kernel {symbol}: in {len(found)} different {_arch_name(key)} binaries: "
                           f"{', '.join(b.where for b in found.values())}")
    return next(iter(found.values()))


def symbol_names(symbol: str) -> tuple[str, str]:
    """(family, variant) an entry symbol names by itself: a C++ symbol its function's name and its template arguments
    made an identifier (``scale<float>`` -> ``scale``, ``float``); any other symbol itself and no variant."""
    if is_mangled(symbol):
        try:
            d = demangle(symbol)
            targs = f"<{','.join(spell(t) for t in d.template_args)}>" if d.template_args else ""
        except KernelpackError:
            return symbol, ""
        return d.name.split("::")[-1], re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", targs)).strip("_")
    return symbol, ""


def _names(symbol: str, spec: Kernel) -> tuple[str, str]:
    """(family, variant): given, else from the symbol (:func:`symbol_names`)."""
    name, variant = symbol_names(symbol)
    name = spec.name or name
    if not _IDENT.match(name):
        raise CompileError(f"kernel {symbol}: {name!r} is not a C identifier; name it: Kernel(..., name='...') "
                           f"({{ name = \"...\" }} in a [[cubin]] table)")
    return name, variant if spec.variant is None else spec.variant


def _abi(symbol: str, label: str, spec: Kernel, ck: CubinKernel) -> Abi:
    if isinstance(spec.params, Abi):
        return spec.params
    if isinstance(spec.params, str):
        return abi_from_params(spec.params, ck, label)
    if not is_mangled(symbol):
        raise CompileError(f"kernel {label}: the extern \"C\" symbol {symbol} does not spell its parameter types; "
                           f"give its C parameter list: {{'{symbol}': 'const float* x, int n'}}")
    try:
        types = demangle(symbol).params
    except KernelpackError as e:
        raise CompileError(f"kernel {label}: {e.message}; give its C parameter list") from None
    try:
        return abi_from_cxx(types, [f"p{i}" for i in range(len(types))], ck, label, "give its C parameter list")
    except AbiError as e:
        raise CompileError(e.message) from None


def _ptx_kernel(symbol: str, params: tuple[PtxParam, ...]) -> CubinKernel:
    """A parameter table laid out from PTX alone (natural alignment), to size structs of PTX-only kernels."""
    kps, off = [], 0
    for i, p in enumerate(params):
        off = -(-off // p.align) * p.align
        kps.append(KParam(i, off, p.size))
        off += p.size
    return CubinKernel(symbol, tuple(kps), param_bytes=off, param_base=0, registers=0, stack_bytes=0, frame_bytes=0,
                       static_smem=0, smem_reserved=0, reqntid=None, max_threads=None, max_registers=None,
                       cluster_dims=None, explicit_cluster=False, max_cluster_rank=None)


def _artifact(symbol: str, spec: Kernel, chosen: list[Image]) -> KernelArtifact:
    name, variant = _names(symbol, spec)
    label = f"{name}[{variant}]" if variant else name
    first = chosen[0]
    entry = first.kernels[symbol]
    ck = entry if isinstance(entry, CubinKernel) else _ptx_kernel(symbol, entry)
    abi = _abi(symbol, label, spec, ck)
    for b in chosen:
        try:
            e = b.kernels[symbol]
            if isinstance(e, CubinKernel):
                verify_abi(label, abi, e, b.binary.arch)
            else:
                verify_ptx_abi(label, abi, symbol, e, b.binary.arch)
        except AbiMismatch as err:
            raise AbiMismatch(f"{b.where}: {err.message}") from None
    toolkits = sorted({b.binary.cubin.toolkit_version or "?" for b in chosen if b.binary.kind == "cubin"})
    source = hashlib.sha256("".join(b.binary.sha256 for b in chosen).encode()).hexdigest()
    provenance = Provenance("prebuilt", __version__, f"ptxas {', '.join(toolkits)}" if toolkits else "PTX", (),
                            source)
    return KernelArtifact(name, symbol, abi, tuple(b.binary for b in chosen), spec.launch or LaunchSpec(),
                          provenance, variant)


# ------------------------------------------------------------------------------------------------ [[cubin]]

_TABLE_KEYS = ("params", "name", "variant", "block", "dynamic_smem", "pdl", "cooperative")
FILES = fl.rule(lambda v: fl.is_sequence(v) and len(v) > 0 and all(
    isinstance(x, (str, os.PathLike)) and str(x) for x in v), "a non-empty list of paths or globs")
KERNELS = fl.rule(lambda v: (fl.is_sequence(v) and len(v) > 0 and all(isinstance(x, str) for x in v)) or (
    fl.str_key_map(v, lambda x: isinstance(x, (str, Mapping, Kernel, Abi))) and len(v) > 0),
    "a non-empty table {symbol = \"C parameter list\" or {params = ..., name = ..., variant = ..., block = [...]}}, "
    "or a list of mangled C++ symbols")


@dataclass(frozen=True)
class Cubin(Entry):
    """Prebuilt binaries: ``kernelpack.prebuilt.compile(files, kernels, arch=archs)``; one build step."""

    frontend: ClassVar[str] = "cubin"
    rules: ClassVar[Mapping[str, fl.Check]] = {"files": FILES, "kernels": KERNELS}
    files: Sequence[str | os.PathLike[str]] = ()
    kernels: Mapping[str, Any] | Sequence[str] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.kernels, Mapping):
            _table_kernels(self.kernels)  # its tables' keys and values, checked where the entry is read


class PrebuiltFrontend(Frontend[Cubin]):
    name = "cubin"
    title = "prebuilt cubins and fatbins"
    entry = Cubin
    api = "kernelpack.prebuilt"
    library_archs = False  # the binaries' own archs (``archs`` only filters)

    def label(self, entry: Cubin, root: Path) -> str:
        return str(entry.files[0]) if entry.files else ""

    def files(self, entry: Cubin, root: Path) -> list[Path]:
        return [p for pat in entry.files for p in _glob(root, pat)]

    def missing(self, entry: Cubin, root: Path) -> list[tuple[str, str]]:
        return [("files", f"{str(pat)!r} matches no file (under {root})") for pat in entry.files
                if not _glob(root, pat)]

    def build(self, entry: Cubin, step: Step) -> Output:
        paths = []
        for pat in entry.files:
            found = _glob(step.root, pat)
            if not found:
                raise ProjectError(f"cubin entry {self.label(entry, step.root)}: {str(pat)!r} matches no file")
            paths += [p for p in found if p not in paths]
        kernels = _table_kernels(entry.kernels) if isinstance(entry.kernels, Mapping) else list(entry.kernels)
        bundle = _ship(_specs(kernels, None), _select(read_binaries(paths), list(step.archs) or None))
        return Output("bundle", bundle.to_bytes())


def _glob(root: Path, pattern: str | os.PathLike[str]) -> list[Path]:
    full = os.path.join(root, pattern)
    if not glob.has_magic(full):
        return [Path(full).resolve()] if os.path.exists(full) else []
    return sorted(Path(p).resolve() for p in glob.glob(full, recursive=True) if os.path.isfile(p))


def _table_kernels(kernels: Mapping[str, Any]) -> dict[str, KernelSpec]:
    out: dict[str, KernelSpec] = {}
    for symbol, v in kernels.items():
        if not isinstance(v, Mapping):
            out[symbol] = v
            continue
        where = f"kernels.{symbol}"
        unknown = sorted(set(v) - set(_TABLE_KEYS))
        if unknown:
            raise ProjectError(f"{where}: unknown key(s) {unknown}; expected some of {list(_TABLE_KEYS)}")
        try:
            launch = LaunchSpec(block=v.get("block"), dynamic_smem=v.get("dynamic_smem"), pdl=v.get("pdl", False),
                                cooperative=v.get("cooperative", False))
            out[symbol] = Kernel(v.get("params"), name=v.get("name"), variant=v.get("variant"),
                                 launch=None if launch == LaunchSpec() else launch)
        except KernelpackError as e:
            raise ProjectError(f"{where}: {e.message}") from None
    return out


FRONTEND = PrebuiltFrontend()
