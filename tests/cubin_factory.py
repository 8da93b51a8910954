"""Real cubins for tests: compile CUDA C++ with nvcc (cached on disk per session) and read cuobjdump's view of them.

``CubinFactory(cache_dir, nvcc)(source, arch, options)`` returns the cubin's bytes; ``.path(...)`` its file. The cache
key is (source, arch, options), so each distinct cubin is compiled once per session. ``cuobjdump_view(path)``
parses ``cuobjdump -elf`` and ``-res-usage`` into plain dicts, as an independent oracle for the cubin reader.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path


class CubinFactory:
    """Compile CUDA C++ source to a cubin once per (source, arch, options); raise RuntimeError with nvcc's log."""

    def __init__(self, cache_dir: Path, nvcc: Path) -> None:
        self.cache_dir = Path(cache_dir)
        self.nvcc = nvcc
        self._archs: set[str] | None = None

    def supports(self, arch: str) -> bool:
        """True when this nvcc can target ``arch`` (``sm_120`` needs compute_120 in --list-gpu-arch)."""
        if self._archs is None:
            out = subprocess.run([str(self.nvcc), "--list-gpu-arch"], capture_output=True, text=True).stdout
            self._archs = set(out.split())
        return "compute_" + re.sub(r"[af]$", "", arch.removeprefix("sm_")) in self._archs

    def path(self, source: str, arch: str, options: tuple[str, ...] | list[str] = ()) -> Path:
        options = tuple(options)
        key = hashlib.sha256(repr((source, arch, options)).encode()).hexdigest()[:24]
        out = self.cache_dir / f"{arch}-{key}.cubin"
        if out.exists():
            return out
        with tempfile.TemporaryDirectory(dir=self.cache_dir) as tmp:
            src = Path(tmp, "kernel.cu")
            src.write_text(source)
            obj = Path(tmp, "kernel.cubin")
            cmd = [str(self.nvcc), "-cubin", f"-arch={arch}", *options, "-o", str(obj), str(src)]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                raise RuntimeError(f"nvcc failed ({' '.join(cmd)}):\n{res.stderr}{res.stdout}")
            os.replace(obj, out)  # atomic: a reader never sees half a cubin
        return out

    def __call__(self, source: str, arch: str, options: tuple[str, ...] | list[str] = ()) -> bytes:
        return self.path(source, arch, options).read_bytes()


@dataclass
class ObjdumpKernel:
    params: list[tuple[int, int, int]] = field(default_factory=list)  # (ordinal, offset, size)
    reg: int | None = None
    stack: int | None = None
    shared: int | None = None


@dataclass
class ObjdumpView:
    arch: str  # as cuobjdump prints it: "90a"
    toolkit: str
    kernels: dict[str, ObjdumpKernel]  # entry symbols, in symbol-table order


_KPARAM = re.compile(r"Ordinal\s*:\s*(0x[0-9a-f]+)\s+Offset\s*:\s*(0x[0-9a-f]+)\s+Size\s*:\s*(0x[0-9a-f]+)")
_RES = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+)")


def cuobjdump_view(cuobjdump: Path, cubin: Path) -> ObjdumpView:
    """Entry names, KPARAM records, REG/STACK/SHARED and sm/toolkit as cuobjdump reports them."""
    elf = subprocess.run([str(cuobjdump), "-elf", str(cubin)], capture_output=True, text=True, check=True).stdout
    head = re.search(r"sm=(\w+), toolkit=([\d.]+)", elf)
    if head is None:
        raise RuntimeError(f"unexpected cuobjdump -elf header for {cubin}")
    kernels: dict[str, ObjdumpKernel] = {}
    symtab = elf.split(".section .symtab", 1)[1].split("\n\n", 1)[0]
    for line in symtab.splitlines():
        cols = line.split()
        if len(cols) >= 9 and cols[3] == "FUNC" and "ENTRY" in cols[6:-2]:
            kernels[cols[-1]] = ObjdumpKernel()
    section = ""
    for line in elf.splitlines():
        if line.startswith("."):
            section = line.strip()
        m = _KPARAM.search(line)
        if m and section.startswith(".nv.info."):
            ordinal, offset, size = (int(g, 16) for g in m.groups())
            kernels[section.removeprefix(".nv.info.")].params.append((ordinal, offset, size))
    res = subprocess.run([str(cuobjdump), "-res-usage", str(cubin)], capture_output=True, text=True, check=True).stdout
    name = None
    for line in res.splitlines():
        if line.strip().startswith("Function "):
            name = line.strip().removeprefix("Function ").rstrip(":")
        elif (m := _RES.search(line)) and name in kernels:
            k = kernels[name]
            k.reg, k.stack, k.shared = (int(g) for g in m.groups())
    return ObjdumpView(head.group(1), head.group(2), kernels)
