"""Build a deployable library: libNAME.so, libNAME.a, NAME.h, NAME.hpp, a CMake package and a pkg-config file.

Install-tree layout under the output directory::

    include/NAME.h  include/NAME.hpp
    lib/libNAME.so  lib/libNAME.a
    lib/cmake/NAME/NAMEConfig.cmake  lib/cmake/NAME/NAMEConfigVersion.cmake
    lib/pkgconfig/NAME.pc

Only the system C compiler and ``ar`` are used (no nvcc, no CUDA headers). The tree is relocatable: the CMake and
pkg-config files locate everything relative to themselves.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import config
from ..artifact import KernelArtifact
from ..bundle import Bundle
from ..cache import CompileCache, cache_key
from ..cute_host.program import HostProgram
from ..errors import KernelpackError
from ..names import check_library_name, check_version, cmake_string, version_major
from ..publish import Stage, output_dir
from ..toolchain import run_tool
from .generate import Sources, generate

Item = KernelArtifact | Bundle | HostProgram | str | os.PathLike


@dataclass(frozen=True)
class BuildResult:
    """Paths of a built library (all under ``prefix``)."""

    name: str
    prefix: Path
    shared: Path
    static: Path
    header: Path
    cpp_header: Path
    cmake_config: Path
    pkgconfig: Path
    sources: Path | None  # directory with NAME.c, NAME_data.s and NAME.kpack when kept

    @property
    def include_dir(self) -> Path:
        return self.prefix / "include"

    @property
    def lib_dir(self) -> Path:
        return self.prefix / "lib"


def _load(item: KernelArtifact | Bundle | str | os.PathLike[str]) -> Bundle:
    if isinstance(item, (KernelArtifact, Bundle)):
        return Bundle.of(item)
    path = Path(item)
    if path.suffix in (".so", ".a") or ".so." in path.name:
        from .embedded import read_embedded_bundle

        return read_embedded_bundle(path)
    return Bundle.read(path)



def _run_all(steps: Sequence[tuple[Sequence[str], str]], cwd: Path) -> None:
    """Run independent commands at once; the first failure (in order) is raised with its log."""
    procs = []
    try:
        for cmd, what in steps:
            try:
                procs.append(subprocess.Popen(list(cmd), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                              text=True))
            except FileNotFoundError:
                raise KernelpackError(f"{what}: {cmd[0]!r} not found; install a C compiler or pass cc=/ar=") from None
    finally:
        logs = [proc.communicate()[0] for proc in procs]
    for proc, log, (cmd, what) in zip(procs, logs, steps):
        if proc.returncode != 0:
            raise KernelpackError(f"{what} failed (exit {proc.returncode}): {shlex.join(cmd)}", log=log)


class Library:
    """A C/C++ library of kernels: ``Library("mylib", artifact, bundle, "more.kpack", host_program).build("out")``.

    Items are kernel artifacts and bundles from any frontend, and CuTe host programs (``kernelpack.cute.export``):
    those are linked in with kernelpack's driver shim (``kernelpack.cute_host.link_object``) and their typed
    entries declared in NAME.h/NAME.hpp next to the kernels'. ``cc``/``ar`` default to ``$CC``/``$AR``, else
    ``cc``/``ar`` (``ld``/``objcopy`` for host programs). ``version`` goes into the CMake and pkg-config files.
    ``cflags`` are appended to the compile command.
    """

    def __init__(self, name: str, *items: Item, cc: str | None = None, ar: str | None = None,
                 cflags: Iterable[str] = (), version: str = "1.0.0", ld: str = "ld", objcopy: str = "objcopy") -> None:
        self.name = check_library_name(name)
        self.programs = tuple(i for i in items if isinstance(i, HostProgram))
        self.bundle = Bundle.of(*(_load(i) for i in items if not isinstance(i, HostProgram)))  # type: ignore[arg-type]
        self.ld, self.objcopy = ld, objcopy
        self.cc = cc or config.knobs().cc
        self.ar = ar or config.knobs().ar
        self.cflags = tuple(cflags)
        self.version = check_version(version, f"library {name}: version")

    def generate(self) -> Sources:
        return generate(self.name, self.bundle, self.programs)

    def write_sources(self, directory: str | os.PathLike[str]) -> Path:
        """Write NAME.c, NAME_data.s, NAME.kpack, NAME.h and NAME.hpp into ``directory`` (for inspection or custom
        builds: compile both source files there with ``-Wa,-I<directory>`` so ``.incbin`` finds NAME.kpack)."""
        return self._write_sources(Path(directory), self.generate())

    def _write_sources(self, d: Path, src: Sources) -> Path:
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{self.name}.c").write_text(src.tu)
        (d / f"{self.name}_data.s").write_text(src.data)
        (d / f"{self.name}.h").write_text(src.header)
        (d / f"{self.name}.hpp").write_text(src.cpp_header)
        (d / f"{self.name}.kpack").write_bytes(src.bundle)
        return d

    def compile_command(self) -> list[str]:
        """The command compiling NAME.c into NAME.o, run in the sources directory (relative paths: the object does
        not depend on where it was built, so it can be cached)."""
        # no unwind tables: nothing unwinds through this code (it calls no user code), and they cost ~150 B/kernel
        return [self.cc, "-std=c99", "-O2", "-fPIC", "-fvisibility=hidden", "-fno-asynchronous-unwind-tables",
                "-fno-unwind-tables", "-Wall", "-Wextra", "-I.", *self.cflags, "-c", f"{self.name}.c", "-o",
                f"{self.name}.o"]

    def assemble_command(self) -> list[str]:
        """The command assembling NAME_data.s (the embedded bundle and its tables) into NAME_data.o."""
        return [self.cc, "-c", "-Wa,-I.", f"{self.name}_data.s", "-o", f"{self.name}_data.o"]

    def build(self, out_dir: str | os.PathLike[str], *, keep_sources: bool = False,
              cache: CompileCache | None = None) -> BuildResult:
        """Generate, compile and install into ``out_dir``; returns the paths written. The compiled C object is
        reused from ``cache`` (default: the kernelpack compile cache) when its text, compiler and flags match, so a
        rebuild whose kernels changed only in their binaries just reassembles the data object and relinks.

        All outputs are published together (:mod:`kernelpack.publish`): a failed or interrupted build leaves the
        previous ones as they were, never new headers beside an old library."""
        src = self.generate()  # every name and string checked before the output directory is touched
        with output_dir(out_dir) as out, Stage(out) as stage:
            return self.stage(stage, keep_sources=keep_sources, cache=cache, sources=src)

    def stage(self, stage: Stage, *, keep_sources: bool = False, cache: CompileCache | None = None,
              sources: Sources | None = None) -> BuildResult:
        """Build into ``stage`` (published by its owner, with whatever else it holds); returns the final paths.
        ``sources``: what :meth:`generate` returned, when the caller generated them already."""
        out, name = stage.out, self.name
        t = stage.work / f"lib{name}"
        t.mkdir()
        src = sources if sources is not None else self.generate()
        self._write_sources(t, src)
        self._compile_c(t, src, CompileCache.default() if cache is None else cache)
        run_tool(self.assemble_command(), f"assembling the data of library {name}", t)
        objs = [t / f"{name}.o", t / f"{name}_data.o"]
        if self.programs:
            objs = [self._link_programs(t, objs, src)]
        _run_all([([self.cc, "-shared", "-o", str(t / f"lib{name}.so"), *map(str, objs),
                    f"-Wl,-soname,lib{name}.so", "-Wl,--no-undefined", "-Wl,-z,noexecstack", "-ldl"],
                   f"linking lib{name}.so"),
                  ([self.ar, "rcsD", str(t / f"lib{name}.a"), *map(str, objs)], f"archiving lib{name}.a")], t)
        for f, dest in [(f"{name}.h", "include"), (f"{name}.hpp", "include"), (f"lib{name}.so", "lib"),
                        (f"lib{name}.a", "lib")]:
            os.replace(t / f, stage.path(f"{dest}/{f}"))
        kept = None
        if keep_sources:
            kept = out / "share" / name / "src"
            for f in (f"{name}.c", f"{name}_data.s", f"{name}.kpack"):
                os.replace(t / f, stage.path(f"share/{name}/src/{f}"))
        cmake = f"lib/cmake/{name}"
        stage.write(f"{cmake}/{name}Config.cmake", cmake_config(name, len(self.bundle)))
        stage.write(f"{cmake}/{name}ConfigVersion.cmake", cmake_version(self.version))
        stage.write(f"lib/pkgconfig/{name}.pc", pkgconfig(name, self.version, len(self.bundle)))
        return BuildResult(name, out, out / "lib" / f"lib{name}.so", out / "lib" / f"lib{name}.a",
                           out / "include" / f"{name}.h", out / "include" / f"{name}.hpp",
                           out / cmake / f"{name}Config.cmake", out / "lib" / "pkgconfig" / f"{name}.pc", kept)

    def _compile_c(self, t: Path, src: Sources, cache: CompileCache) -> None:
        """NAME.o in ``t``: from the cache when the same text was compiled by the same compiler with the same flags."""
        cmd = self.compile_command()
        obj = t / f"{self.name}.o"
        key = cache_key(kind="clib-object", tu=hashlib.sha256(src.tu.encode()).hexdigest(),
                        header=hashlib.sha256(src.header.encode()).hexdigest(), cmd=cmd,
                        compiler=_compiler_identity(self.cc))
        hit = cache.get(key)
        if hit is not None:
            obj.write_bytes(hit.data)
            return
        run_tool(cmd, f"compiling library {self.name}", t)
        cache.put(key, {"kind": "clib-object", "library": self.name}, obj.read_bytes())

    def _link_programs(self, t: Path, objs: list[Path], src: Sources) -> Path:
        """The library object plus the CuTe host programs' (entries, shim, CuTe objects) as one object."""
        from ..cute_host.build import link_object

        work = t / "cute"
        work.mkdir()
        cute_obj, _, _ = link_object(self.name, self.programs, work, cc=self.cc, ld=self.ld, objcopy=self.objcopy,
                                     names=src.type_names, library_header=src.header)
        combined = t / f"{self.name}_all.o"
        run_tool([self.ld, "-r", "-o", str(combined), *map(str, objs), str(cute_obj)],
                 "ld -r (kernels + host programs)", t)
        return combined


@functools.lru_cache(maxsize=8)
def _compiler_identity(cc: str) -> str:
    """What identifies the C compiler in the object cache: its resolved path, size, mtime and version text."""
    path = shutil.which(cc) or cc
    try:
        st = os.stat(os.path.realpath(path))
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return path  # not runnable: the compile step reports it
    return f"{os.path.realpath(path)} {st.st_size} {st.st_mtime_ns} {version}"


def build_library(name: str, inputs: Iterable[Item], out_dir: str | os.PathLike[str], **opts: object) -> BuildResult:
    """Build library ``name`` from artifacts, bundles or .kpack paths into ``out_dir`` (the CLI's ``build``)."""
    keep = bool(opts.pop("keep_sources", False))
    return Library(name, *inputs, **opts).build(out_dir, keep_sources=keep)  # type: ignore[arg-type]


def cmake_config(name: str, kernels: int) -> str:
    return f"""# Generated by kernelpack: CMake package for library {name} ({kernels} kernel specializations).
# Imported targets: {name}::{name} (shared library) and {name}::{name}_static (static archive; links libdl).
get_filename_component(_kp_{name}_prefix "${{CMAKE_CURRENT_LIST_DIR}}/../../.." ABSOLUTE)
if(NOT TARGET {name}::{name})
  add_library({name}::{name} SHARED IMPORTED)
  set_target_properties({name}::{name} PROPERTIES
    IMPORTED_LOCATION "${{_kp_{name}_prefix}}/lib/lib{name}.so"
    IMPORTED_SONAME "lib{name}.so"
    INTERFACE_INCLUDE_DIRECTORIES "${{_kp_{name}_prefix}}/include")
endif()
if(NOT TARGET {name}::{name}_static)
  add_library({name}::{name}_static STATIC IMPORTED)
  set_target_properties({name}::{name}_static PROPERTIES
    IMPORTED_LOCATION "${{_kp_{name}_prefix}}/lib/lib{name}.a"
    INTERFACE_INCLUDE_DIRECTORIES "${{_kp_{name}_prefix}}/include"
    INTERFACE_LINK_LIBRARIES "${{CMAKE_DL_LIBS}}")
endif()
set({name}_INCLUDE_DIRS "${{_kp_{name}_prefix}}/include")
set({name}_LIBRARIES {name}::{name})
unset(_kp_{name}_prefix)
"""


def cmake_version(version: str) -> str:
    version = check_version(version)  # a PEP 440 version: nothing CMake could read as code, quoted all the same
    return f"""# Generated by kernelpack: compatible when the major version matches and the version is not older.
set(PACKAGE_VERSION {cmake_string(version)})
if(PACKAGE_FIND_VERSION_MAJOR STREQUAL "" OR (PACKAGE_FIND_VERSION_MAJOR EQUAL {cmake_string(version_major(version))}
   AND NOT PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION))
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
else()
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
endif()
"""


def pkgconfig(name: str, version: str, kernels: int) -> str:
    version = check_version(version)  # pkg-config expands ${...} and stops at #: a checked version holds neither
    return f"""prefix=${{pcfiledir}}/../..
includedir=${{prefix}}/include
libdir=${{prefix}}/lib

Name: {name}
Description: kernelpack GPU kernel library {name} ({kernels} kernel specializations; needs only the NVIDIA driver)
Version: {version}
Cflags: -I${{includedir}}
Libs: -L${{libdir}} -l{name}
Libs.private: -ldl
"""
