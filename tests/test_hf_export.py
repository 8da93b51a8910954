"""``kernelpack export --hf-kernels DIR`` (kernelpack/wheel/hf.py), checked with the real ``kernels`` package (local
path, offline): its loader picks the variant written (``sdk-cpython-3.10-abi3-<cpu>-linux``: no torch, no CUDA
runtime version), its metadata parser reads ``metadata.json`` (archs in the hub's spelling, no Python dependency),
its digest of the files is the one written, and ``get_local_kernel`` imports the package and launches a kernel
through the runtime it carries (fake driver); a changed file is refused by its digest check, and a variant folder
kernelpack did not write is never replaced."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from fake_cuda import run
from toolchain_support import needs_cuda_compiler

pytestmark = [pytest.mark.slow, needs_cuda_compiler,
              pytest.mark.skipif(importlib.util.find_spec("kernels") is None,
                                 reason="the kernels package is not installed (pip install kernels)")]
ROOT = Path(__file__).resolve().parent.parent
LOAD = """
import json, sys, warnings
from pathlib import Path
warnings.simplefilter("error")  # a digest or metadata warning fails the load
from kernels import get_local_kernel
k = get_local_kernel(Path(sys.argv[1]))
k.saxpy(2.0, 0x100000, 0x100000, 256, grid=1, block=256)
print(json.dumps({"name": k.__name__, "all": k.__all__, "runtime": k.__kernelpack_runtime__.__name__,
                  "kernelpack": sorted(m for m in sys.modules if m.split(".")[0] == "kernelpack")}))
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from kernelpack.core import config
    from kernelpack.wheel.hf import export_hf_kernels

    root = tmp_path_factory.mktemp("hf")
    shutil.copytree(ROOT / "examples" / "cuda", root / "cuda", ignore=shutil.ignore_patterns("build", "dist"))
    with config.override(cache_dir=root / "cache"):
        return export_hf_kernels(root / "cuda", root / "hub", jobs=2)


def _load(hub: Path, tmp: Path, fake_cuda):  # type: ignore[no-untyped-def]
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp / "hf-home"), "PYTHONPATH": ""}
    return run([sys.executable, "-c", LOAD, str(hub)], tmp, fake_cuda, FAKECUDA_CC="9.0", **env)


def test_the_kernels_package_resolves_the_variant_and_reads_metadata_and_digest(exported) -> None:  # type: ignore
    from kernels import Metadata
    from kernels._internals.variants import VariantAccepted, get_variants_local, resolve_variant
    from kernels._rust import Digest, DigestAlgorithm

    root, variant = exported.root, exported.variant
    assert variant == f"sdk-cpython-3.10-abi3-{os.uname().machine}-linux"
    chosen, trace = resolve_variant(get_variants_local(root / "build"))
    assert chosen is not None and chosen.variant_str == variant, trace
    assert all(isinstance(d, VariantAccepted) for d in trace)
    folder = root / "build" / variant
    meta = Metadata.read_from_file(folder / "metadata.json")
    assert (meta.id, str(meta.name), meta.version) == (exported.id, "ex-cuda", 1)
    assert meta.python_depends == [] and sorted(meta.backend.archs or []) == ["8.0", "9.0a"]
    assert meta.digest is not None
    meta.digest.validate(Digest.hash_variant(DigestAlgorithm.SHA256, folder))  # what kernels checks at load
    assert {"__init__.py", "__init__.pyi", "ex_cuda.kpack", "_kernelpack/runtime/_launch.abi3.so"} <= set(
        meta.digest.files)
    assert (root / "README.md").read_text().startswith("---\nlibrary_name: kernels\n")


def test_get_local_kernel_imports_and_launches_and_refuses_a_changed_file(exported, tmp_path: Path,
                                                                          fake_cuda) -> None:  # type: ignore
    hub = tmp_path / "hub"
    shutil.copytree(exported.root, hub)
    got = _load(hub, tmp_path, fake_cuda)
    assert got.returncode == 0, got.stderr[-3000:]
    out = json.loads(got.stdout)
    assert out == {"name": exported.id, "all": ["relu", "saxpy"], "runtime": f"{exported.id}._kernelpack",
                   "kernelpack": []}, out
    assert len(got.launches()) == 1
    init = hub / "build" / exported.variant / "__init__.py"
    init.write_text(init.read_text() + "\n# changed\n")
    got = _load(hub, tmp_path, fake_cuda)
    assert got.returncode != 0 and "__init__.py" in got.stderr and "digest" in got.stderr.lower(), got.stderr[-3000:]


def test_a_variant_folder_kernelpack_did_not_write_is_not_replaced(exported, tmp_path: Path, fresh_cache) -> None:
    from kernelpack.wheel import WheelError
    from kernelpack.wheel.hf import export_hf_kernels

    foreign = tmp_path / "hub" / "build" / exported.variant
    foreign.mkdir(parents=True)
    (foreign / "__init__.py").write_text("# someone's kernel\n")
    shutil.copytree(ROOT / "examples" / "cuda", tmp_path / "cuda", ignore=shutil.ignore_patterns("build", "dist"))
    with pytest.raises(WheelError, match="was not written by kernelpack"):
        export_hf_kernels(tmp_path / "cuda", tmp_path / "hub", jobs=1)
    assert (foreign / "__init__.py").read_text() == "# someone's kernel\n"
    shutil.rmtree(foreign)
    again = export_hf_kernels(tmp_path / "cuda", tmp_path / "hub", jobs=1)  # and its own output is replaced
    assert again.id == exported.id and (tmp_path / "hub" / "build" / again.variant / "metadata.json").is_file()
    export_hf_kernels(tmp_path / "cuda", tmp_path / "hub", jobs=1)
