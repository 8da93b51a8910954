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
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelpack.frontends.cuda.toolkit import cuda_include_dirs
from toolchain_support import CC, CXX

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = ["quickstart-cuda.md", "quickstart-triton.md", "quickstart-cutile.md", "quickstart-cute.md",
         "quickstart-prebuilt.md", "deploy-cpp.md", "abi.md", "migration.md", "wheels.md", "architecture.md",
         "capture.md"]
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
    assert found, f"{page} has no code blocks"
    for i, b in enumerate(found):
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
