"""The one table of frontends. ``kernelpack build`` reads it (the ``[[name]]`` tables it accepts, in this order, and
what to do with each entry), so do the CLI and the docs' tests; ``kernelpack.project`` re-exports the entry classes
named in ``__all__`` for Python project modules. Adding a frontend is adding its module and its line here.

The table names each frontend's module; a frontend's module is imported when it is first asked for (a step of
that frontend, its entry class), so a build of CUDA C++ entries never imports the others (``kernelpack build``'s
start-up, its no-op rebuild)."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from ..core._lazy import submodule
from ..core.errors import ProjectError
from .base import Entry, Frontend

if TYPE_CHECKING:  # the entry classes, imported on first use (module __getattr__ below)
    from .cuda.entry import Cuda as Cuda
    from .cute.entry import Cute as Cute
    from .cutile.entry import Cutile as Cutile
    from .prebuilt.entry import Cubin as Cubin
    from .triton.entry import Triton as Triton

# frontend name -> (its module under kernelpack.frontends, its entry class's name), in the order builds read them
_TABLE: dict[str, tuple[str, str]] = {
    "cuda": ("cuda", "Cuda"),
    "triton": ("triton", "Triton"),
    "cutile": ("cutile", "Cutile"),
    "cute": ("cute", "Cute"),
    "cubin": ("prebuilt", "Cubin"),
}
_PACKAGE = __name__.rsplit(".", 1)[0]  # kernelpack.frontends
_ENTRY_MODULE = {cls: mod for mod, cls in _TABLE.values()}


class _Frontends(MutableMapping[str, "Frontend[Any]"]):
    """Frontend name -> its :class:`Frontend`, each module imported on first access (iterating imports none); a
    frontend set here (a test's, one defined elsewhere) is kept as given, after the table's."""

    def __init__(self) -> None:
        self._set: dict[str, Frontend[Any]] = {}
        self._gone: set[str] = set()

    def __getitem__(self, name: str) -> Frontend[Any]:
        got = self._set.get(name)
        if got is not None:
            return got
        if name in self._gone or name not in _TABLE:
            raise KeyError(name)
        mod, _ = _TABLE[name]
        got = submodule(_PACKAGE, mod).FRONTEND
        return got

    def __setitem__(self, name: str, frontend: Frontend[Any]) -> None:
        self._set[name] = frontend
        self._gone.discard(name)

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._set.pop(name, None)
        if name in _TABLE:
            self._gone.add(name)

    def __iter__(self) -> Iterator[str]:
        yield from (n for n in _TABLE if n not in self._gone)
        yield from (n for n in self._set if n not in _TABLE)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        return name in self._set or (name in _TABLE and name not in self._gone)

    def __repr__(self) -> str:
        return f"<kernelpack frontends: {', '.join(self)}>"


FRONTENDS: MutableMapping[str, Frontend[Any]] = _Frontends()

__all__ = ["Cubin", "Cuda", "Cute", "Cutile", "Triton"]  # the entry classes (star-imported by kernelpack.project)


def entry_class(name: str) -> type[Entry]:
    """The entry class called ``name`` (one of ``__all__``), its frontend's module imported."""
    cls: type[Entry] = getattr(submodule(_PACKAGE, _ENTRY_MODULE[name]), name)
    return cls


def __getattr__(name: str) -> Any:  # PEP 562: the entry classes, imported on first use
    if name in _ENTRY_MODULE:
        return entry_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def frontend_of(entry: Entry) -> Frontend[Any]:
    """The frontend that builds ``entry``."""
    f = FRONTENDS.get(entry.frontend)
    if f is None or not isinstance(entry, f.entry):
        raise ProjectError(f"{type(entry).__name__} is not the entry class of a registered frontend "
                           f"({', '.join(x.entry.__name__ for x in FRONTENDS.values())})")
    return f
