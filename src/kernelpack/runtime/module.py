"""``kernelpack.load``: a bundle or a built library as a module with one attribute per kernel family."""

from __future__ import annotations

import os
import sys
import threading
import types
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from ..bundle.magic import MAGIC
from ..core._reprs import clip, clip_left, listing
from ..core.errors import BundleError
from ..core.names import py_name
from ..core.suggest import hint
from .fast import PyLauncher, extension

# The kernel-family machinery (the .kpack reader, the bundle index, KernelFamily, the loader, the launch model's
# device and binary rules) is imported when a module first builds a kernel family: a library of CuTe host programs
# only never imports it (tests/test_runtime_imports.py).
if TYPE_CHECKING:
    from ..argtypes import Kernel
    from ..bundle.artifact import KernelArtifact
    from ..bundle.host_manifest import HostEntryInfo
    from ..bundle.index import BundleIndex
    from ..bundle.kpack import Bundle
    from .family import KernelFamily
    from .host import HostFamily
    from .loader import Loader


_KPACK = f"{__name__.rsplit('.', 2)[0]}.bundle.kpack"  # kernelpack.bundle.kpack, or a wheel's copy of it


def _is_bundle(obj: Any) -> TypeGuard[Bundle]:
    """Whether ``obj`` is a :class:`Bundle` (an instance means its module was imported: nothing is imported here)."""
    kpack = sys.modules.get(_KPACK)
    return kpack is not None and isinstance(obj, kpack.Bundle)


class _BundleFamilies:
    """A Bundle in memory seen as a BundleIndex: its families by name."""

    def __init__(self, bundle: Bundle) -> None:
        self._bundle = bundle
        self._families = bundle.families()

    def __len__(self) -> int:
        return len(self._bundle)

    def names(self) -> list[str]:
        return list(self._families)

    def family(self, name: str) -> tuple[KernelArtifact, ...]:
        return self._families[name]

    def family_specs(self, name: str) -> tuple[KernelArtifact, ...]:
        return self._families[name]

    def family_record(self, name: str) -> None:
        if name not in self._families:
            raise KeyError(name)
        return None  # the artifacts are at hand: the family is built from them

    def bundle(self) -> Bundle:
        return self._bundle


class _NoKernels:
    """The kernel families of a library that has none (CuTe host programs only), seen as a BundleIndex."""

    _empty: Bundle | None = None

    def __len__(self) -> int:
        return 0

    def names(self) -> list[str]:
        return []

    def family_record(self, name: str) -> None:
        raise KeyError(name)

    family = family_specs = family_record

    def verify(self) -> None:
        pass

    def bundle(self) -> Bundle:
        if self._empty is None:
            from ..bundle.kpack import Bundle

            self._empty = Bundle.of()
        return self._empty


class _State:
    """A module's own state, kept off its attribute namespace (any identifier can be a kernel's name)."""

    def __init__(self, source: str, index: BundleIndex | _BundleFamilies | _NoKernels) -> None:
        self.source = source
        self.index = index
        self.families: dict[str, KernelFamily] = {}  # the families built so far
        self.hosts: dict[str, HostFamily] = {}
        self.callables: dict[str, Any] = {}  # the host programs and families built so far
        self.attrs: dict[str, str] = {}  # attribute -> the kernel or host program it holds
        self.attr_of: dict[str, str] = {}  # and back (a kernel has one attribute, or none)
        self.lock = threading.RLock()
        self.ext: Any = None  # the launch extension the families use (None: the Python path)
        self._loader: Loader | None = None

    @property
    def loader(self) -> Loader:
        """The module's binaries, loaded on first launch (made with the first kernel family)."""
        if self._loader is None:
            with self.lock:
                if self._loader is None:
                    from .loader import Loader

                    self._loader = Loader(self.source)
        return self._loader


class _ModuleDoc:
    """``KernelModule.__doc__``: the class's docstring on the class; on a module, its listing of kernels (made on
    first access: it counts the bundle's specializations)."""

    def __init__(self, text: str | None) -> None:
        self.text = text

    def __get__(self, obj: Any, cls: Any = None) -> str | None:
        if obj is None:
            return self.text
        d = vars(obj)
        if _DOC not in d:
            d[_DOC] = obj._doc(obj.__file__, obj._st.index.names())
        return d[_DOC]  # type: ignore[no-any-return]

    def __set__(self, obj: Any, value: str | None) -> None:
        vars(obj)[_DOC] = value


_DOC = "<kernelpack doc>"
_STATE = "<kernelpack>"  # the key of _State in the module's __dict__: not an identifier, so no kernel can take it


class KernelModule(types.ModuleType):
    """The kernels of one bundle: ``mod.name(*args, grid=..., ...)`` launches family ``name``; a built library's
    CuTe host programs are callables too (``mod.gemm(a, b, c)``, see :mod:`kernelpack.runtime.host`).

    A kernel whose name is a Python keyword, a dunder or one of the module's own attributes (``preload``,
    ``bundle``, ...) is reachable as ``name_`` (:func:`kernelpack.core.names.py_name`); ``mod["name"]`` reaches any
    kernel by its own name.

    A family is built on its first use (attribute, ``mod[name]``, :attr:`families`), from a bundle file read as a
    :class:`~kernelpack.bundle.index.BundleIndex`: loading costs what the manifest costs to parse. Nothing touches
    the driver until the first launch on a device (or :meth:`preload`); each binary is parsed, verified against
    its kernel's ABI and loaded once per process, each device's choice of binaries made once per device.
    """

    def __init__(self, bundle: Bundle | BundleIndex | None, source: str, host: Sequence[HostEntryInfo] = (),
                 archive: bool = False, build_ids: Sequence[tuple[str, str]] = ()) -> None:
        """``bundle``: the kernels (None: a library with CuTe host programs only)."""
        name = Path(source).name.split(".")[0] if source != "<bundle>" else "bundle"
        super().__init__(f"kernelpack.loaded.{name}")
        self.__file__ = source
        index: BundleIndex | _BundleFamilies | _NoKernels
        if bundle is None:
            index = _NoKernels()
        elif _is_bundle(bundle):
            index = _BundleFamilies(bundle)
        else:
            index = cast("BundleIndex", bundle)
        st = _State(source, index)
        vars(self)[_STATE] = st
        st.ext = extension()  # the launch path of this module's kernels, chosen now (warned once when missing)
        names = index.names()
        st.hosts = _host_families(host, source, archive, dict(build_ids))
        for hname, hfam in st.hosts.items():
            if hname not in names:
                st.callables[hname] = _host_callable(hfam, self.__name__, source)
        st.attrs = _attributes([*names, *st.callables])
        st.attr_of = {n: attr for attr, n in st.attrs.items()}
        for attr, n in st.attrs.items():
            if n in st.callables:
                vars(self)[attr] = st.callables[n]
        self.__all__ = sorted(st.attrs)

    __doc__ = _ModuleDoc(__doc__)  # type: ignore[assignment]

    def _family(self, fname: str) -> Any:
        """The callable of family ``fname``, built now if it was not (KeyError when there is none)."""
        st = self._st
        got = st.callables.get(fname)
        if got is not None:
            return got
        with st.lock:
            got = st.callables.get(fname)
            if got is not None:
                return got
            from .family import KernelFamily
            from .fast import make_launcher

            index = st.index
            record = index.family_record(fname)  # with one, first launches read it alone: the rest on first need
            fam = KernelFamily(fname, lambda: index.family_specs(fname), st.loader, record, index)
            try:
                launcher = make_launcher(fam, st.ext)
            except (TypeError, ValueError, OverflowError) as e:  # the C launcher refused the record's plans
                if record is None:
                    raise
                raise BundleError(f"{st.source}: kernel {fname}: malformed dispatch record: {e}") from None
            launcher.__name__ = launcher.__qualname__ = fname
            launcher.__module__ = self.__name__
            launcher._kp_docs = _Docs(fam, st.source)  # __doc__, __signature__ and repr: made on first access
            launcher.family = fam
            launcher.binary_for = fam.binary_for  # which binary a device (here or not) gets
            st.families[fname] = fam
            st.callables[fname] = launcher
            attr = st.attr_of.get(fname)
            if attr is not None:
                vars(self)[attr] = launcher
        return launcher

    def _all_families(self) -> dict[str, KernelFamily]:
        st = self._st
        for n in st.index.names():
            self._family(n)
        return {n: st.families[n] for n in st.index.names()}

    @property
    def _st(self) -> _State:
        return vars(self)[_STATE]  # type: ignore[no-any-return]

    def _doc(self, source: str, names: list[str]) -> str:
        st = self._st
        lines = []
        if names or not st.hosts:
            lines.append(f"{len(names)} kernel famil{'ies' if len(names) != 1 else 'y'} "
                         f"({len(st.index)} specializations) loaded from {source}:")
            lines += [f"  {clip(', '.join(names[i:i + 8]), 120)}" for i in range(0, min(len(names), 400), 8)]
            if len(names) > 400:
                lines.append(f"  ... and {len(names) - 400} more")
            if names:
                lines.append("  (help(module.NAME) shows a kernel's signature)")
        if st.hosts:
            lines.append(f"{len(st.hosts)} CuTe host program(s) (C entries of {source}):")
            lines += [f"  {h.signature_text()}" for h in st.hosts.values()]
        return "\n".join(lines)

    @property
    def bundle(self) -> Bundle:
        """The whole bundle (builds every family not built yet)."""
        return self._st.index.bundle()

    @property
    def families(self) -> dict[str, KernelFamily]:
        """Every kernel family by name (builds those not built yet)."""
        return self._all_families()

    @property
    def host_programs(self) -> dict[str, HostFamily]:
        """The CuTe host programs by name (also attributes, unless a kernel family has the same name)."""
        return dict(self._st.hosts)

    def preload(self, device: int | None = None) -> None:
        """Load every kernel for ``device`` (default: every visible device) now instead of at first launch."""
        from .fast import prepare_fast_path

        prepare_fast_path()
        st = self._st
        d = st.loader.driver
        ordinals = range(d.device_count()) if device is None else [device]
        families = self._all_families()
        for o in ordinals:
            for fam in families.values():
                fam.preload(o)

    def __getitem__(self, name: str) -> Kernel:
        """The kernel family or host program called ``name`` (its own name, whatever its attribute is)."""
        st = self._st
        got = st.callables.get(name)
        if got is not None:
            return got
        try:
            return self._family(name)
        except KeyError:
            raise KeyError(f"{self.__file__} has no kernel {name!r}{self._near(name)}; kernels: "
                           f"{self._known()}") from None

    def _known(self) -> str:
        st = self._st
        return ", ".join(sorted({*st.index.names(), *st.callables})) or "none"

    def _near(self, name: str) -> str:
        """`` (did you mean 'add'?)`` for a misspelled kernel (its name or its attribute)."""
        st = self._st
        return hint(name, [*st.attrs, *st.index.names(), *st.callables])

    def __repr__(self) -> str:
        st = self._st
        return (f"<kernelpack module from {clip_left(repr(self.__file__), 120)}: "
                f"{listing(list(dict.fromkeys([*st.index.names(), *st.callables])), 120) or 'no kernels'}>")

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self._st.attrs})

    def __getattr__(self, name: str) -> Kernel:
        """The kernel family or host program of attribute ``name`` (typed as :class:`kernelpack.argtypes.Kernel`)."""
        if _STATE not in vars(self):
            raise AttributeError(name)
        st = self._st
        fname = st.attrs.get(name)
        if fname is not None:
            return self._family(fname)
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"{self.__file__} has no kernel {name!r}{self._near(name)}; kernels: {self._known()}")


class _Docs:
    """What a family's ``__doc__``, ``__signature__`` and ``repr`` say, made when first asked for
    (:mod:`kernelpack.runtime.docs`: it reads every specialization's artifact and cubin facts)."""

    __slots__ = ("fam", "source")

    def __init__(self, fam: KernelFamily, source: str) -> None:
        self.fam, self.source = fam, source

    def __call__(self, name: str) -> Any:
        from . import docs

        if name == "__doc__":
            return docs.doc_text(self.fam, self.source)
        if name == "__signature__":
            return docs.signature(self.fam)
        return docs.repr_text(self.fam)


def _attributes(names: list[str]) -> dict[str, str]:
    """Each kernel's attribute (its Python name, :func:`kernelpack.core.names.py_name`); where a renamed one meets
    another kernel's own name, the kernel that has that name keeps the attribute (the other stays reachable as
    ``mod[name]``)."""
    own = _own_names()
    attrs = {n: py_name(n, own) for n in names}
    out: dict[str, str] = {}
    for n, attr in sorted(attrs.items(), key=lambda kv: kv[0] != kv[1]):  # unrenamed first
        if attr not in out:
            out[attr] = n
    return out


def _own_names() -> frozenset[str]:
    """What a KernelModule defines itself: no kernel may shadow these."""
    return frozenset(n for n in dir(KernelModule) if not n.startswith("_")) | {"__file__", "__all__", "__doc__"}


def read_any(path: str | os.PathLike[str]) -> Bundle:
    """A ``.kpack`` bundle, or the bundle embedded in a library built by kernelpack (``libNAME.so``/``.a``)."""
    from ..bundle.kpack import Bundle

    bundle = _read(path)[0]
    if bundle is None:
        return Bundle.of()
    return bundle if isinstance(bundle, Bundle) else bundle.bundle()


def _read(path: str | os.PathLike[str], lazy: bool = False) -> tuple[Bundle | BundleIndex | None,
                                                                        tuple[HostEntryInfo, ...], bool,
                                                                        tuple[tuple[str, str], ...]]:
    """The bundle (a BundleIndex for a ``.kpack`` file when ``lazy``; None for a library of CuTe host programs only),
    the host programs' descriptions, whether ``path`` is a static archive, and the (library, build id) pairs a built
    library carries. The file is read once, whole: everything returned comes from one build, even while a build
    replaces the file."""
    from ..core.files import read_bounded, read_head

    p = Path(path)
    if read_head(p, len(MAGIC), "bundle or library", error=BundleError) == MAGIC:  # regular files within the limit
        from ..bundle.kpack import HEADER_SIZE, Bundle, check_header

        if not lazy:
            return Bundle.read(p), (), False, ()
        from ..bundle.index import BundleIndex

        source = str(path)
        data = read_bounded(p, "bundle", error=BundleError, head_size=HEADER_SIZE,
                            check_head=lambda head, size: check_header(head, size, source))
        return BundleIndex(data, source), (), False, ()
    try:
        from ..bundle.embedded import read_embedded
    except ImportError as e:
        raise BundleError(f"{path} is not a .kpack bundle, and reading kernels from built libraries needs "
                          f"kernelpack.clib ({e})") from None
    found = read_embedded(p)
    if not found.bundles and not found.host_programs:
        raise BundleError(f"{path}: no kernelpack bundle inside (no .kpack section; not built by kernelpack?)")
    if not found.bundles:
        return None, found.host_programs, found.archive, found.build_ids
    if len(found.bundles) == 1:
        return found.bundles[0], found.host_programs, found.archive, found.build_ids
    from ..bundle.kpack import Bundle

    return Bundle.of(*found.bundles), found.host_programs, found.archive, found.build_ids


def load(source: str | os.PathLike[str] | Bundle, *, verify: bool = False) -> KernelModule:
    """Load a ``.kpack`` bundle, a built ``libNAME.so`` / ``libNAME.a``, or a :class:`Bundle` in memory.

    Returns a module with one callable per kernel family, and one per CuTe host program linked into a library::

        kernels = kernelpack.load("kernels.kpack")
        kernels.axpy(0.5, x, y, x.numel(), grid=blocks, block=256)
        lib = kernelpack.load("libgemm.so")
        lib.gemm(a, b, c)  # host program: its C entry computes grid, TMA descriptors, cluster launch

    Loading checks the file's header and its manifest's hash (a manifest altered after the build fails here) and
    builds each kernel family on first use; each binary's blob hash is checked, and the binary parsed and verified
    against its kernel's ABI, when a launch first uses it (a binary that is altered or cannot be used fails then,
    naming the kernel). ``verify=True`` checks every blob and builds and verifies every kernel now, as
    ``kernelpack inspect --verify`` does.

    Host programs need the shared library: Python cannot load a static archive's code, so from ``libNAME.a`` they
    are listed but refuse to run.
    """
    if _is_bundle(source):
        if verify:
            for a in source:
                a.verify()
        return KernelModule(source, "<bundle>")
    bundle, hosts, archive, ids = _read(source, lazy=True)  # type: ignore[arg-type]  # not a Bundle: a path
    if verify and _is_bundle(bundle):
        for a in bundle:
            a.verify()
    elif verify and bundle is not None:
        cast("BundleIndex", bundle).verify()  # a BundleIndex: every blob, binary and dispatch record
    return KernelModule(bundle, str(source), hosts, archive, ids)


def _host_families(infos: Sequence[HostEntryInfo], source: str, archive: bool,
                   build_ids: dict[str, str]) -> dict[str, HostFamily]:
    """One callable per host-program name; variants that take different arguments get one each (``name_variant``).
    ``build_ids``: the builds the library's bytes held (the code dlopen gives must be those)."""
    if not infos:
        return {}
    from .host import HostFamily, SharedLibrary  # imported for libraries with host programs only

    lib = SharedLibrary(source, archive, build_ids)
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
    fn._kp_docs = _HostDocs(fam, source)  # type: ignore[attr-defined]  # __doc__, __signature__, repr: on first access
    fn.host_program = fam  # type: ignore[attr-defined]
    return fn


class _HostDocs:
    """What a host program's ``__doc__``, ``__signature__`` and ``repr`` say, made when first asked for."""

    __slots__ = ("fam", "source")

    def __init__(self, fam: HostFamily, source: str) -> None:
        self.fam, self.source = fam, source

    def __call__(self, name: str) -> Any:
        if name == "__doc__":
            return self.fam.doc(self.source)
        if name == "__signature__":
            return self.fam.signature()
        return self.fam.repr_text()
