"""Copy what ``scripts/corpus_gpu.py`` needs onto the GPU machine: ``.gpu/corpus/``.

Layout (everything relative to the destination)::

    manifest.json            the corpus run's manifest (every spec: kernel, family, variant, sources, launches)
    results.json             the GPU-less results (what compiled and linked)
    <pkg>/lib/...            the built library: lib/libNAME.so (its bundle is embedded), include/NAME.h, NAME.hpp
    site/liger_kernel/...    liger-kernel's pure-Python sources (its Triton JIT path is the GPU-side reference)

The corpus data (``corpus/*.toml``) and code travel with the working tree. The static archive and the ``.kpack``
stay behind (the GPU run loads the shared library, and its C++ driver links it): the device run carries 64 MiB.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

LIMIT = 40 << 20  # what the device run may carry


def prepare(out: Path, dest: Path, limit: int = LIMIT) -> dict[str, Any]:
    """Fill ``dest`` from the corpus output directory ``out``; returns what was copied and its size."""
    manifest = out / "manifest.json"
    if not manifest.exists():
        raise FileNotFoundError(f"corpus gpu-prepare: {manifest} is missing (run scripts/corpus.py first)")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    shutil.copy2(manifest, dest / "manifest.json")
    if (out / "results.json").exists():
        shutil.copy2(out / "results.json", dest / "results.json")
    for pkg_dir in sorted(p for p in out.iterdir() if p.is_dir()):
        lib = pkg_dir / "lib"
        if lib.is_dir():
            shutil.copytree(lib, dest / pkg_dir.name / "lib", ignore=shutil.ignore_patterns("header_check", "cmake",
                                                                                            "pkgconfig", "*.a"))
    copied = copy_package("liger_kernel", dest / "site")
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    if size > limit:
        raise RuntimeError(f"corpus gpu-prepare: {dest} holds {size >> 20} MiB, more than the {limit >> 20} MiB the "
                           f"device run carries")
    return {"dest": str(dest), "bytes": size, "package_files": copied}


def copy_package(name: str, site: Path) -> int:
    """The package's ``*.py`` files (pure Python; no compiled extension is needed for its Triton path)."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return 0
    root = Path(spec.origin).parent
    n = 0
    for info in root.parent.glob(f"{name}-*.dist-info"):  # importlib.metadata.version() works there too
        shutil.copytree(info, site / info.name, dirs_exist_ok=True)
    for f in root.rglob("*.py"):
        target = site / name / f.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
        n += 1
    return n
