"""The house's layers, declared once in docs/architecture.md (the table between the ``layers`` markers) and held
here by reading every module's imports with ``ast``: a module imports only from its own layer or the layers below,
no two folders (or top-level modules) import each other in a circle, every module of the package belongs to a row of
the table, and every row names something that exists.

Imports under ``if TYPE_CHECKING:`` are left out (they run only in a type checker). Imports inside functions count:
they run when the function does.

    python tests/test_layers.py [SRC_DIR]   # the circles between folders and top-level modules of any tree
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "kernelpack"
DOC = ROOT / "docs" / "architecture.md"


def modules(src: Path) -> dict[str, Path]:
    """Dotted name (``kernelpack.core.abi``, a package by its own name) -> file, for every module under ``src``."""
    out = {}
    for p in src.rglob("*.py"):
        parts = ["kernelpack", *p.relative_to(src).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:``."""
    todo = [tree]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            todo.extend(n.orelse)
            continue
        yield n
        todo.extend(ast.iter_child_nodes(n))


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package modules it imports at run time (``from X import y``: ``X.y`` when that is a module)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for n in _runtime_nodes(ast.parse(path.read_text())):
            if isinstance(n, ast.ImportFrom):
                if n.level:
                    base = package.split(".")[: len(package.split(".")) - (n.level - 1)]
                    target = ".".join(base + ([n.module] if n.module else []))
                else:
                    target = n.module or ""
                for a in n.names:
                    sub = f"{target}.{a.name}"
                    hit = sub if sub in mods else target if target in mods else None
                    if hit and hit != name:
                        edges[name].add(hit)
            elif isinstance(n, ast.Import):
                edges[name].update(a.name for a in n.names if a.name in mods and a.name != name)
    return edges


def unit_of(module: str) -> str:
    """The folder or top-level module a module lives in: ``kernelpack.core.abi`` -> ``core/``, ``kernelpack.cuda`` ->
    ``cuda.py``, the package itself -> ``__init__.py``."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__.py"
    return f"{parts[0]}.py" if len(parts) == 1 and not (SRC_IN_USE / parts[0]).is_dir() else f"{parts[0]}/"


SRC_IN_USE = SRC


def unit_graph(src: Path) -> dict[str, dict[str, set[tuple[str, str]]]]:
    """Unit -> unit it imports -> the (module, module) pairs that make the edge."""
    global SRC_IN_USE
    SRC_IN_USE = src
    out: dict[str, dict[str, set[tuple[str, str]]]] = defaultdict(lambda: defaultdict(set))
    for a, targets in imports(modules(src)).items():
        for b in targets:
            ua, ub = unit_of(a), unit_of(b)
            if ua != ub and ub != "__init__.py":  # every module imports its package's __init__ implicitly
                out[ua][ub].add((a, b))
    return out


def circles(graph: dict[str, dict[str, set[tuple[str, str]]]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def layer_table() -> list[tuple[int, str, list[str]]]:
    """The rows of docs/architecture.md's layer table: (layer number, name, units)."""
    text = DOC.read_text()
    m = re.search(r"<!-- layers:begin -->(.*?)<!-- layers:end -->", text, re.S)
    assert m, "docs/architecture.md has no layer table between <!-- layers:begin --> and <!-- layers:end -->"
    rows = []
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        rows.append((int(cells[0]), cells[1], re.findall(r"`([^`]+)`", cells[2])))
    return rows


def _layer_of() -> dict[str, int]:
    return {unit: n for n, _, units in layer_table() for unit in units}


def test_the_layer_table_names_what_exists_and_everything_that_exists() -> None:
    layer = _layer_of()
    for unit in layer:
        assert (SRC / unit.rstrip("/")).exists(), f"docs/architecture.md's layer table names {unit}, which is gone"
    units = {unit_of(m) for m in modules(SRC)}
    assert not units - set(layer), f"not in docs/architecture.md's layer table: {sorted(units - set(layer))}"


def test_the_drawn_tree_names_every_package_folder_and_nothing_that_is_gone() -> None:
    """docs/architecture.md's tree: each line's first column is a folder (``frontends/cuda/``) that exists, and every
    package folder (and each top-level folder) has its line."""
    text = DOC.read_text()
    tree = text[text.index("```\nsrc/kernelpack/"):]
    tree = tree[: tree.index("\n```", 4)]
    drawn = set(re.findall(r"^  ([\w/]+/)\s", tree, re.M))
    gone = sorted(d for d in drawn if not (SRC / d).is_dir())
    assert not gone, f"docs/architecture.md draws folders that are gone: {gone}"
    folders = {f"{p.parent.relative_to(SRC).as_posix()}/" for p in SRC.rglob("__init__.py") if p.parent != SRC}
    folders |= {f"{p.name}/" for p in SRC.iterdir() if p.is_dir() and p.name != "__pycache__"}
    missing = sorted(folders - drawn)
    assert not missing, f"docs/architecture.md's tree has no line for: {missing}"


def test_imports_go_down_the_layers_only() -> None:
    layer = _layer_of()
    up = sorted(f"{a} imports {b} (layer {layer[ub]} above {layer[ua]})"
                for ua, targets in unit_graph(SRC).items() for ub, pairs in targets.items()
                if layer[ub] > layer[ua] for a, b in pairs)
    assert not up, "imports up the layers:\n  " + "\n  ".join(up)


def test_no_two_folders_import_each_other_in_a_circle() -> None:
    graph = unit_graph(SRC)
    found = circles(graph)
    lines = [" <-> ".join(c) + ": " + "; ".join(f"{a} -> {b}" for u in c for v in c if v in graph[u]
                                                  for a, b in sorted(graph[u][v])[:3]) for c in found]
    assert not found, "circles between folders / top-level modules:\n  " + "\n  ".join(lines)


MAX_LINES = 800
GENERATED = {"csrc/kp_model.h"}  # python -m kernelpack.launch.header writes it


def test_no_hand_written_source_is_longer_than_a_reader_can_hold() -> None:
    long = sorted(f"{p.relative_to(SRC)}: {n} lines" for p in SRC.rglob("*")
                  if p.suffix in (".py", ".c", ".h", ".cpp") and "__pycache__" not in p.parts
                  and p.relative_to(SRC).as_posix() not in GENERATED
                  and (n := len(p.read_text().splitlines())) > MAX_LINES)
    assert not long, f"split these by concern (at most {MAX_LINES} lines):\n  " + "\n  ".join(long)


def test_the_checks_see_an_upward_import_and_a_circle(tmp_path: Path) -> None:
    """Not vacuous: a tree where core imports runtime and runtime imports core has both."""
    for rel, text in {"__init__.py": "", "core/__init__.py": "", "core/a.py": "from ..runtime import b\n",
                      "runtime/__init__.py": "", "runtime/b.py": "from ..core import a\n",
                      "runtime/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..cli import x\n",
                      "cli/__init__.py": "", "cli/x.py": ""}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = unit_graph(tmp_path)
    assert circles(graph) == [["core/", "runtime/"]]
    assert "cli/" not in graph["runtime/"]  # a TYPE_CHECKING import is no edge
    global SRC_IN_USE
    SRC_IN_USE = SRC


if __name__ == "__main__":
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else SRC
    g = unit_graph(src)
    found = circles(g)
    units = {unit_of(m) for m in modules(src)}
    print(f"{src}: {len(modules(src))} modules, {sum(1 for u in units if u.endswith('.py'))} top-level modules, "
          f"{sum(1 for u in units if u.endswith('/'))} folders; {len(found)} circles between them")
    for c in found:
        print("  " + " <-> ".join(c))
        for u in c:
            for v in c:
                if v in g[u]:
                    print(f"      {u} -> {v}: " + ", ".join(f"{a} -> {b}" for a, b in sorted(g[u][v])[:4]))
