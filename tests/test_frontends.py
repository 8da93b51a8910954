"""Frontends behind one interface (issue #13, item 4): one registry that ``kernelpack build``, the docs and these tests
read; every entry key has a type rule; ``project/`` names no frontend and frontends import neither ``project/`` nor
a back end; a frontend defined only through the interface (here, in this file) builds through ``kernelpack build``
like the shipped ones. GPU-less."""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.binary import Binary
from kernelpack.core.cubin import read_cubin
from kernelpack.frontends import FRONTENDS, Entry, Frontend, Output, Step
from kernelpack.frontends import fields as fl
from kernelpack.frontends.base import ENTRY_RULES, entry_keys
from kernelpack.frontends.cuda.cxxtypes import abi_from_params
from kernelpack.project import build, load_project

SRC = Path(__file__).resolve().parents[1] / "src" / "kernelpack"
ROOT = SRC.parents[1]


def test_the_registry_lists_every_frontend_with_a_complete_schema() -> None:
    assert list(FRONTENDS) == ["cuda", "triton", "cutile", "cute", "cubin"]
    for name, f in FRONTENDS.items():
        assert f.name == name == f.entry.frontend and f.title
        missing = [k for k in entry_keys(f.entry) if k not in {**ENTRY_RULES, **f.entry.rules}]
        assert not missing, f"{name}: keys without a type rule: {missing}"
        verb = importlib.import_module(f.api).compile
        params = list(inspect.signature(verb).parameters.values())
        positional = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        rest = params[len(positional)].kind
        assert len(positional) <= 2 and rest in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_POSITIONAL), name
        assert "arch" in inspect.signature(verb).parameters, f"{f.api}.compile takes arch="


def test_readme_and_a_tested_quickstart_describe_every_frontend() -> None:
    from test_docs import PAGES

    readme = (ROOT / "README.md").read_text()
    for f in FRONTENDS.values():
        assert f"[[{f.name}]]" in readme and f"{f.api}.compile" in readme, f.name
        page = f"quickstart-{f.api.rsplit('.', 1)[1]}.md"
        assert page in PAGES and page in readme, page


def _names(path: Path) -> set[str]:
    """Identifiers, imported names and string constants of a module (docstrings and binary kinds,
    ``b.kind == "cubin"``, left out; attribute names too: ``binary.cubin`` is a binary's, not a frontend's)."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    docs |= {id(c) for n in ast.walk(tree) if isinstance(n, ast.Compare)
             and any(isinstance(x, ast.Attribute) and x.attr == "kind" for x in (n.left, *n.comparators))
             for c in (n.left, *n.comparators)}
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.alias):
            out.add(n.name.rsplit(".", 1)[-1])
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            out.add(n.value)
    return out


def test_project_names_no_frontend() -> None:
    frontend_words = set(FRONTENDS) | {f.entry.__name__ for f in FRONTENDS.values()} | {"cute-host"}
    for path in sorted((SRC / "project").glob("*.py")):
        used = _names(path) & frontend_words
        assert not used, f"{path.name} names frontends: {sorted(used)} (ask kernelpack.frontends instead)"


def _imports(path: Path) -> set[str]:
    """The kernelpack modules a module imports (relative imports resolved)."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    out = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom):
            base = package.rsplit(".", n.level - 1)[0] if n.level else ""
            mod = ".".join(x for x in (base, n.module or "") if x)
            out |= {mod} | {f"{mod}.{a.name}" for a in n.names}
        elif isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
    return {m for m in out if m.startswith("kernelpack")}


FRONTEND_MODULES = ["frontends/**/*.py", "cuda.py", "triton.py", "cutile.py", "cute.py", "prebuilt.py", "core/*.py"]


@pytest.mark.parametrize("pattern", FRONTEND_MODULES)
def test_frontends_import_neither_the_project_nor_a_back_end(pattern: str) -> None:
    for path in sorted(SRC.glob(pattern)):
        bad = {m for m in _imports(path) if m.split(".")[1:2] and m.split(".")[1] in ("project", "clib", "runtime")}
        assert not bad, f"{path.relative_to(SRC)} imports {sorted(bad)}"


# ------------------------------------------------------------------------------------------------ a new frontend


@dataclass(frozen=True)
class Echo(Entry):
    """A frontend written in a few lines: one cubin file, one kernel, its C parameters; a step per variant."""

    frontend: ClassVar[str] = "echo"
    rules: ClassVar[dict[str, fl.Check]] = {"cubin": fl.PATH, "kernel": fl.STRING, "params": fl.STRING,
                                            "variants": fl.STRINGS}
    cubin: str = ""
    kernel: str = ""
    params: str = ""
    variants: tuple[str, ...] = ("a",)


class EchoFrontend(Frontend[Echo]):
    name = "echo"
    title = "Echo"
    entry = Echo
    api = "kernelpack.prebuilt"
    calls: ClassVar[list[str]] = []

    def label(self, entry: Echo, root: Path) -> str:
        return entry.kernel

    def variants(self, entry: Echo, root: Path) -> list[str]:
        return list(entry.variants)

    def files(self, entry: Echo, root: Path) -> list[Path]:
        return [root / entry.cubin]

    def versions(self) -> dict[str, str]:
        return {"echo": "1"}

    def build(self, entry: Echo, step: Step) -> Output:
        self.calls.append(step.variant)
        data = (step.root / entry.cubin).read_bytes()
        c = read_cubin(data)
        abi = abi_from_params(entry.params, c.kernel(entry.kernel), entry.kernel)
        art = KernelArtifact(entry.kernel, entry.kernel, abi, (Binary(c.arch, data),), variant=step.variant)
        return Output("bundle", Bundle((art,)).to_bytes())


def test_a_frontend_written_only_through_the_interface_builds_like_the_others(tmp_path: Path, monkeypatch: Any,
                                                                               tmp_path_factory: Any) -> None:
    from prebuilt_support import PARAMS, session_binaries

    built = session_binaries(tmp_path_factory)
    monkeypatch.setitem(FRONTENDS, "echo", EchoFrontend())
    (tmp_path / "k.cubin").write_bytes(built.cubin("sm_90a").read_bytes())
    (tmp_path / "kernelpack.toml").write_text(textwrap.dedent(f"""
        [library]
        name = "echo"
        archs = ["sm_90a"]
        outputs = ["bundle"]
        [[echo]]
        cubin = "k.cubin"
        kernel = "add"
        params = "{PARAMS['add']}"
        variants = ["a", "b"]
    """))
    assert isinstance(load_project(tmp_path).entries[0], Echo)
    first = build(tmp_path, jobs=1)
    assert first.jobs == {"echo:add[a]": "compiled", "echo:add[b]": "compiled"} and EchoFrontend.calls == ["a", "b"]
    assert sorted(r.kernel for r in first.rows) == ["add[a]", "add[b]"]
    assert build(tmp_path, jobs=1).up_to_date and EchoFrontend.calls == ["a", "b"]
    (tmp_path / "k.cubin").write_bytes(built.cubin("sm_80").read_bytes())  # its files() changed: both steps rerun
    assert set(build(tmp_path, jobs=1).jobs.values()) == {"compiled"}
    monkeypatch.setattr(EchoFrontend, "versions", lambda self: {"echo": "2"})  # its versions() changed: likewise
    assert set(build(tmp_path, jobs=1).jobs.values()) == {"compiled"}
    bundle = Bundle.read(tmp_path / "build" / "echo.kpack")
    assert [(a.label, str(a.archs[0])) for a in bundle] == [("add[a]", "sm_80"), ("add[b]", "sm_80")]
