"""``kernelpack.load``: a bundle or a built library as a module with one attribute per kernel family."""

from __future__ import annotations

import os
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._reprs import clip_left, listing
from ..bundle import MAGIC, Bundle
from ..errors import BundleError
from ..names import py_name
from . import docs
from .family import KernelFamily
from .fast import PyLauncher, make_launcher, prepare_fast_path
from .host import HostFamily, SharedLibrary
from .loader import Loader

if TYPE_CHECKING:
    from ..cute_host.manifest import HostEntryInfo


@dataclass
class _State:
    """A module's own state, kept off its attribute namespace (any identifier can be a kernel's name)."""

    source: str
    loader: Loader
    bundle: Bundle
    families: dict[str, KernelFamily] = field(default_factory=dict)
    hosts: dict[str, HostFamily] = field(default_factory=dict)
    callables: dict[str, Any] = field(default_factory=dict)  # every family and host program by its own name


_STATE = "<kernelpack>"  # the key of _State in the module's __dict__: not an identifier, so no kernel can take it


class KernelModule(types.ModuleType):
    """The kernels of one bundle: ``mod.name(*args, grid=..., ...)`` launches family ``name``; a built library's
    CuTe host programs are callables too (``mod.gemm(a, b, c)``, see :mod:`kernelpack.runtime.host`).

    A kernel whose name is a Python keyword, a dunder or one of the module's own attributes (``preload``,
    ``bundle``, ...) is reachable as ``name_`` (:func:`kernelpack.names.py_name`); ``mod["name"]`` reaches any
    kernel by its own name.

    Nothing touches the driver until the first launch on a device (or :meth:`preload`); each binary is loaded once
    per process, each device's choice of binaries once per device.
    """

    def __init__(self, bundle: Bundle, source: str, host: Sequence[HostEntryInfo] = (), archive: bool = False) -> None:
        name = Path(source).name.split(".")[0] if source != "<bundle>" else "bundle"
        super().__init__(f"kernelpack.loaded.{name}")
        self.__file__ = source
        st = _State(source, Loader(source), bundle)
        vars(self)[_STATE] = st
        for fname, arts in bundle.families().items():
            fam = KernelFamily(fname, arts, st.loader)
            launcher = make_launcher(fam)
            launcher.__name__ = launcher.__qualname__ = fname
            launcher.__module__ = self.__name__
            launcher.__doc__ = docs.doc_text(fam, source)
            launcher.__signature__ = docs.signature(fam)
            launcher._kp_repr = docs.repr_text(fam)
            launcher.family = fam
            st.families[fname] = fam
            st.callables[fname] = launcher
        st.hosts = _host_families(host, source, archive)
        for hname, hfam in st.hosts.items():
            if hname not in st.families:
                st.callables[hname] = _host_callable(hfam, self.__name__, source)
        self._publish(st.callables)
        self.__all__ = sorted(n for n in vars(self) if n in st.callables or n.removesuffix("_") in st.callables)
        self.__doc__ = self._doc(source)

    def _publish(self, callables: dict[str, Any]) -> None:
        """Each callable as an attribute under its Python name; where a renamed one meets another kernel's own
        name, the kernel that has that name keeps the attribute (the other stays reachable as ``mod[name]``)."""
        ns = vars(self)
        own = _own_names()
        attrs = {n: py_name(n, own) for n in callables}
        for n, attr in sorted(attrs.items(), key=lambda kv: kv[0] != kv[1]):  # unrenamed first
            if attr not in ns:
                ns[attr] = callables[n]

    @property
    def _st(self) -> _State:
        return vars(self)[_STATE]  # type: ignore[no-any-return]

    def _doc(self, source: str) -> str:
        st = self._st
        lines = []
        if st.families or not st.hosts:
            lines.append(f"{len(st.families)} kernel famil{'ies' if len(st.families) != 1 else 'y'} "
                         f"({len(st.bundle)} specializations) loaded from {source}:")
        lines += [f"  {docs.signature_text(f)}" for f in st.families.values()]
        if st.hosts:
            lines.append(f"{len(st.hosts)} CuTe host program(s) (C entries of {source}):")
            lines += [f"  {h.signature_text()}" for h in st.hosts.values()]
        return "\n".join(lines)

    @property
    def bundle(self) -> Bundle:
        return self._st.bundle

    @property
    def families(self) -> dict[str, KernelFamily]:
        return dict(self._st.families)

    @property
    def host_programs(self) -> dict[str, HostFamily]:
        """The CuTe host programs by name (also attributes, unless a kernel family has the same name)."""
        return dict(self._st.hosts)

    def preload(self, device: int | None = None) -> None:
        """Load every kernel for ``device`` (default: every visible device) now instead of at first launch."""
        prepare_fast_path()
        st = self._st
        d = st.loader.driver
        ordinals = range(d.device_count()) if device is None else [device]
        for o in ordinals:
            for fam in st.families.values():
                fam.preload(o)

    def __getitem__(self, name: str) -> Any:
        """The kernel family or host program called ``name`` (its own name, whatever its attribute is)."""
        try:
            return self._st.callables[name]
        except KeyError:
            raise KeyError(f"{self.__file__} has no kernel {name!r}; kernels: {self._known()}") from None

    def _known(self) -> str:
        return ", ".join(sorted(self._st.callables)) or "none"

    def __repr__(self) -> str:
        return (f"<kernelpack module from {clip_left(repr(self.__file__), 120)}: "
                f"{listing(self._st.callables, 120) or 'no kernels'}>")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or _STATE not in vars(self):
            raise AttributeError(name)
        raise AttributeError(f"{self.__file__} has no kernel {name!r}; kernels: {self._known()}")


def _own_names() -> frozenset[str]:
    """What a KernelModule defines itself: no kernel may shadow these."""
    return frozenset(n for n in dir(KernelModule) if not n.startswith("_")) | {"__file__", "__all__", "__doc__"}


def read_any(path: str | os.PathLike[str]) -> Bundle:
    """A ``.kpack`` bundle, or the bundle embedded in a library built by kernelpack (``libNAME.so``/``.a``)."""
    return _read(path)[0]


def _read(path: str | os.PathLike[str]) -> tuple[Bundle, tuple[HostEntryInfo, ...], bool]:
    """The bundle, the host programs' descriptions and whether ``path`` is a static archive."""
    from ..files import read_head

    p = Path(path)
    if read_head(p, len(MAGIC), "bundle or library", error=BundleError) == MAGIC:  # regular files within the limit
        return Bundle.read(p), (), False
    try:
        from ..clib.embedded import read_embedded
    except ImportError as e:
        raise BundleError(f"{path} is not a .kpack bundle, and reading kernels from built libraries needs "
                          f"kernelpack.clib ({e})") from None
    found = read_embedded(p)
    if not found.bundles and not found.host_programs:
        raise BundleError(f"{path}: no kernelpack bundle inside (no .kpack section; not built by kernelpack?)")
    bundle = found.bundles[0] if len(found.bundles) == 1 else Bundle.of(*found.bundles)
    return bundle, found.host_programs, found.archive


def load(source: str | os.PathLike[str] | Bundle) -> KernelModule:
    """Load a ``.kpack`` bundle, a built ``libNAME.so`` / ``libNAME.a``, or a :class:`Bundle` in memory.

    Returns a module with one callable per kernel family, and one per CuTe host program linked into a library::

        kernels = kernelpack.load("kernels.kpack")
        kernels.axpy(0.5, x, y, x.numel(), grid=blocks, block=256)
        lib = kernelpack.load("libgemm.so")
        lib.gemm(a, b, c)  # host program: its C entry computes grid, TMA descriptors, cluster launch

    Host programs need the shared library: Python cannot load a static archive's code, so from ``libNAME.a`` they
    are listed but refuse to run.
    """
    if isinstance(source, Bundle):
        return KernelModule(source, "<bundle>")
    bundle, hosts, archive = _read(source)
    return KernelModule(bundle, str(source), hosts, archive)


def _host_families(infos: Sequence[HostEntryInfo], source: str, archive: bool) -> dict[str, HostFamily]:
    """One callable per host-program name; variants that take different arguments get one each (``name_variant``)."""
    if not infos:
        return {}
    lib = SharedLibrary(source, archive)
    groups: dict[str, list[HostEntryInfo]] = {}
    for i in infos:
        groups.setdefault(i.name, []).append(i)
    out: dict[str, HostFamily] = {}
    for name, group in groups.items():
        try:
            out[name] = HostFamily(name, group, lib)
        except ValueError:
            for i in group:
                out[i.symbol.removeprefix(f"{i.library}_")] = HostFamily(i.symbol.removeprefix(f"{i.library}_"),
                                                                         [i], lib)
    return out


def _host_callable(fam: HostFamily, module: str, source: str) -> PyLauncher:
    fn = PyLauncher(fam)
    fn.__name__ = fn.__qualname__ = fam.name  # type: ignore[attr-defined]
    fn.__module__ = module
    fn.__doc__ = fam.doc(source)
    fn.__signature__ = fam.signature()  # type: ignore[attr-defined]
    fn._kp_repr = fam.repr_text()  # type: ignore[attr-defined]
    fn.host_program = fam  # type: ignore[attr-defined]
    return fn
