"""``kernelpack wheel``: a project's kernels as a Python wheel users ``pip install`` -- no DSL, no compiler, no JIT.

Wheel layout (``NAME-VERSION-cp310-abi3-manylinux_X_Y_<cpu>.whl``, tagged by :mod:`.platform`)::

    NAME/__init__.py           each kernel family a module attribute, loaded on first use (kernelpack.load)
    NAME/__init__.pyi          a typed signature per family with the docs of each specialization
    NAME/py.typed
    NAME/NAME.kpack            the bundle
    NAME/__main__.py           --with-library: python -m NAME --prefix | --cmake-dir | ...
    NAME/include/NAME.h, NAME.hpp, NAME/lib/libNAME.so, libNAME.a, lib/cmake/NAME/, lib/pkgconfig/NAME.pc
    NAME/_kernelpack/          the runtime it carries: kernelpack.load and the launch extension (abi3)
    NAME-VERSION.dist-info/METADATA, WHEEL, RECORD      (no requirement: the runtime is in the package)

The project is built as ``kernelpack build`` builds it (same output folder, same incremental state); the wheel is
assembled in memory from the published outputs and written through :mod:`kernelpack.core.publish` (a failed build
writes nothing). The same inputs give the same bytes (:mod:`.archive`). See docs/wheels.md.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..bundle.kpack import Bundle
from ..core.files import read_bounded
from ..core.publish import Stage, output_dir
from ..project.model import Project, load_project
from ..project.runner import BuildReport, Events, build
from .archive import sdist_bytes, wheel_bytes
from .meta import WheelError, WheelMeta, check_package_name
from .package import package_files, summary_lines
from .platform import SharedObject, check_platform, kernels_tag, read_shared_object, wheel_tag
from .project import wheel_meta
from .runtime import ABI3_PYTHON, carried_runtime

__all__ = ["WheelError", "WheelResult", "build_sdist", "build_split_wheels", "build_wheel", "check_platform",
           "preflight"]


@dataclass(frozen=True)
class WheelResult:
    path: Path
    tag: str
    size: int
    unchanged: bool  # the same bytes were there already (nothing written)
    report: BuildReport
    left_out: tuple[str, ...] = ()  # CuTe host programs a wheel without the C library cannot carry
    warnings: tuple[str, ...] = ()


def build_wheel(where: str | os.PathLike[str] | None = None, dist: str | os.PathLike[str] | None = None, *,
                with_library: bool = False, platform: str | None = None, jobs: int | None = None,
                force: bool = False, overwrite: bool = False, events: Events | None = None,
                exact_outputs: bool = False) -> WheelResult:
    """Build the project at ``where`` (as ``kernelpack build`` does) and write its wheel into ``dist`` (default:
    ``dist/`` beside the project file). ``with_library``: carry the C library for C++ consumers. ``platform``: the
    CPU of the machines that will load it (``x86_64``, ``aarch64``; default this machine's). ``overwrite``:
    replace a different wheel of the same name (else WheelError; the same bytes are left as they are).
    ``exact_outputs``: build only what the wheel carries (the bundle, and the library with ``with_library``) rather
    than the project's ``[library] outputs`` plus those."""
    static = load_project(where, import_includes=False, check_files=False)
    meta, _ = wheel_meta(static)  # bad names and versions fail here, before anything is compiled
    arch = check_platform(platform)
    need = ("bundle", "library") if with_library else ("bundle",)
    outputs = need if exact_outputs else tuple(dict.fromkeys((*static.library.outputs, *need)))
    dist_dir = Path(dist) if dist is not None else static.root / "dist"
    # the build's own output directory stays locked until its outputs are read: a build racing into it waits,
    # so the wheel never packs one build's bundle beside another's library
    with output_dir(dist_dir, "wheel directory") as d, output_dir(static.out, "output directory"):
        _check_target(d / meta.wheel_name(kernels_tag(arch, "cp{}{}-abi3".format(*ABI3_PYTHON))), overwrite)
        report = build(where, jobs=jobs, force=force, events=events, outputs=outputs)
        data, tag, notes, left_out = _contents(static, meta, report, with_library, arch)
        target = d / meta.wheel_name(tag)
        unchanged = _check_target(target, overwrite, data)
        if not unchanged:
            with Stage(d) as stage:
                stage.write(target.name, data)
    return WheelResult(target, tag, len(data), unchanged, report, left_out, notes)


def build_split_wheels(where: str | os.PathLike[str] | None = None, dist: str | os.PathLike[str] | None = None, *,
                       platform: str | None = None, jobs: int | None = None, force: bool = False,
                       overwrite: bool = False, events: Events | None = None) -> list[WheelResult]:
    """``kernelpack wheel --split arch`` (:mod:`.split`): the front wheel first, then one provider wheel per arch
    family, written into ``dist`` together (all or none)."""
    static = load_project(where, import_includes=False)
    meta, _ = wheel_meta(static)
    arch = check_platform(platform)
    outputs = tuple(dict.fromkeys((*static.library.outputs, "bundle")))
    dist_dir = Path(dist) if dist is not None else static.root / "dist"
    with output_dir(dist_dir, "wheel directory") as d, output_dir(static.out, "output directory"):
        report = build(where, jobs=jobs, force=force, events=events, outputs=outputs)
        made = _split_contents(static, meta, report, arch)
        same = [_check_target(d / fname, overwrite, data) for fname, data, _, _, _ in made]
        with Stage(d) as stage:
            for (fname, data, _, _, _), unchanged in zip(made, same):
                if not unchanged:
                    stage.write(fname, data)
    return [WheelResult(d / fname, tag, len(data), unchanged, report, left_out, notes)
            for (fname, data, tag, notes, left_out), unchanged in zip(made, same)]


def _split_contents(project: Project, meta: WheelMeta, report: BuildReport,
                    arch: str) -> list[tuple[str, bytes, str, tuple[str, ...], tuple[str, ...]]]:
    """(file name, bytes, tag, warnings, host programs left out) of the front wheel and of each provider."""
    bundle_path = Path(report.outputs["bundle"])
    bundle = Bundle.from_bytes(bundle_path.read_bytes(), source=str(bundle_path))
    left_out = tuple(r.kernel for r in report.rows if r.kernel not in {a.label for a in bundle})
    if not bundle.families():
        raise WheelError(f"{project.path}: no kernel to put into a wheel")
    return split_wheels(meta, bundle, arch, left_out)


def split_wheels(meta: WheelMeta, bundle: Bundle, arch: str,
                 left_out: tuple[str, ...] = ()) -> list[tuple[str, bytes, str, tuple[str, ...], tuple[str, ...]]]:
    """The front and provider wheels of ``bundle`` (file name, bytes, tag, warnings, left out) -- what
    ``--split arch`` writes; bench/wheel_sizes.py measures them for a bundle built elsewhere."""
    from ..runtime.module import KernelModule
    from . import split
    from .runtime import package_root

    name = meta.name
    with _quiet_fallback():
        mod = KernelModule(bundle, f"{name}.kpack")
    parts = split.split_bundle(bundle)
    gen = package_files(mod, name, meta.version, (f"{name}.kpack",), with_library=False)
    providers = {f: (int(f[2:-1]), split.carries_ptx(b)) for f, b in parts.items()}
    files = {f"{name}/__init__.py": split.front_init(gen, providers).encode(),
             f"{name}/__init__.pyi": gen.stub.encode(), f"{name}/py.typed": b"",
             **split.front_runtime_files(name, (package_root() / "argtypes.py").read_bytes(), gen.runtime)}
    front = split.front_meta(_described(meta, mod, bundle), list(parts))
    made: tuple[str, bytes, str, tuple[str, ...], tuple[str, ...]] = (
        front.wheel_name("py3-none-any"), wheel_bytes(front, "py3-none-any", files, purelib=True), "py3-none-any", (),
        left_out)
    out = [made]
    for family, part in parts.items():
        pkg = split.provider_name(name, family)
        carried = carried_runtime(pkg, arch)
        pfiles = {f"{pkg}/{name}.kpack": part.to_bytes(), f"{pkg}/py.typed": b"",
                  f"{pkg}/__init__.py": split.provider_init(name, family, meta.version, f"{name}.kpack",
                                                            "_kernelpack").encode(),
                  **{f"{pkg}/_kernelpack/{rel}": data for rel, data in carried.files.items()}}
        objects = [carried.extension] if carried.extension is not None else []
        tag, _ = wheel_tag(carried.python_tag, arch, objects)
        pmeta = split.provider_meta(meta, family, sorted({str(a) for art in part for a in art.archs}))
        out.append((pmeta.wheel_name(tag), wheel_bytes(pmeta, tag, pfiles, purelib=False), tag, carried.notes, ()))
    return out


def preflight(where: str | os.PathLike[str] | None = None, platform: str | None = None) -> WheelMeta:
    """What ``build_wheel`` checks before any work: the project file, its name and version, the platform
    (WheelError / KernelpackError naming what is wrong). The CLI calls it before drawing progress."""
    meta, _ = wheel_meta(load_project(where, import_includes=False, check_files=False))
    check_platform(platform)
    return meta


def _check_target(path: Path, overwrite: bool, data: bytes | None = None) -> bool:
    """Whether ``path`` already holds ``data``; WheelError when it holds something else (or is not a file)."""
    if not os.path.lexists(path):
        return False
    if path.is_symlink() or not path.is_file():
        raise WheelError(f"{path} exists and is not a regular file; remove it or choose another directory")
    if data is None:
        return False
    if path.stat().st_size == len(data) and path.read_bytes() == data:
        return True
    if not overwrite:
        raise WheelError(f"{path} exists with other contents; remove it, pass --overwrite, or give another -o")
    return False


def _contents(project: Project, meta: WheelMeta, report: BuildReport, with_library: bool,
              arch: str) -> tuple[bytes, str, tuple[str, ...], tuple[str, ...]]:
    """The wheel's bytes, its tag, warnings and the host programs left out."""
    from ..runtime.module import KernelModule, load

    name = meta.name
    bundle_path = Path(report.outputs["bundle"])
    bundle_data = bundle_path.read_bytes()
    bundle = Bundle.from_bytes(bundle_data, source=str(bundle_path))
    files: dict[str, bytes] = {f"{name}/{name}.kpack": bundle_data, f"{name}/py.typed": b""}
    notes: list[str] = []
    objects: list[SharedObject] = []
    left_out: tuple[str, ...] = ()
    hosts = [r.kernel for r in report.rows if r.kernel not in {a.label for a in bundle}]
    mod: KernelModule
    source: tuple[str, ...] = (f"{name}.kpack",)
    if with_library:
        lib = _library_files(project, report, name)
        files.update({f"{name}/{rel}": data for rel, data in lib.items()})
        so = read_shared_object(lib[f"lib/lib{name}.so"], f"lib/lib{name}.so")
        if so.arch != arch:
            raise WheelError(f"lib{name}.so is built for {so.arch}, the wheel for {arch}: set CC to a compiler for "
                             f"{arch} or pass --platform {so.arch}")
        objects.append(so)
        if so.foreign:
            notes.append(f"lib{name}.so needs {', '.join(so.foreign)} beyond glibc: tagged {so.tag}, which PyPI "
                            f"refuses (install it from the file)")
        if hosts:  # CuTe host programs live in the shared library: load from it
            source = ("lib", f"lib{name}.so")
        with _quiet_fallback():
            mod = load(project.out / "lib" / f"lib{name}.so") if hosts else KernelModule(bundle, str(bundle_path))
    else:
        left_out = tuple(hosts)
        with _quiet_fallback():
            mod = KernelModule(bundle, str(bundle_path))
    if not mod.__all__:
        raise WheelError(f"{project.path}: no kernel to put into a wheel"
                         + (" (its CuTe host programs need --with-library)" if left_out else ""))
    gen = package_files(mod, name, meta.version, source, with_library=with_library)
    files.update({f"{name}/__init__.py": gen.init.encode(), f"{name}/__init__.pyi": gen.stub.encode()})
    if gen.main is not None:
        files[f"{name}/__main__.py"] = gen.main.encode()
    carried = carried_runtime(name, arch)
    files.update({f"{name}/{gen.runtime}/{rel}": data for rel, data in carried.files.items()})
    notes += carried.notes
    if carried.extension is not None:
        objects.append(carried.extension)
    tag, _ = wheel_tag(carried.python_tag, arch, objects)
    meta = _described(meta, mod, bundle)
    return wheel_bytes(meta, tag, files, purelib=False), tag, tuple(notes), left_out


@contextmanager
def _quiet_fallback() -> Iterator[None]:
    """The module is made to read its signatures, never to launch: the launch extension's absence is no news."""
    from ..runtime import FallbackWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        yield


def _library_files(project: Project, report: BuildReport, name: str) -> dict[str, bytes]:
    """The C library's install tree (relative paths under the build's output folder): only this library's files
    (an output folder may hold several)."""
    out = project.out
    paths = {Path(p) for k, p in report.outputs.items() if k != "bundle"}
    paths |= {out / "lib" / f"lib{name}.so", out / "lib" / f"lib{name}.a", out / "include" / f"{name}.h",
              out / "include" / f"{name}.hpp", out / "lib" / "pkgconfig" / f"{name}.pc"}
    cmake = out / "lib" / "cmake" / name
    paths |= set(cmake.glob("*.cmake")) if cmake.is_dir() else set()
    files = {}
    for p in sorted(paths):
        try:
            rel = p.relative_to(out).as_posix()
        except ValueError:
            continue
        if not p.is_file():
            raise WheelError(f"the C library's {p} is missing after the build")
        files[rel] = p.read_bytes()
    return files


def _described(meta: WheelMeta, mod: Any, bundle: Bundle) -> WheelMeta:
    """A summary and a description when the project gives none: the kernels and their archs."""
    families = len(bundle.families())
    archs = sorted({str(a) for art in bundle for a in art.archs})
    summary = meta.summary or (f"GPU kernels ({families} kernel famil{'ies' if families != 1 else 'y'}; "
                               f"{', '.join(archs)}) packaged with kernelpack")
    if meta.description:
        return replace(meta, summary=summary)
    lines = summary_lines(mod, {a: getattr(mod, a) for a in mod.__all__})
    body = (f"# {meta.name}\n\n{summary}.\n\n```python\nimport {meta.name}\n\n# " +
            "\n# ".join(line.strip() for line in lines) + "\n```\n")
    return replace(meta, summary=summary, description=body)


# ------------------------------------------------------------------------------------------------ sdist


def sdist_files(where: str | os.PathLike[str] | None = None) -> tuple[WheelMeta, dict[str, bytes]]:
    """What an sdist carries: the project file and every file its build reads (sources, headers, the Python
    modules they import, ``depends``), the readme and license; files outside the project folder are not the
    project's and stay out."""
    from ..core.deps import python_deps
    from ..project.jobs import static_files

    static = load_project(where, import_includes=False, check_files=False)
    meta, read = wheel_meta(static)
    project = load_project(where, import_includes=True, check_files=False) if static.includes else static
    root = project.root.resolve()
    found: list[Path] = [project.path, *read]
    for inc in project.includes:
        found += python_deps(inc, [project.root])
    for e in project.entries:
        found += static_files(e, project.root)
    files: dict[str, bytes] = {}
    for p in found:
        rp = p.resolve()
        if not rp.is_relative_to(root) or not rp.is_file():
            continue
        rel = rp.relative_to(root).as_posix()
        out = project.out.resolve()
        if rp.is_relative_to(out):
            continue
        files[rel] = read_bounded(rp, "sdist file", error=WheelError)  # a 10 GiB sparse source: refused, not read
    return meta, files


def build_sdist(where: str | os.PathLike[str] | None, dist: str | os.PathLike[str]) -> Path:
    """``NAME-VERSION.tar.gz`` (PEP 625) of the project's sources with its PKG-INFO, written into ``dist``."""
    meta, files = sdist_files(where)
    files["PKG-INFO"] = meta.metadata().encode()
    data = sdist_bytes(meta.dist, files)
    with output_dir(Path(dist), "sdist directory") as d, Stage(d) as stage:
        stage.write(f"{meta.dist}.tar.gz", data)
    return Path(dist) / f"{meta.dist}.tar.gz"


def check_name(name: str) -> str:
    """``name`` as a wheel's package name (WheelError when it cannot be one)."""
    return check_package_name(name)
