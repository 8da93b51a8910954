"""Link a build's kernels into the library: ``kernelpack.Library`` for kernel artifacts; CuTe host programs go
into the same library when the generator accepts them (``Library.accepts_host_programs``), else into a companion
library ``<name>_host`` built by :func:`kernelpack.cute_host.build_host_library` into the same prefix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..bundle import Bundle
from .model import LibrarySpec


def _library_class() -> Any:
    from ..clib import Library

    return Library


def host_name(name: str) -> str:
    return f"{name}_host"


def _separate_host(programs: list[Any]) -> bool:
    return bool(programs) and not getattr(_library_class(), "accepts_host_programs", False)


def expected_outputs(name: str, out: Path, programs: list[Any]) -> dict[str, Path]:
    files = {"shared": out / "lib" / f"lib{name}.so", "static": out / "lib" / f"lib{name}.a",
             "header": out / "include" / f"{name}.h", "cpp_header": out / "include" / f"{name}.hpp",
             "cmake": out / "lib" / "cmake" / name / f"{name}Config.cmake",
             "pkgconfig": out / "lib" / "pkgconfig" / f"{name}.pc"}
    if _separate_host(programs):
        h = host_name(name)
        files |= {"host_shared": out / "lib" / f"lib{h}.so", "host_static": out / "lib" / f"lib{h}.a",
                  "host_header": out / "include" / f"{h}.h"}
    return files


def link(lib: LibrarySpec, out: Path, bundle: Bundle, programs: list[Any]) -> dict[str, Path]:
    """Build the library (and the host-program companion) into ``out``; returns the files written."""
    library = _library_class()
    items: list[Any] = [bundle] if len(bundle) else []
    if programs and not _separate_host(programs):
        items += programs
    if items:
        library(lib.name, *items, cflags=lib.cflags, version=lib.version).build(out)
    if _separate_host(programs):
        from ..cute_host import build_host_library

        build_host_library(host_name(lib.name), programs, out)
    files = expected_outputs(lib.name, out, programs)
    return {k: v for k, v in files.items() if v.exists()}
