"""CUDA C++ in a project: ``[[cuda]]`` entries, one build step per source, built by :func:`kernelpack.cuda.compile`."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ...core.deps import cuda_includes, file_stamp
from .. import fields as fl
from ..base import Entry, Frontend, Output, Step

KERNELS = fl.rule(lambda v: (isinstance(v, str) and v != "") or (fl.is_sequence(v) and len(v) > 0 and all(
    isinstance(x, str) for x in v)) or (fl.str_key_map(v, lambda x: isinstance(x, str)) and len(v) > 0),
    "a non-empty list of kernel names or C++ name expressions, or a table {name = \"expression\"}")
DEFINES = fl.rule(lambda v: fl.str_key_map(v, lambda x: x is None or isinstance(x, str) or fl.is_int(x)),
                  "a table of macro values (strings or integers)")

LAUNCH_FLAG = fl.rule(lambda v: isinstance(v, bool) or (fl.is_sequence(v) and all(isinstance(x, str) for x in v)),
                      "true, false or a list of kernel names")


@dataclass(frozen=True)
class Cuda(Entry):
    """CUDA C++: ``kernelpack.cuda.compile(source, kernels, ...)``."""

    frontend: ClassVar[str] = "cuda"
    rules: ClassVar[Mapping[str, fl.Check]] = {
        "source": fl.PATH, "kernels": KERNELS, "options": fl.STRINGS, "defines": DEFINES, "include_dirs": fl.PATHS,
        "maxrregcount": fl.optional(fl.POSITIVE), "lineinfo": fl.BOOL, "signatures": fl.optional(fl.STRING_TABLE),
        "compiler": fl.optional(fl.one_of("nvrtc", "nvcc")), "pdl": LAUNCH_FLAG, "cooperative": LAUNCH_FLAG,
        "ranges": fl.TABLE}
    source: str | os.PathLike[str] = ""
    kernels: Sequence[str] | Mapping[str, str] = ()
    _: KW_ONLY
    options: Sequence[str] = ()
    defines: Mapping[str, str | int | None] = field(default_factory=dict)
    include_dirs: Sequence[str] = ()
    maxrregcount: int | None = None
    lineinfo: bool = False
    signatures: Mapping[str, str] | None = None
    compiler: str | None = None
    pdl: bool | Sequence[str] = False  # launch flags: true (every kernel) or a list of kernel names
    cooperative: bool | Sequence[str] = False
    ranges: Mapping[str, Any] = field(default_factory=dict)  # kernel label -> range constraints


class CudaFrontend(Frontend[Cuda]):
    name = "cuda"
    title = "CUDA C++"
    entry = Cuda
    api = "kernelpack.cuda"
    packages = ("cuda-core", "cuda-bindings", "nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-nvrtc-cu13")

    def label(self, entry: Cuda, root: Path) -> str:
        src = Path(entry.source)
        try:
            return str((root / src).resolve().relative_to(root.resolve()))
        except ValueError:
            return str(src)

    def files(self, entry: Cuda, root: Path) -> list[Path]:
        src = (root / entry.source).resolve()
        try:
            text = src.read_text(errors="replace")
        except OSError:
            text = ""
        return [src, *cuda_includes(src, text, [root / d for d in entry.include_dirs])]

    def versions(self) -> dict[str, str]:
        from ...core import config

        k = config.knobs()
        nvcc = k.nvcc or (str(k.cuda_home / "bin" / "nvcc") if k.cuda_home else "")
        return {**super().versions(), "compiler": k.cuda_compiler, "nvcc": file_stamp(nvcc)}

    def build(self, entry: Cuda, step: Step) -> Output:
        from . import compile as cuda

        root = step.root
        bundle = cuda.compile(root / entry.source, entry.kernels, arch=list(step.archs), options=list(entry.options),
                              defines=dict(entry.defines), include_dirs=[root / d for d in entry.include_dirs],
                              maxrregcount=entry.maxrregcount, lineinfo=entry.lineinfo, signatures=entry.signatures,
                              pdl=entry.pdl if isinstance(entry.pdl, bool) else list(entry.pdl),
                              cooperative=entry.cooperative if isinstance(entry.cooperative, bool) else list(
                                  entry.cooperative), compiler=entry.compiler, cache=step.cache,
                              ranges=dict(entry.ranges) or None)
        return Output("bundle", bundle.to_bytes())


FRONTEND = CudaFrontend()
