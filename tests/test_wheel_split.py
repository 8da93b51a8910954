"""``kernelpack wheel --split arch`` (kernelpack/wheel/split.py): a front wheel of a few KB and one provider wheel per
arch family holding only that family's binaries; installed by extra (``pip install 'ex_cuda[sm9x]'``), offline, the
front loads the provider of the device's family and launches through its runtime (fake driver), and on a device whose
provider is not installed -- or that no provider serves -- the first use is an ImportError naming the device and the
wheel to install."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fake_cuda import run
from toolchain_support import needs_cuda_compiler

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
CHECK = """
import json, sys
import ex_cuda
try:
    ex_cuda.saxpy(2.0, 0x100000, 0x100000, 256, grid=1, block=256)
    out = {"runtime": ex_cuda.__kernelpack_runtime__.__name__}
except ImportError as e:
    out = {"error": str(e)}
out["modules"] = sorted({m.split(".")[0] for m in sys.modules if m.startswith(("ex_cuda", "kernelpack"))})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from kernelpack.core import config
    from kernelpack.wheel import build_split_wheels
    from toolchain_support import cuda_compiler_available

    if not cuda_compiler_available():
        pytest.skip("no CUDA C++ compiler")
    root = tmp_path_factory.mktemp("split")
    shutil.copytree(ROOT / "examples" / "cuda", root / "cuda", ignore=shutil.ignore_patterns("build", "dist"))
    with config.override(cache_dir=root / "cache"):
        return [r.path for r in build_split_wheels(root / "cuda", root / "dist", jobs=2)]


def _read(whl: Path, member: str) -> bytes:
    with zipfile.ZipFile(whl) as z:
        return z.read(member)


def test_the_front_is_small_and_each_provider_holds_only_its_family(wheels: list[Path]) -> None:
    from kernelpack.bundle.kpack import Bundle

    names = [w.name for w in wheels]
    assert names == ["ex_cuda-1.0.0-py3-none-any.whl", "ex_cuda_sm8x-1.0.0-cp310-abi3-manylinux_2_17_x86_64.whl",
                     "ex_cuda_sm9x-1.0.0-cp310-abi3-manylinux_2_17_x86_64.whl"] or "aarch64" in names[1], names
    front = wheels[0]
    assert front.stat().st_size <= 100 * 1024
    with zipfile.ZipFile(front) as z:
        members = z.namelist()
    assert not [m for m in members if m.endswith((".kpack", ".so"))], members
    assert "ex_cuda/__init__.pyi" in members and "ex_cuda/_kernelpack/argtypes.py" in members  # the stubs' types
    meta = _read(front, "ex_cuda-1.0.0.dist-info/METADATA").decode()
    for fam in ("sm8x", "sm9x"):
        assert f"Provides-Extra: {fam}\n" in meta and f'Requires-Dist: ex_cuda_{fam}==1.0.0; extra == "{fam}"' in meta
    for whl, major in zip(wheels[1:], (8, 9)):
        pkg = whl.name.split("-")[0]
        bundle = Bundle.from_bytes(_read(whl, f"{pkg}/ex_cuda.kpack"))
        archs = {str(b.arch) for art in bundle for b in art.binaries}
        assert archs and all(a.split("_")[1].startswith(str(major)) for a in archs), archs
        assert {a.name for a in bundle} == {"saxpy", "relu"}


@needs_cuda_compiler
def test_installed_by_extra_the_front_loads_its_devices_provider_or_names_the_missing_one(
        wheels: list[Path], tmp_path: Path, fake_cuda) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links",
                        str(wheels[0].parent), "--target", str(target), "ex_cuda[sm9x]"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in target.iterdir() if not p.name.endswith(".dist-info")) == ["ex_cuda", "ex_cuda_sm9x"]

    def check(cc: str) -> tuple[dict, int]:  # type: ignore[type-arg]
        got = run([sys.executable, "-c", CHECK], tmp_path, fake_cuda, PYTHONPATH=str(target), FAKECUDA_CC=cc)
        assert got.returncode == 0, got.stderr[-3000:]
        return json.loads(got.stdout), len(got.launches())

    out, launches = check("9.0")
    assert out == {"runtime": "ex_cuda_sm9x._kernelpack", "modules": ["ex_cuda", "ex_cuda_sm9x"]} and launches == 1
    out, launches = check("8.6")
    assert launches == 0 and "ex_cuda_sm9x" not in out["modules"], out
    assert ("ex_cuda: device 0 (?, sm_86) needs the provider wheel ex_cuda_sm8x (ex_cuda_sm8x-1.0.0-*.whl), which is "
            "not installed: pip install 'ex_cuda[sm8x]==1.0.0' (installed providers: ex_cuda_sm9x)") == out["error"]
    out, _ = check("12.0")
    assert out["error"] == "ex_cuda 1.0.0 has no kernels for device 0 (?, sm_120): its provider wheels serve sm8x, sm9x"


def test_a_device_newer_than_every_family_takes_the_newest_older_provider_with_ptx(
        wheels: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The front's choice alone (its driver query stubbed): the device's family, required when the release has it;
    else the highest older family that carries PTX; a provider of another version is refused."""
    for family, version in (("sm8x", "1.0.0"), ("sm9x", "1.0.0")):
        (tmp_path / f"ex_cuda_{family}").mkdir()
        (tmp_path / f"ex_cuda_{family}" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ns: dict = {"__name__": "ex_cuda"}
    exec(compile(_read(wheels[0], "ex_cuda/__init__.py"), "ex_cuda/__init__.py", "exec"), ns)  # noqa: S102
    ns["__kernelpack_providers__"] = {"sm8x": (8, True), "sm9x": (9, False), "sm10x": (10, False)}

    def provider(cc: tuple[int, int]) -> str:
        ns["__kernelpack_device__"] = lambda: (*cc, "GPU")
        return ns["__kernelpack_provider__"]().__name__  # type: ignore[no-any-return]

    assert provider((9, 0)) == "ex_cuda_sm9x"
    assert provider((8, 6)) == "ex_cuda_sm8x"
    assert provider((12, 0)) == "ex_cuda_sm8x"  # sm8x's PTX, compiled by the driver; sm9x has none
    with pytest.raises(ImportError, match=r"needs the provider wheel ex_cuda_sm10x .*\(installed providers: "
                                          r"ex_cuda_sm8x, ex_cuda_sm9x"):
        provider((10, 0))
    (tmp_path / "ex_cuda_sm9x" / "__init__.py").write_text("__version__ = '0.9.0'\n")
    sys.modules.pop("ex_cuda_sm9x", None)
    with pytest.raises(ImportError, match=r"found its provider ex_cuda_sm9x 0\.9\.0: install the same version"):
        provider((9, 0))
    sys.modules.pop("ex_cuda_sm9x", None)
    sys.modules.pop("ex_cuda_sm8x", None)
