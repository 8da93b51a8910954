"""Package attributes imported on first use (PEP 562), so that importing one submodule of a package does not
import all the others: the runtime reads embedded bundles and host-program descriptions without loading the
library generator and the builders that sit beside them."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, namespace: dict[str, Any], where: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` resolving each name in ``where`` from its module on first use."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = where[name]  # a submodule of ``package``, or a relative path from it ("..bundle.kpack")
        value = getattr(importlib.import_module(module if module.startswith(".") else f".{module}", package), name)
        namespace[name] = value
        return value

    return __getattr__


def submodule(package: str, name: str) -> Any:
    """``package.name`` imported on first use (the caller checks ``name`` against its own constant table)."""
    return importlib.import_module(f".{name}", package)
