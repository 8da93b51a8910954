"""Where modules were before the house was laid out in folders (2026-12): the old ``abi`` is ``core.abi``, the old
``bundle_index`` is ``bundle.index``, and so on (the table MOVED below). Importing an old path
gives the module at its new home (the same module object, under both names), so code written against the old layout
keeps working; new code imports from the new homes (typed: type checkers see only those).

One table, read by a finder on ``sys.meta_path`` that answers for these names only; nothing is imported until an old
name is."""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the import system's protocol is, for type checkers
    from importlib.abc import Loader as _LoaderBase
else:
    _LoaderBase = object

# old path (below kernelpack.) -> new path (below kernelpack.)
MOVED: dict[str, str] = {
    "_lazy": "core._lazy",
    "_reprs": "core._reprs",
    "abi": "core.abi",
    "arch": "core.arch",
    "artifact": "bundle.artifact",
    "bundle_index": "bundle.index",
    "cache": "core.cache",
    "clib.cstructs": "runtime.cstructs",
    "clib.embedded": "bundle.embedded",
    "config": "core.config",
    "cubin": "core.cubin",
    "cudacc": "frontends.cuda.toolkit",
    "cute_host": "clib.host",
    "cute_host.build": "clib.host.build",
    "cute_host.entry": "clib.host.entry",
    "cute_host.manifest": "bundle.host_manifest",
    "cute_host.objfile": "core.objfile",
    "cute_host.program": "bundle.host_program",
    "cute_host.serial": "bundle.host_serial",
    "cutile_args": "frontends.cutile.signature",
    "cxxtypes": "frontends.cuda.cxxtypes",
    "decompress": "frontends.prebuilt.decompress",
    "demangle": "frontends.cuda.demangle",
    "demo": "cli.demo",
    "deps": "core.deps",
    "describe": "cli.describe",
    "diagnostics": "core.diagnostics",
    "entropy": "frontends.prebuilt.entropy",
    "errors": "core.errors",
    "fatbin": "frontends.prebuilt.fatbin",
    "files": "core.files",
    "merge": "bundle.merge",
    "names": "core.names",
    "packing": "core.packing",
    "ptx": "core.ptx",
    "publish": "core.publish",
    "runtime.record": "launch.record",
    "tma": "core.tma",
    "toolchain": "core.toolchain",
    "triton_args": "frontends.triton.signature",
    "trust": "core.trust",
    "tuning_table": "tuning.table",
    "verify": "core.verify",
    "zstd_blocks": "frontends.prebuilt.zstd_blocks",
    "zstd_frames": "frontends.prebuilt.zstd_frames",
}


# The import system needs only these methods: neither class derives from importlib.abc, whose import (on CPython 3.11:
# importlib.resources, pathlib, tempfile, shutil, zipfile...) was ~15 ms of a plain `import kernelpack`.


class _Alias(_LoaderBase):
    """Loads an old name as the module at its new home (one module object under both names)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec  # the import system gave it the old name's spec: the module keeps its own


class _Finder:
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("kernelpack."):
            return None
        new = MOVED.get(fullname[len("kernelpack."):])
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(f"kernelpack.{new}"))


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):  # first: a module below an old package's name
        sys.meta_path.insert(0, _Finder())                         # (kernelpack.cute_host.build) is not re-found


def resolve(name: str) -> ModuleType | None:
    """``kernelpack.NAME`` for an old top-level name (``kernelpack.core.abi``), imported; None for any other name."""
    new = MOVED.get(name)
    return importlib.import_module(f"kernelpack.{new}") if new is not None else None
