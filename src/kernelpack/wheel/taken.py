"""Wheel names that belong to someone else: a kernelpack wheel called ``pip`` makes ``pip install`` uninstall pip
(and break the environment); one called like an installed package's import name (``PIL``, ``nvidia``) writes its
files over that package's.

A name is taken (compared in PEP 503 normal form: ``Pip``, ``cuda_python`` and ``cuda-python`` are one name) when
it is

* on a short built-in list: the packages that install packages (replacing one breaks ``pip install`` itself) and
  the packages of the stack kernelpack and its users run beside (kernelpack itself, its dependencies, the DSLs, the
  array libraries, the CUDA Python packages), since a build environment (pip's isolated one above all) need not
  have them installed to make a wheel that replaces them where it is installed;
* an installed distribution where the build runs (``importlib.metadata``), unless that distribution is a kernelpack
  wheel (its ``WHEEL`` file says ``Generator: kernelpack``): rebuilding your own installed package is an upgrade;
* an installed package's import name (a module or package directory in a ``site-packages`` folder).

A project that *is* that package says so: ``[library] claim_name = "NAME"`` (the name again, so a copied project
file cannot carry the permission over to another name).
"""

from __future__ import annotations

import importlib.metadata as md
import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES

from .meta import WheelError, canonical_name

INSTALLERS = frozenset({"pip", "setuptools", "wheel", "packaging", "build", "installer", "virtualenv", "uv",
                        "pkg-resources"})
STACK = frozenset({"kernelpack", "rich", "tomli", "numpy", "torch", "triton", "jax", "jaxlib", "cupy", "cuda",
                   "cuda-python", "cuda-bindings", "cuda-core", "cuda-tile", "cutlass", "nvidia-cutlass-dsl"})
CLAIM_KEY = "claim_name"


def check_not_taken(name: str, claim: object, where: str) -> None:
    """WheelError when ``name`` belongs to someone else (see the module doc) and ``claim`` (``[library]
    claim_name``) does not name it."""
    canon = canonical_name(name)
    if claim is not None:
        if not isinstance(claim, str) or canonical_name(claim) != canon:
            raise WheelError(f"{where}: [library] {CLAIM_KEY} = {claim!r:.80} is not the library name {name!r}; "
                             f"{CLAIM_KEY} repeats the name this project owns")
        return
    owner = taken_by(name)
    if owner is not None:
        raise WheelError(f"{where}: [library] name {name!r} is {owner}: installing this wheel would replace it "
                         f"(pip uninstalls an installed distribution of the same name first, and a package's files "
                         f"are overwritten); choose another name, or, if this project is that package, say so with "
                         f"[library] {CLAIM_KEY} = \"{name}\"")


def taken_by(name: str) -> str | None:
    """Whose ``name`` is, in words (None: nobody's but a kernelpack wheel's)."""
    canon = canonical_name(name)
    if canon in INSTALLERS:
        return f"the name of a Python packaging tool ({canon})"
    if canon in STACK:
        return f"the name of a package of the GPU Python stack ({canon})"
    dists = list(md.distributions(name=name))
    for d in dists:
        if not _made_by_kernelpack(d):
            where = d.locate_file("")
            return f"the name of the installed distribution {d.metadata['Name']} {d.version} (in {where})"
    if dists:
        return None  # a kernelpack wheel of this name: its package directory is its own
    found = _module_files(name)
    if found:
        return f"the import name of an installed package ({', '.join(found)})"
    return None


def _made_by_kernelpack(dist: md.Distribution) -> bool:
    text = dist.read_text("WHEEL") or ""
    return any(line.split(":", 1)[-1].split()[:1] == ["kernelpack"] for line in text.splitlines()
               if line.lower().startswith("generator:"))


def _module_files(name: str) -> list[str]:
    """What ``import name`` would find in the folders installed packages live in (``site-packages``, not the
    current directory or a project folder on ``sys.path``): a package directory or a module file. Only names are
    looked at; nothing is imported."""
    suffixes = tuple(EXTENSION_SUFFIXES) + (".py", ".pyc")
    out = []
    for d in sys.path:
        if os.path.basename(d.rstrip(os.sep)) not in ("site-packages", "dist-packages") or not os.path.isdir(d):
            continue
        out += [os.path.join(d, name)] if os.path.isdir(os.path.join(d, name)) else []
        out += [os.path.join(d, name + s) for s in suffixes if os.path.isfile(os.path.join(d, name + s))]
    return out
