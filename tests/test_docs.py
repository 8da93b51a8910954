"""Every code block in the user docs is real: run them GPU-lessly, in order, one directory per page.

Fence info strings (```` ```lang tokens ````):

* ``file=NAME``: the block is written to NAME (kernels, kernelpack.toml, CMakeLists.txt...);
* ``python test``: run as a script (fresh interpreter); other ``python`` blocks must at least compile;
* ``bash test``: run with ``bash -e`` (``kernelpack`` on PATH);
* ``c test lib=NAME`` / ``cpp test lib=NAME [prefix=DIR]``: compiled against the library NAME built by the page's
  earlier blocks under DIR (default ``build``); linked and run when the block has a ``main``. Every C/C++ block must
  be tested.

A page declares what it needs with ``<!-- test-requires: triton -->`` (skipped where that module is missing) and
``<!-- test-requires-command: nvcc -->`` (skipped where that command is not on PATH).

Every page of docs/ and the README is run (a new page is found, not listed); on every page, ``toml`` and ``json``
blocks must parse and untested ``python`` blocks compile, so a page without runnable blocks cannot rot silently
either.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kernelpack.frontends.cuda.toolkit import cuda_include_dirs
from toolchain_support import CC, CXX

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p.name for p in DOCS.glob("*.md")) + ["../README.md"]
FENCE = re.compile(r"^```([A-Za-z+]*)([^\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
REQUIRES = re.compile(r"<!--\s*test-requires:\s*([\w., ]+?)\s*-->")
REQUIRES_COMMAND = re.compile(r"<!--\s*test-requires-command:\s*([\w., -]+?)\s*-->")


@dataclass(frozen=True)
class Block:
    lang: str
    opts: dict[str, str]
    text: str
    line: int

    @property
    def where(self) -> str:
        return f"block at line {self.line} ({self.lang})"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    out = []
    for m in FENCE.finditer(text):
        opts = {}
        for tok in m.group(2).split():
            k, _, v = tok.partition("=")
            opts[k] = v or "yes"
        out.append(Block(m.group(1), opts, m.group(3), text[:m.start()].count("\n") + 1))
    return out


@pytest.fixture(scope="session")
def docs_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("docs-cache")


@pytest.mark.parametrize("page", PAGES)
def test_page_blocks_run(page: str, tmp_path: Path, docs_cache: Path) -> None:
    path = DOCS / page
    for need in REQUIRES.findall(path.read_text()):
        for mod in need.replace(",", " ").split():
            if importlib.util.find_spec(mod) is None:
                pytest.skip(f"{page} needs {mod}")
    for need in REQUIRES_COMMAND.findall(path.read_text()):
        for cmd in need.replace(",", " ").split():
            if shutil.which(cmd) is None:
                pytest.skip(f"{page} needs the command {cmd}")
    env = dict(os.environ, KERNELPACK_CACHE_DIR=str(docs_cache), COLUMNS="160",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    found = blocks(path)
    for i, b in enumerate(found):
        if b.lang == "toml" and "fragment" not in b.opts:
            _parses(b, page, lambda text: tomllib.loads(text))
        if b.lang == "json" and "fragment" not in b.opts:
            _parses(b, page, lambda text: json.loads(text))
        if "file" in b.opts:
            (tmp_path / b.opts["file"]).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / b.opts["file"]).write_text(b.text)
        elif b.lang == "python":
            if "test" in b.opts:
                script = tmp_path / f"_snippet_{i}.py"
                script.write_text(b.text)
                _ok(subprocess.run([sys.executable, script.name], cwd=tmp_path, env=env, capture_output=True,
                                   text=True, timeout=600), page, b)
            else:
                compile(b.text, f"{page}:{b.line}", "exec")
        elif b.lang in ("bash", "sh") and "test" in b.opts:
            _ok(subprocess.run(["bash", "-e", "-c", b.text], cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=600), page, b)
        elif b.lang in ("c", "cpp"):
            assert "test" in b.opts and "lib" in b.opts, f"{page}: {b.where} must be 'test lib=NAME'"
            _compile_c(b, tmp_path, i, page, env)


def _parses(b: Block, page: str, parse: Any) -> None:
    try:
        parse(b.text)
    except ValueError as e:  # tomllib.TOMLDecodeError and json.JSONDecodeError are ValueErrors
        raise AssertionError(f"{page}: {b.where} does not parse: {e}") from None


def _compile_c(b: Block, d: Path, i: int, page: str, env: dict[str, str]) -> None:
    prefix = d / b.opts.get("prefix", "build")
    cxx = b.lang == "cpp"
    src = d / f"_snippet_{i}.{'cpp' if cxx else 'c'}"
    src.write_text(b.text)
    compiler = CXX if cxx else CC
    std = "-std=c++17" if cxx else "-std=c99"
    has_main = re.search(r"\bint\s+main\s*\(", b.text) is not None
    cuda_inc = [f"-I{d}" for d in cuda_include_dirs()]
    cmd = [compiler, std, "-Wall", "-Wextra", "-Werror", f"-I{prefix / 'include'}", *cuda_inc, str(src)]
    if has_main:
        lib = prefix / "lib"
        cmd += [f"-L{lib}", f"-l{b.opts['lib']}", f"-Wl,-rpath,{lib}", "-ldl", "-lpthread", "-o", str(src) + ".exe"]
    else:
        cmd += ["-c", "-o", str(src) + ".o"]
    _ok(subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True), page, b)


def _ok(r: subprocess.CompletedProcess[str], page: str, b: Block) -> None:
    assert r.returncode == 0, f"{page}: {b.where} failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"


def test_every_page_is_listed_and_links_resolve() -> None:
    for page in PAGES:
        text = (DOCS / page).read_text()
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target:
                continue
            assert (DOCS / page).parent.joinpath(target).exists(), f"{page}: broken link {target}"


def read_variables() -> set[str]:
    """Every environment variable the code reads: config.py's (Python) and ``getenv`` in the C sources (the
    runtime's, the generated library's, the capture's driver recorder)."""
    src = ROOT / "src" / "kernelpack"
    found = set(re.findall(r"""(?:environ\.get|_path|_byte_count)\(\s*["']([A-Z_][A-Z0-9_]*)["']""",
                           (src / "core" / "config.py").read_text()))
    for c in [*src.glob("csrc/*.[ch]"), *src.glob("runtime/*.[ch]"), *src.glob("clib/host/*.[ch]"),
              *src.glob("capture/native/*.[ch]")]:
        found |= set(re.findall(r'getenv\("([A-Z_][A-Z0-9_]*)"\)', c.read_text()))
    from kernelpack.runtime import dryrun  # the dry-run driver's settings: its prefix + each key

    return found | {dryrun.ENV + key for key in dryrun.SETTINGS}


def test_every_environment_variable_is_on_the_environment_page() -> None:
    page = (DOCS / "environment.md").read_text()
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", page))
    read = read_variables()
    assert {"KERNELPACK_CACHE_DIR", "KERNELPACK_MAX_FILE_BYTES"} <= read  # the scan sees the code
    assert not read - documented, f"read but not on docs/environment.md: {sorted(read - documented)}"
    stale = {v for v in documented if v.startswith("KERNELPACK_")} - read
    assert not stale, f"docs/environment.md names variables nothing reads: {sorted(stale)}"
