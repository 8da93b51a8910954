"""kernelpack.torch from a generated wheel: the example wheel ex_cuda, installed where kernelpack is not importable,
registers its kernels as torch custom ops through the copy it carries (``ex_cuda._kernelpack.torch``), and
``torch.compile(fullgraph=True)`` captures them without a graph break; each call launches each kernel once (on the fake
driver, CPU tensors standing for device tensors). Numbers and CUDA graphs: tests/test_wheel_torch_gpu.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fake_cuda import run
from toolchain_support import needs_cuda_compiler

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
torch = pytest.importorskip("torch")


@needs_cuda_compiler
def test_custom_ops_from_a_generated_wheel_compile_without_graph_break_and_launch(tmp_path: Path, fresh_cache,
                                                                                  fake_cuda) -> None:
    from kernelpack.wheel import build_wheel

    src = tmp_path / "cuda"
    shutil.copytree(ROOT / "examples" / "cuda", src, ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
    whl = build_wheel(src, tmp_path / "dist", jobs=1).path
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
                        str(target), str(whl)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    # this interpreter's site-packages (torch) stay; kernelpack's source tree does not
    got = run([sys.executable, str(HERE / "wheel_torch_check.py")], tmp_path, fake_cuda, PYTHONPATH=str(target),
              FAKECUDA_CC="9.0")
    assert got.returncode == 0, got.stderr[-4000:]
    out = json.loads(got.stdout)
    assert out["graph_breaks"] == 0 and out["shape"] == [3000], out
    assert out["kernelpack_modules"] == [], out  # the copy the wheel carries did it all
    launches = got.launches()
    assert len(launches) == 4, launches  # relu + saxpy, eager and compiled (tracing ran the fake implementations)
    assert [x["grid"][0] for x in launches] == [12] * 4 and [x["block"][0] for x in launches] == [256] * 4
