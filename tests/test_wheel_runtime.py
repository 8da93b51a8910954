"""The runtime a generated wheel carries (kernelpack/wheel/runtime.py): what it holds and leaves out, tags checked the
way auditwheel and abi3audit check them, the version checks between a package, its runtime and its launch extension
(a clear ImportError, never a silent mix), and two packages built by different kernelpack versions side by side in
one process, each launching through its own runtime (on the fake driver)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import kernelpack
from kernelpack.wheel import WheelError, build_wheel
from kernelpack.wheel.runtime import EXTENSION, carried_modules, carried_runtime, extension_version
from toolchain_support import CC, needs_cuda_compiler
from wheel_support import install_target

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
KP = Path(kernelpack.__file__).resolve().parent
KERNEL = """extern "C" __global__ void scale(float a, float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""


def project(where: Path, name: str) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "k.cu").write_text(KERNEL)
    (where / "kernelpack.toml").write_text(f'[library]\nname = "{name}"\nversion = "1.0.0"\narchs = ["sm_90a"]\n\n'
                                           f'[[cuda]]\nsource = "k.cu"\nkernels = ["scale"]\n')
    return where


def needs_extension() -> None:
    if not (KP / EXTENSION).is_file():
        pytest.skip(f"{KP / EXTENSION} is not built (python setup.py build_ext --inplace)")


def test_the_carried_runtime_is_the_loader_without_compilers_generators_or_frontends() -> None:
    mods = carried_modules()
    assert {"runtime/module.py", "runtime/family.py", "bundle/index.py", "launch/plan.py", "core/abi.py",
            "argtypes.py", "bundle/embedded.py"} <= set(mods)  # a library's bundle is read too
    tops = {m.split("/")[0] for m in mods}
    assert tops <= {"runtime", "bundle", "launch", "core", "argtypes.py", "torch.py"}, tops
    assert not {"core/cache.py", "core/toolchain.py", "core/publish.py"} & set(mods)  # nothing a build needs
    rt = carried_runtime("pkg", "x86_64")
    assert set(rt.files) >= {*mods, "__init__.py", "py.typed"}
    assert b"__version__ = " + repr(kernelpack.__version__).encode() in rt.files["__init__.py"]


def test_an_absolute_kernelpack_import_in_the_runtime_is_refused(tmp_path: Path) -> None:
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / "__init__.py").write_text("from .loader import x\n")
    (tmp_path / "runtime" / "loader.py").write_text("def f():\n    from kernelpack.core import abi\n")
    with pytest.raises(WheelError, match=r"runtime/loader.py imports kernelpack.core absolutely"):
        carried_modules(tmp_path)


def test_an_extension_of_another_kernelpack_is_refused_when_the_wheel_is_built(tmp_path: Path, monkeypatch) -> None:
    needs_extension()
    assert extension_version((KP / EXTENSION).read_bytes()) == kernelpack.__version__
    fake_root = tmp_path / "kp"
    shutil.copytree(KP, fake_root, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    data = (KP / EXTENSION).read_bytes().replace(f"version={kernelpack.__version__};".encode(), b"version=0.0.1;")
    (fake_root / EXTENSION).write_bytes(data)
    monkeypatch.setattr("kernelpack.wheel.runtime.package_root", lambda: fake_root)
    with pytest.raises(WheelError, match=r"built by kernelpack 0\.0\.1, this is .*rebuild it"):
        carried_runtime("pkg", "x86_64")


def test_a_wheel_for_another_cpu_carries_the_python_path_and_says_so() -> None:
    needs_extension()
    rt = carried_runtime("pkg", "aarch64")
    assert rt.extension is None and rt.python_tag == "py3-none"
    assert "runtime/_launch.abi3.so" not in rt.files
    assert any("built for x86_64, the wheel for aarch64" in n for n in rt.notes)


# ------------------------------------------------------------------------------------------------ tags


def _tool(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install 'kernelpack[dev]')")


@needs_cuda_compiler
@pytest.mark.parametrize("with_library", [False, True])
def test_tags_are_what_auditwheel_and_abi3audit_find(tmp_path: Path, fresh_cache, with_library: bool) -> None:
    needs_extension()
    _tool("auditwheel")
    _tool("abi3audit")
    whl = build_wheel(project(tmp_path / "p", "tagged"), tmp_path / "dist", jobs=1, with_library=with_library).path
    python, abi, platform = whl.name[:-4].split("-")[2:]
    assert (python, abi) == ("cp310", "abi3")
    show = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(whl)], capture_output=True, text=True,
                          timeout=300)
    assert show.returncode == 0, show.stdout + show.stderr
    text = " ".join(show.stdout.split())
    found = re.search(r'is consistent with the following platform tag: "([^"]+)"', text)
    assert found and found[1] == platform, text  # only glibc's libraries, symbol versions within the policy
    if not with_library:
        assert platform == "manylinux_2_17_x86_64" or platform.endswith("aarch64")
    audit = subprocess.run([sys.executable, "-m", "abi3audit", "--strict", "--summary", str(whl)], capture_output=True,
                           text=True, timeout=300)
    summary = " ".join((audit.stdout + audit.stderr).split())
    assert audit.returncode == 0 and "0 ABI version mismatches and 0 ABI violations" in summary, summary


# ------------------------------------------------------------------------------------------------ versions

CHECK = """
import json, sys
out = {}
for name in sys.argv[1:]:
    try:
        pkg = __import__(name)
        fn = pkg.scale
        fn(2.0, 0x100000, 256, grid=1, block=256)
        rt = pkg.__kernelpack_runtime__
        ext = sys.modules[rt.__name__ + ".runtime._launch"]
        out[name] = {"runtime": rt.__name__, "version": rt.__version__, "ext": ext.VERSION, "ext_file": ext.__file__,
                     "type": type(fn).__module__, "ok": True}
    except ImportError as e:
        out[name] = {"error": str(e)}
out["kernelpack_modules"] = sorted(m for m in sys.modules if m.split(".")[0] == "kernelpack")
print(json.dumps(out))
"""


def _run(target: Path, names: list[str], fake_cuda) -> dict:  # type: ignore[no-untyped-def]
    for cache in list(target.rglob("__pycache__")):  # pip compiled them; an edit of the same size and second
        shutil.rmtree(cache)  # would be read from the stale .pyc
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **fake_cuda.env(cc="9.0"),
           "PYTHONPATH": str(target), "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, "-c", CHECK, *names], capture_output=True, text=True, env=env,
                       cwd=target.parent, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout)


@needs_cuda_compiler
def test_a_package_and_its_runtime_of_different_versions_fail_to_import_naming_both(tmp_path: Path, fresh_cache,
                                                                                     fake_cuda) -> None:
    needs_extension()
    whl = build_wheel(project(tmp_path / "p", "mixed"), tmp_path / "dist", jobs=1).path
    target = tmp_path / "site"
    install_target([whl], target)
    assert _run(target, ["mixed"], fake_cuda)["mixed"]["ok"]
    rt = target / "mixed" / "_kernelpack"
    kv = kernelpack.__version__
    # the runtime's files of another build (a --target install over an older one, a hand-made copy)
    (rt / "__init__.py").write_text((rt / "__init__.py").read_text().replace(repr(kv), "'0.0.1'"))
    got = _run(target, ["mixed"], fake_cuda)["mixed"]
    assert re.search(rf"mixed was built by kernelpack {re.escape(kv)}, but the runtime it carries \(.*\) is kernelpack "
                     r"0\.0\.1: .*pip install --force-reinstall mixed", got["error"]), got
    # the package and its runtime's Python agree, its launch extension does not: refused at the first load
    init = target / "mixed" / "__init__.py"
    init.write_text(init.read_text().replace(f"__kernelpack_version__ = {kv!r}", "__kernelpack_version__ = '0.0.1'"))
    (rt / "core" / "version.py").write_text('__version__ = "0.0.1"\n')
    got = _run(target, ["mixed"], fake_cuda)["mixed"]
    assert re.search(rf"launch extension .*_launch.abi3.so was built by kernelpack {re.escape(kv)} and the runtime "
                     r"beside it is kernelpack 0\.0\.1; the package was assembled from files of two kernelpack "
                     r"versions", got["error"]), got


def _other_kernelpack(where: Path, version: str) -> Path:
    """A copy of this kernelpack's sources that calls itself ``version``, its wheel launch extension built for it
    (as setup.py builds it; -O0: only what it is, not how fast, matters here)."""
    src = where / "src"
    shutil.copytree(KP, src / "kernelpack", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    (src / "kernelpack" / "core" / "version.py").write_text(f'__version__ = "{version}"\n')
    rt = src / "kernelpack" / "runtime"
    inc = sysconfig.get_paths()["include"]
    r = subprocess.run([CC, "-shared", "-fPIC", "-O0", "-std=c11", "-fvisibility=hidden", f'-DKP_VERSION="{version}"',
                        "-DPy_LIMITED_API=0x030A0000", f"-I{rt}", f"-I{src / 'kernelpack' / 'csrc'}", f"-I{inc}",
                        str(rt / "_wheel_launch.c"), "-o", str(src / "kernelpack" / EXTENSION)],
                       capture_output=True, text=True, timeout=300)
    if r.returncode:
        pytest.skip(f"cannot build the launch extension here: {r.stderr[-1000:]}")
    return src


@needs_cuda_compiler
def test_two_packages_built_by_different_kernelpack_versions_run_side_by_side(tmp_path: Path, fresh_cache,
                                                                              fake_cuda) -> None:
    needs_extension()
    new = build_wheel(project(tmp_path / "new", "newer"), tmp_path / "dist", jobs=1).path
    other = _other_kernelpack(tmp_path / "other", "0.0.9")
    code = ("import sys; from kernelpack.wheel import build_wheel; "
            "print(build_wheel(sys.argv[1], sys.argv[2], jobs=1).path)")
    env = {**os.environ, "PYTHONPATH": str(other), "KERNELPACK_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", code, str(project(tmp_path / "old", "older")), str(tmp_path / "dist")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    old = Path(r.stdout.strip().splitlines()[-1])
    with zipfile.ZipFile(old) as z:
        assert b"Generator: kernelpack 0.0.9" in z.read("older-1.0.0.dist-info/WHEEL")
    target = tmp_path / "site"
    install_target([new, old], target)
    got = _run(target, ["newer", "older"], fake_cuda)
    assert got["newer"]["ok"] and got["older"]["ok"], got
    assert (got["newer"]["version"], got["newer"]["ext"]) == (kernelpack.__version__,) * 2
    assert (got["older"]["version"], got["older"]["ext"]) == ("0.0.9", "0.0.9")
    assert got["newer"]["ext_file"] != got["older"]["ext_file"]  # two extensions loaded, one each
    assert got["kernelpack_modules"] == []
