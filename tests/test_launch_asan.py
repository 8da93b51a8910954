"""The C launch path (``_launch.c``) under AddressSanitizer and UndefinedBehaviorSanitizer: the extension built with
both, then the launch tests that drive it hardest run against it in a child interpreter on the fake driver -- every
call of the runtime bundle, tensor descriptors, derived values, the dispatch records (malformed ones and plans that
would write outside the buffer included), tensor lists (read through the torch bridge, staged, copied) and the
dispatch-record fuzz target (400 records edited at random, every
family launched through the C launcher with the plans they state; and the suite's share of its boundary sweep: every
integer of a record at the values that wrap its C field). Any sanitizer report fails the child.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from kernelpack.core.version import __version__

ROOT = Path(__file__).resolve().parent.parent
CC = shutil.which("gcc")
SANITIZER_PRELOAD = "KERNELPACK_TEST_SANITIZER_PRELOAD"  # the sanitizer runtimes, for the tests' own child interpreters
TESTS = ["test_dispatch_record.py", "test_runtime_launch.py", "test_descriptor_launch.py", "test_runtime_derived.py",
         "test_tensor_lists.py",
         "test_fuzz_parsers.py::test_fuzz_dispatch_record",
         "test_fuzz_parsers.py::test_every_integer_of_a_dispatch_record_at_a_width_boundary_is_refused_or_launched"]


def _runtime(name: str) -> str | None:
    out = subprocess.run([CC or "gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=False)
    path = out.stdout.strip()
    return path if os.path.isabs(path) and Path(path).is_file() else None


@pytest.mark.skipif(CC is None or _runtime("libasan.so") is None or _runtime("libubsan.so") is None,
                    reason="no gcc with the address and undefined-behavior sanitizer runtimes")
def test_the_launch_path_runs_clean_under_asan_and_ubsan(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    ext = src / "kernelpack" / "runtime" / f"_launch{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run([CC or "gcc", "-shared", "-fPIC", "-O1", "-g", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", f'-DKP_VERSION="{__version__}"',
                    f"-I{sysconfig.get_paths()['include']}", f"-I{src / 'kernelpack' / 'csrc'}",
                    str(src / "kernelpack" / "runtime" / "_launch.c"), "-o", str(ext)], check=True)
    shutil.copy(next((ROOT / "src" / "kernelpack" / "runtime").glob("_torch_bridge*.so"), ext), ext.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(ROOT / "tests")]),
           "LD_PRELOAD": f"{_runtime('libasan.so')} {_runtime('libubsan.so')}",
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=99", "UBSAN_OPTIONS": "print_stacktrace=1"}
    nvrtc = [str(p.parent) for p in Path(sys.prefix).glob("lib/python3*/site-packages/nvidia/cu*/lib/"
                                                             "libnvrtc-builtins.so*")]
    if nvrtc:  # the sanitizer runtime's dlopen does not search the library's own RPATH
        env["LD_LIBRARY_PATH"] = os.pathsep.join([*nvrtc, env.get("LD_LIBRARY_PATH", "")])
    # the preload is for this interpreter only: compilers it runs (nvcc) must not load the sanitizer runtime; a test
    # that runs the launch path in a child interpreter of its own puts it back from SANITIZER_PRELOAD
    child = (f"import os, sys; os.environ[{SANITIZER_PRELOAD!r}] = os.environ.pop('LD_PRELOAD'); "
             "import kernelpack.runtime._launch as L; "
             f"assert L.__file__ == {str(ext)!r}, L.__file__; import pytest; "
             f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '--rootdir={ROOT}', "
             f"'--basetemp={tmp_path / 'run'}', *{[str(ROOT / 'tests' / t) for t in TESTS]!r}]))")
    out = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, check=False,
                         timeout=900)
    text = out.stdout + out.stderr
    first = re.search(r"ERROR: AddressSanitizer|runtime error:|Fatal Python error", text)  # the report, not its end
    tail = text[first.start():][:4000] if first else text[-4000:]
    assert out.returncode == 0, tail
    assert "ERROR: AddressSanitizer" not in text and "runtime error:" not in out.stderr, tail
    passed = re.search(r"(\d+) passed", out.stdout)
    assert passed is not None and int(passed.group(1)) >= 100, tail
