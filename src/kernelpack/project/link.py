"""Link a build's kernels into the library with ``kernelpack.Library``: kernel artifacts and CuTe host programs
(``[[cute]] mode = "host"``) in one ``libNAME.so``/``.a`` with one header pair."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..bundle.kpack import Bundle
    from ..core.publish import Stage
    from .model import LibrarySpec


def expected_outputs(name: str, out: Path, programs: list[Any]) -> dict[str, Path]:
    return {"shared": out / "lib" / f"lib{name}.so", "static": out / "lib" / f"lib{name}.a",
            "header": out / "include" / f"{name}.h", "cpp_header": out / "include" / f"{name}.hpp",
            "cmake": out / "lib" / "cmake" / name / f"{name}Config.cmake",
            "pkgconfig": out / "lib" / "pkgconfig" / f"{name}.pc"}


def link(lib: LibrarySpec, stage: Stage, bundle: Bundle, programs: list[Any],
         data: bytes | None = None) -> dict[str, Path]:
    """Build the library into ``stage`` (published with the rest of the build); returns the final paths. ``data``:
    the bundle's bytes (``bundle.to_bytes()``), when the caller has them."""
    from ..clib import Library

    library = Library(lib.name, *([bundle] if len(bundle) else []), *programs, cflags=lib.cflags, version=lib.version)
    same = len(library.bundle) == len(bundle) and all(x is y for x, y in zip(library.bundle, bundle))
    library.stage(stage, data=data if same else None)  # the bytes of exactly these artifacts
    return expected_outputs(lib.name, stage.out, programs)
