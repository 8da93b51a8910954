"""What each package defines, by scanning its installed sources (never a hand-written list).

* Triton: every ``@triton.jit`` function in ``liger_kernel/ops/*.py``; one referenced from another ``@triton.jit``
  function (a device helper, a combine function) is listed apart: it compiles inside the kernels that use it.
* cuTile: every ``@ct.kernel`` function under ``liger_kernel/ops/cutile/``.
* CuTe DSL: every distinct launcher a ``cute.compile(...)`` call compiles (its first argument, per file) under the
  given directories.
* CUDA C++: every ``__global__`` function in the given headers.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Defined:
    name: str  # module:function (Python) or header:function (CUDA)
    path: Path
    line: int
    helper: bool = False  # a Triton device function / combine function, not a launchable kernel


def _module(root: Path, path: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    return ".".join(rel.parts)


def _decorated(fn: ast.FunctionDef, pred: str) -> bool:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if ast.unparse(target) in pred.split("|"):
            return True
    return False


def triton_kernels(pkg_root: Path, subdir: str = "ops") -> list[Defined]:
    out = []
    for path in sorted((pkg_root / subdir).glob("*.py")):
        tree = ast.parse(path.read_text())
        jits = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _decorated(n, "triton.jit")}
        referenced = {x.id for fn in jits.values() for x in ast.walk(fn) if isinstance(x, ast.Name) and x.id in jits
                      and x.id != fn.name}
        mod = _module(pkg_root, path)
        out += [Defined(f"{mod}:{n}", path, fn.lineno, n in referenced) for n, fn in jits.items()]
    return out


def cutile_kernels(pkg_root: Path, subdir: str = "ops/cutile") -> list[Defined]:
    out = []
    for path in sorted((pkg_root / subdir).rglob("*.py")):
        tree = ast.parse(path.read_text())
        mod = _module(pkg_root, path)
        out += [Defined(f"{mod}:{n.name}", path, n.lineno) for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef) and _decorated(n, "ct.kernel|cuda.tile.kernel")]
    return out


def cute_launchers(pkg_root: Path, subdirs: tuple[str, ...]) -> list[Defined]:
    """One entry per distinct first argument of ``cute.compile(...)`` per file (``cute.compile[opts](...)`` too)."""
    out, seen = [], set()
    for sub in subdirs:
        for path in sorted((pkg_root / sub).rglob("*.py")):
            tree = ast.parse(path.read_text())
            mod = _module(pkg_root, path)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                func = node.func.value if isinstance(node.func, ast.Subscript) else node.func
                if ast.unparse(func) != "cute.compile":
                    continue
                target = ast.unparse(node.args[0].func if isinstance(node.args[0], ast.Call) else node.args[0])
                if (mod, target) not in seen:
                    seen.add((mod, target))
                    out.append(Defined(f"{mod}:{target}", path, node.lineno))
    return out


_GLOBAL = re.compile(r"__global__\b(?P<rest>[^;{]*?)\b(?P<name>[A-Za-z_]\w*)\s*\(", re.S)


def cuda_kernels(include_root: Path, headers: tuple[str, ...]) -> list[Defined]:
    out = []
    for h in headers:
        path = include_root / h
        text = re.sub(r"//[^\n]*|/\*.*?\*/", "", path.read_text(), flags=re.S)
        for m in _GLOBAL.finditer(text):
            name = m.group("name")
            if name in ("__launch_bounds__", "FLASHINFER_SAMPLING_LAUNCH_BOUNDS"):  # the attribute macro's "("
                tail = text[m.end():]
                depth, i = 1, 0
                while depth and i < len(tail):
                    depth += {"(": 1, ")": -1}.get(tail[i], 0)
                    i += 1
                nm = re.match(r"\s*void\s+(\w+)\s*\(", tail[i:])
                if not nm:
                    continue
                name = nm.group(1)
            out.append(Defined(f"{h}:{name}", path, text[: m.start()].count("\n") + 1))
    return out
