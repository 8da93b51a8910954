"""Shared pytest fixtures."""

from __future__ import annotations

import pytest

from cubin_factory import CubinFactory, find_nvcc


@pytest.fixture(scope="session")
def build_cubin(tmp_path_factory: pytest.TempPathFactory) -> CubinFactory:
    """``build_cubin(source, arch, options=())`` -> cubin bytes, compiled by nvcc once per session (on-disk cache).

    ``build_cubin.path(...)`` gives the cached file, ``build_cubin.supports(arch)`` whether nvcc targets it.
    Skips the test when nvcc is missing.
    """
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (/usr/local/cuda/bin/nvcc or PATH); cubin tests need it")
    return CubinFactory(tmp_path_factory.mktemp("cubins"), nvcc)
