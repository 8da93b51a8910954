"""A project's wheel metadata: ``[library] name`` and ``version`` (required), and in a ``pyproject.toml`` the
``[project]`` table's descriptive keys (PEP 621).

``[project] name`` and ``version`` may stand in for ``[tool.kernelpack.library]``'s, or repeat them (they must
agree). What a kernelpack wheel cannot honour is refused, naming the key: its one requirement is kernelpack
(``dependencies``), it has no entry points, and nothing is dynamic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.errors import KernelpackError
from ..core.files import read_bounded
from ..project.model import PYPROJECT, Project, declared_library, read_toml
from .meta import WheelError, WheelMeta, canonical_name, check_package_name, normalize_version
from .taken import CLAIM_KEY, check_not_taken

PROJECT_KEYS = ("name", "version", "description", "readme", "license", "authors", "maintainers", "keywords",
                "classifiers", "urls")
README_TYPES = {".md": "text/markdown", ".markdown": "text/markdown", ".rst": "text/x-rst", ".txt": "text/plain"}


def wheel_meta(project: Project) -> tuple[WheelMeta, list[Path]]:
    """The wheel's metadata (without a generated summary) and the files it read (for the sdist)."""
    declared = declared_library(project.path)
    pep621 = _pep621(project.path)
    name = check_package_name(project.library.name)
    check_not_taken(name, declared.get(CLAIM_KEY), str(project.path))
    if "name" in pep621 and canonical_name(str(pep621["name"])) != canonical_name(name):
        raise WheelError(f"{project.path}: [project] name {pep621['name']!r} differs from the library name "
                         f"{name!r}; the package is imported as the library's name: make them the same")
    given = declared.get("version")
    if given is None:
        raise WheelError(f"{project.path}: no version; a wheel needs one: set [library] version = \"1.0.0\""
                         + (" (or [project] version)" if project.path.name == PYPROJECT else ""))
    try:
        version = normalize_version(given)
        other = normalize_version(pep621["version"]) if "version" in pep621 else version
    except KernelpackError as e:
        raise WheelError(f"{project.path}: {e.message}") from None
    if other != version:
        raise WheelError(f"{project.path}: [tool.kernelpack.library] version {given!r} and [project] version "
                         f"{pep621['version']!r} differ; give one of them")
    read: list[Path] = []
    meta = WheelMeta(name, version, **_descriptive(pep621, project.root, read))
    return meta, read


def _pep621(path: Path) -> dict[str, Any]:
    if path.name != PYPROJECT:
        return {}
    table = read_toml(path).get("project", {})
    if not isinstance(table, dict):
        raise WheelError(f"{path}: project must be a table ([project])")
    unknown = sorted(set(table) - set(PROJECT_KEYS))
    if unknown:
        raise WheelError(f"{path}: [project] {', '.join(unknown)}: not supported by kernelpack.build_meta (a "
                         f"kernelpack wheel requires kernelpack only, has no entry points and nothing dynamic); "
                         f"supported: {', '.join(PROJECT_KEYS)}")
    for key in ("name", "version", "description", "license"):
        if key in table and not isinstance(table[key], str) and not (key == "license" and isinstance(table[key], dict)):
            raise WheelError(f"{path}: [project] {key} must be a string, got {table[key]!r:.60}")
    return table


def _descriptive(t: dict[str, Any], root: Path, read: list[Path]) -> dict[str, Any]:
    """WheelMeta's summary, description and further header lines from [project]."""
    out: dict[str, Any] = {"summary": t.get("description", "")}
    extra: list[tuple[str, str]] = []
    if "readme" in t:
        out["description"], out["description_type"] = _readme(t["readme"], root, read)
    lic = t.get("license")
    if isinstance(lic, str):
        extra.append(("License", lic))
    elif isinstance(lic, dict):
        text = lic.get("text") if "text" in lic else _file_text(lic.get("file"), root, read, "license")
        extra.append(("License", " ".join(str(text).split())))
    for key, field in (("authors", "Author"), ("maintainers", "Maintainer")):
        people = _strings_or_tables(t, key)
        names = [p["name"] for p in people if "name" in p and "email" not in p]
        emails = [f"{p['name']} <{p['email']}>" if "name" in p else p["email"] for p in people if "email" in p]
        if names:
            extra.append((field, ", ".join(names)))
        if emails:
            extra.append((f"{field}-email", ", ".join(emails)))
    if "keywords" in t:
        extra.append(("Keywords", ",".join(_strings(t, "keywords"))))
    extra += [("Classifier", c) for c in _strings(t, "classifiers")]
    urls = t.get("urls", {})
    if not isinstance(urls, dict) or not all(isinstance(v, str) for v in urls.values()):
        raise WheelError("[project] urls must be a table of strings")
    extra += [("Project-URL", f"{label}, {url}") for label, url in urls.items()]
    out["extra"] = tuple(extra)
    return out


def _strings(t: dict[str, Any], key: str) -> list[str]:
    v = t.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise WheelError(f"[project] {key} must be a list of strings")
    return v


def _strings_or_tables(t: dict[str, Any], key: str) -> list[dict[str, str]]:
    v = t.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, dict) and x and set(x) <= {"name", "email"}
                                          and all(isinstance(s, str) for s in x.values()) for x in v):
        raise WheelError(f"[project] {key} must be a list of tables with a name and/or an email")
    return v


def _readme(value: Any, root: Path, read: list[Path]) -> tuple[str, str]:
    if isinstance(value, str):
        return _file_text(value, root, read, "readme"), README_TYPES.get(Path(value).suffix.lower(), "text/plain")
    if isinstance(value, dict) and isinstance(value.get("content-type"), str):
        if isinstance(value.get("text"), str):
            return value["text"], value["content-type"]
        return _file_text(value.get("file"), root, read, "readme"), value["content-type"]
    raise WheelError("[project] readme must be a file name or a table with file (or text) and content-type")


def _file_text(name: Any, root: Path, read: list[Path], key: str) -> str:
    if not isinstance(name, str) or not name:
        raise WheelError(f"[project] {key}: expected a file name, got {name!r:.60}")
    path = (root / name).resolve()
    if not path.is_relative_to(root.resolve()):
        raise WheelError(f"[project] {key} file {name!r} lies outside the project directory {root}")
    data = read_bounded(path, f"[project] {key} file", error=WheelError)  # a FIFO, a device: refused, not read
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise WheelError(f"[project] {key} file {path} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    read.append(path)
    return text
