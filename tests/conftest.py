"""Shared pytest fixtures: test cubins, the fake driver, a fresh compile cache.

``KERNELPACK_TEST_LAUNCH=wheel`` runs the tests with the launch extension generated wheels carry (the limited API of
CPython 3.10, ``runtime/_wheel_launch.abi3.so``) in place of the version-specific build.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cubin_factory import CubinFactory
from fake_cuda import FakeCuda, InProcessFake, session_fake
from kernelpack.bundle.kpack import Bundle
from kernelpack.core import config
from kernelpack.core.cache import CompileCache
from toolchain_support import require_nvcc


def _use_wheel_launch() -> None:
    import kernelpack.runtime

    path = Path(kernelpack.runtime.__file__).parent / "_wheel_launch.abi3.so"
    if not path.is_file():
        raise pytest.UsageError(f"KERNELPACK_TEST_LAUNCH=wheel: {path} is not built (python setup.py build_ext -i)")
    loader = importlib.machinery.ExtensionFileLoader("kernelpack.runtime._launch", str(path))
    spec = importlib.util.spec_from_file_location("kernelpack.runtime._launch", path, loader=loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    sys.modules["kernelpack.runtime._launch"] = mod
    kernelpack.runtime._launch = mod  # type: ignore[attr-defined]



if os.environ.get("KERNELPACK_TEST_LAUNCH") == "wheel":
    _use_wheel_launch()


@pytest.fixture(scope="session")
def build_cubin(tmp_path_factory: pytest.TempPathFactory) -> CubinFactory:
    """``build_cubin(source, arch, options=())`` -> cubin bytes, compiled by nvcc once per session (on-disk cache).

    ``build_cubin.path(...)`` gives the cached file, ``build_cubin.supports(arch)`` whether nvcc targets it.
    Skips the test when nvcc is missing.
    """
    return CubinFactory(tmp_path_factory.mktemp("cubins"), Path(require_nvcc()))


@pytest.fixture(scope="session")
def fake_cuda(tmp_path_factory: pytest.TempPathFactory) -> FakeCuda:
    """The fake CUDA driver, built once per session (``fake_cuda.env(...)`` for a program, ``.in_process()``)."""
    return session_fake(tmp_path_factory)


@pytest.fixture(scope="session")
def clib_env(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The demo C library on the fake driver (clib_support.session_env): built once per session."""
    from clib_support import session_env

    return session_env(tmp_path_factory)


@pytest.fixture
def fake(fake_cuda: FakeCuda) -> Iterator[InProcessFake]:
    """The fake driver in this process, reset (one sm_90 device, nothing recorded) and installed as the runtime's
    driver for the test."""
    inproc = fake_cuda.in_process()
    inproc.reset()
    with inproc.installed():
        yield inproc


@pytest.fixture(scope="session")
def runtime_bundle(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    """Every runtime test kernel (``runtime_support.build_test_bundle``), compiled once per session."""
    from runtime_support import build_test_bundle

    return build_test_bundle(tmp_path_factory.mktemp("rtk"))


@pytest.fixture
def fresh_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CompileCache]:
    """An empty compile cache, also in force for the test (``config.override(cache_dir=...)``), so compiles that are
    given no ``cache=`` use it too."""
    with cache_in_force(tmp_path_factory.mktemp("kpcache")) as cache:
        yield cache


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CompileCache]:
    """``fresh_cache`` shared by one module's tests (for module-scoped fixtures that compile)."""
    with cache_in_force(tmp_path_factory.mktemp("kpcache")) as cache:
        yield cache


@contextmanager
def cache_in_force(root: Path) -> Iterator[CompileCache]:
    """A CompileCache at ``root``, the configured cache for the block."""
    with config.override(cache_dir=root):
        yield CompileCache(root)
