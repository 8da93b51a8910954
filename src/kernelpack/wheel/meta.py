"""A wheel's identity and core metadata: the distribution and import name, the PEP 440 version, METADATA, WHEEL.

The package is named by ``[library] name``: the import name as written, the distribution name normalized (PEP 503
for comparisons, PEP 427/491 escaping in file names). The version is ``[library] version``, normalized (PEP 440:
``1.0.0-beta.2`` -> ``1.0.0b2``). Nothing here needs ``packaging``: kernelpack's own dependencies stay two.
"""

from __future__ import annotations

import keyword
import re
import sys
from dataclasses import dataclass, field

from ..core.errors import KernelpackError
from ..core.names import check_library_name, check_version
from ..core.version import __version__ as KERNELPACK_VERSION

# PEP 508 names: letters and digits, with . _ - inside (never at either end)
DIST_NAME = re.compile(r"[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]")
REQUIRES_PYTHON = ">=3.10"  # kernelpack's own; the carried extension's limited API (kernelpack.wheel.runtime)
_PRE = {"a": "a", "alpha": "a", "b": "b", "beta": "b", "c": "rc", "rc": "rc", "pre": "rc", "preview": "rc"}
_VERSION_PARTS = re.compile(r"(?P<release>[0-9]+(?:\.[0-9]+)*)"
                            r"(?:[-.]?(?P<pre>alpha|beta|preview|pre|rc|a|b|c)[-.]?(?P<pre_n>[0-9]*))?"
                            r"(?:[-.]?(?P<post>post|rev|r)[-.]?(?P<post_n>[0-9]*))?"
                            r"(?:[-.]?(?P<dev>dev)[-.]?(?P<dev_n>[0-9]*))?", re.IGNORECASE)


class WheelError(KernelpackError):
    """A project that cannot become a wheel as it is (its name, its version, the output file)."""


def normalize_version(version: str) -> str:
    """The PEP 440 normal form of a version :func:`kernelpack.core.names.check_version` accepts."""
    check_version(version)
    m = _VERSION_PARTS.fullmatch(version)
    if m is None:  # pragma: no cover - check_version accepts exactly what this matches
        raise WheelError(f"version {version!r} is not a PEP 440 version")
    out = ".".join(str(int(x)) for x in m["release"].split("."))
    if m["pre"]:
        out += f"{_PRE[m['pre'].lower()]}{int(m['pre_n'] or 0)}"
    if m["post"]:
        out += f".post{int(m['post_n'] or 0)}"
    if m["dev"]:
        out += f".dev{int(m['dev_n'] or 0)}"
    return out


def canonical_name(name: str) -> str:
    """PEP 503: lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def file_name_part(name: str) -> str:
    """The distribution name as wheel and sdist file names spell it (PEP 427 as amended by PEP 491/625)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def check_package_name(given: object, what: str = "[library] name") -> str:
    """``name`` as the package's import name and distribution name: a library name (an identifier kernelpack can
    build) that PEP 508 accepts as a distribution name (no ``_`` at the end), that ``import`` accepts (not a Python
    keyword) and that does not shadow a module of the standard library."""
    try:
        name = check_library_name(given, what)
    except KernelpackError as e:
        raise WheelError(e.message) from None
    if keyword.iskeyword(name):
        raise WheelError(f"{what} {name!r} is a Python keyword: `import {name}` is a syntax error; choose another name")
    if not DIST_NAME.fullmatch(name):
        raise WheelError(f"{what} {name!r} is not a valid distribution name (PEP 508: letters and digits, with . _ - "
                         f"only between them); choose another name")
    if name in sys.stdlib_module_names or name.lower() in sys.stdlib_module_names:
        raise WheelError(f"{what} {name!r} is the name of a standard library module: installing it would shadow "
                         f"`import {name.lower()}`; choose another name")
    return name


@dataclass(frozen=True)
class WheelMeta:
    """What a wheel says about itself."""

    name: str  # import name and distribution name as written
    version: str  # normalized
    summary: str = ""
    description: str = ""
    description_type: str = "text/markdown"
    extra: tuple[tuple[str, str], ...] = field(default=())  # further (key, value) lines: License, Author, Project-URL

    @property
    def dist(self) -> str:
        """``name-version`` as file names spell it (the .dist-info folder, the sdist's top folder)."""
        return f"{file_name_part(self.name)}-{self.version}"

    def wheel_name(self, tag: str) -> str:
        return f"{self.dist}-{tag}.whl"

    def metadata(self) -> str:
        """METADATA (core metadata 2.1): the name, the version, no requirement (the package carries its runtime:
        :mod:`kernelpack.wheel.runtime`)."""
        lines = [("Metadata-Version", "2.1"), ("Name", self.name), ("Version", self.version)]
        if self.summary:
            lines.append(("Summary", one_line(self.summary)))
        lines += [(k, one_line(v)) for k, v in self.extra]
        lines += [("Requires-Python", REQUIRES_PYTHON)]
        if self.description:
            lines.append(("Description-Content-Type", self.description_type))
        head = "".join(f"{k}: {v}\n" for k, v in lines)
        return head + ("\n" + self.description.rstrip("\n") + "\n" if self.description else "")


def wheel_file(tag: str, purelib: bool) -> str:
    """The WHEEL file (PEP 427)."""
    return (f"Wheel-Version: 1.0\nGenerator: kernelpack {KERNELPACK_VERSION}\n"
            f"Root-Is-Purelib: {'true' if purelib else 'false'}\nTag: {tag}\n")


def one_line(text: str) -> str:
    """A header value: one line, no control characters (a newline would start a forged header)."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())
