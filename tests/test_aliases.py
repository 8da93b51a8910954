"""Code written against the layout before the folders keeps working: every old path of kernelpack._aliases imports
the module at its new home (one module object under both names, its own spec kept), as an import and as an attribute
of the package."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import kernelpack
from kernelpack._aliases import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imports_the_module_at_its_new_home(old: str) -> None:
    module = importlib.import_module(f"kernelpack.{old}")
    new = importlib.import_module(f"kernelpack.{MOVED[old]}")
    assert module is new
    assert module.__name__ == f"kernelpack.{MOVED[old]}"
    assert module.__spec__ is not None and module.__spec__.name == f"kernelpack.{MOVED[old]}"


def test_old_names_work_in_every_import_form_in_a_fresh_process() -> None:
    code = """
import kernelpack
assert kernelpack.abi.Abi is kernelpack.Abi                      # an attribute, nothing imported before
from kernelpack.bundle_index import BundleIndex                   # from an old module
from kernelpack.cute_host import HostProgram                      # an old package's lazy name
import kernelpack.cute_host.build as b                            # a module below an old package
import kernelpack.clib.host.build
assert b is kernelpack.clib.host.build
from kernelpack.bundle import Bundle                              # kernelpack.bundle is now the folder
from kernelpack.tuning import tune, TuningTable                   # kernelpack.tuning is now the folder
import importlib, kernelpack.core.abi
importlib.reload(kernelpack.core.abi)                             # the real module's spec was kept
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'no_such_module'"):
        kernelpack.no_such_module  # noqa: B018
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("kernelpack.no_such_module")
