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

import dataclasses
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..bundle.artifact import KernelArtifact
from ..bundle.host_program import HostProgram
from ..bundle.kpack import Bundle
from ..bundle.merge import merge_programs, origin
from ..core import config
from ..core._reprs import clip, clip_left, listing
from ..core.cache import CompileCache, cache_key
from ..core.errors import KernelpackError
from ..core.names import check_library_name, check_version, cmake_string, version_major
from ..core.publish import Stage, output_dir
from ..core.toolchain import run_tool
from .buildid import build_id, cmake_check, note_asm, offset_in, stamp, stamp_text
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
    build_id: str = ""  # what every output carries (kernelpack.clib.buildid)

    def __repr__(self) -> str:
        kept = ", sources kept" if self.sources else ""
        return (f"<BuildResult lib{self.name}.so/.a + {self.name}.h/.hpp, CMake, pkg-config at "
                f"{clip_left(str(self.prefix), 120)}{kept}>")

    @property
    def include_dir(self) -> Path:
        return self.prefix / "include"

    @property
    def lib_dir(self) -> Path:
        return self.prefix / "lib"


def _read(item: str | os.PathLike[str]) -> Bundle:
    path = Path(item)
    if path.suffix in (".so", ".a") or ".so." in path.name:
        from ..bundle.embedded import read_embedded_bundle

        return read_embedded_bundle(path)
    return Bundle.read(path)


def _sorted_items(name: str, items: Sequence[object]) -> tuple[list[Bundle], list[HostProgram]]:
    """The kernels (as bundles, each knowing where it came from) and the host programs among ``items``."""
    bundles: list[Bundle] = []
    programs: list[tuple[HostProgram, str]] = []
    for i, item in enumerate(items, 1):
        where = f"item {i}"
        for x in item if isinstance(item, (list, tuple)) else (item,):
            if isinstance(x, HostProgram):
                programs.append((x, origin(x) or where))
            elif isinstance(x, KernelArtifact):
                bundles.append(Bundle((x,), source=where))
            elif isinstance(x, Bundle):
                bundles.append(x if x.source else Bundle(x.artifacts, source=where))
            elif isinstance(x, (str, os.PathLike)):
                bundles.append(_read(x))
            else:
                raise KernelpackError(f"library {name}: {where} is {type(x).__name__} {clip(repr(x), 60)}; expected "
                                      f"a KernelArtifact, a Bundle, a .kpack or kernelpack library path, or a CuTe "
                                      f"HostProgram (kernelpack.cute.export)")
    return bundles, merge_programs(programs)


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
    """A C/C++ library: ``Library("mylib", artifact, bundle, "more.kpack", host_program).build("out")``.

    Items are any mix of kernel artifacts and bundles from any frontend, ``.kpack`` files and kernelpack-built
    libraries (their embedded kernels), CuTe host programs (``kernelpack.cute.export``), and lists of those. Kernels
    with the same name and variant built for different archs are merged into one (``Bundle.of``; host programs
    likewise). Host programs are linked in with kernelpack's driver shim (``kernelpack.clib.host``) and their typed
    entries declared in NAME.h/NAME.hpp next to the kernels'; host programs alone make a library of their entries
    and the last-error API (what ``kernelpack.clib.host.build_host_library`` builds). ``cc``/``ar`` default to
    ``$CC``/``$AR``, else ``cc``/``ar`` (``ld``/``objcopy`` for host programs). ``version`` goes into the CMake and
    pkg-config files. ``cflags`` are appended to the command compiling the kernels' C translation unit.
    """

    def __init__(self, name: str, *items: Item | Sequence[Item], cc: str | None = None, ar: str | None = None,
                 cflags: Iterable[str] = (), version: str = "1.0.0", ld: str = "ld", objcopy: str = "objcopy") -> None:
        self.name = check_library_name(name)
        bundles, programs = _sorted_items(name, items)
        self.programs = tuple(programs)
        self.bundle = Bundle.of(*bundles)
        self.ld, self.objcopy = ld, objcopy
        self.cc = cc or config.knobs().cc
        self.ar = ar or config.knobs().ar
        self.cflags = tuple(cflags)
        self.version = check_version(version, f"library {name}: version")

    def __repr__(self) -> str:
        parts = [f"{len(self.bundle)} kernel{'s' * (len(self.bundle) != 1)} "
                 f"({listing((a.label for a in self.bundle), 80)})"] if self.bundle.artifacts else []
        parts += [f"{len(self.programs)} host program{'s' * (len(self.programs) != 1)} "
                  f"({listing((p.label for p in self.programs), 60)})"] if self.programs else []
        return f"<Library {self.name}: {', '.join(parts) or 'empty'}, version {clip(self.version, 32)}>"

    @property
    def host_only(self) -> bool:
        """Whether the library holds CuTe host programs and no kernels (built by ``cute_host.build``)."""
        return bool(self.programs) and not self.bundle.artifacts

    def generate(self) -> Sources:
        """The sources of a library holding kernels (a library of host programs alone has no NAME.c)."""
        if not self.bundle.artifacts and not self.programs:
            raise KernelpackError(f"library {self.name}: nothing to build: give it kernel artifacts, bundles, .kpack "
                                  f"files or CuTe host programs")
        if self.host_only:
            raise KernelpackError(f"library {self.name}: holds CuTe host programs only, which are linked from their "
                                  f"objects: there is no NAME.c to generate (build() builds it)")
        return generate(self.name, self.bundle, self.programs)

    def _sources(self, cache: CompileCache, data: bytes | None = None) -> Sources:
        """:meth:`generate` through the text memo in ``cache`` (clib/memo.py: the same sources, less work when only
        the kernels' binaries changed since the last build of this structure). ``data``: the bundle's bytes."""
        if not self.bundle.artifacts and not self.programs or self.host_only:
            return self.generate()  # its errors
        return generate(self.name, self.bundle, self.programs, data=data, memo=cache)

    def write_sources(self, directory: str | os.PathLike[str]) -> Path:
        """Write NAME.c, NAME_data.s, NAME.kpack, NAME.h and NAME.hpp into ``directory`` (for inspection or custom
        builds: compile both source files there with ``-Wa,-I<directory>`` so ``.incbin`` finds NAME.kpack)."""
        src = self.generate()
        return self._write_sources(Path(directory), _stamped(src, self.build_id(src.bundle)))

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
        rebuild whose kernels changed only in their binaries just reassembles the data object and relinks; the
        generated texts likewise (clib/memo.py: only the changed binaries' cubins are read).

        All outputs are published together (:mod:`kernelpack.core.publish`): a failed or interrupted build leaves the
        previous ones as they were, never new headers beside an old library."""
        # every name and string checked before the output directory is touched
        cache = CompileCache.default() if cache is None else cache
        src = None if self.host_only else self._sources(cache)
        if src is None:
            from .host.entry import generate as generate_entries

            generate_entries(self.name, self.programs)
        with output_dir(out_dir) as out, Stage(out) as stage:
            return self.stage(stage, keep_sources=keep_sources, cache=cache, sources=src)

    def stage(self, stage: Stage, *, keep_sources: bool = False, cache: CompileCache | None = None,
              sources: Sources | None = None, data: bytes | None = None) -> BuildResult:
        """Build into ``stage`` (published by its owner, with whatever else it holds); returns the final paths.
        ``sources``: what :meth:`generate` returned, when the caller generated them already; ``data``: the bytes
        of the library's bundle (``self.bundle.to_bytes()``), when the caller has them."""
        out, name = stage.out, self.name
        t = stage.work / f"lib{name}"
        t.mkdir()
        if self.host_only:
            return self._stage_programs(stage, t, keep_sources)
        cache = CompileCache.default() if cache is None else cache
        src = sources if sources is not None else self._sources(cache, data)
        ident = self.build_id(src.bundle)
        final = _stamped(src, ident)
        # NAME.c is compiled with the header that has no id (the object does not use it, and is cached by that text)
        self._write_sources(t, dataclasses.replace(final, header=src.header))
        self._compile_c(t, src, cache)
        run_tool(self.assemble_command(), f"assembling the data of library {name}", t)
        # the data object first: its ELF note (the build id) lies near the start of the archive too
        objs = [t / f"{name}_data.o", t / f"{name}.o"]
        if self.programs:
            objs = [self._link_programs(t, objs, src)]
        _run_all([([self.cc, "-shared", "-o", str(t / f"lib{name}.so"), *map(str, objs),
                    f"-Wl,-soname,lib{name}.so", "-Wl,--no-undefined", "-Wl,-z,noexecstack", "-ldl"],
                   f"linking lib{name}.so"),
                  ([self.ar, "rcsD", str(t / f"lib{name}.a"), *map(str, objs)], f"archiving lib{name}.a")], t)
        stage.write(f"include/{name}.h", final.header)
        for f, dest in [(f"{name}.hpp", "include"), (f"lib{name}.so", "lib"), (f"lib{name}.a", "lib")]:
            os.replace(t / f, stage.path(f"{dest}/{f}"))
        kept = None
        if keep_sources:
            kept = out / "share" / name / "src"
            for f in (f"{name}.c", f"{name}_data.s", f"{name}.kpack"):
                os.replace(t / f, stage.path(f"share/{name}/src/{f}"))
        return self._finish(stage, kept, ident, final.header)

    def build_id(self, bundle: bytes | None) -> str:
        """The id every output of this library's build carries (:mod:`kernelpack.clib.buildid`); ``bundle``: the
        bytes of its bundle (None for host programs alone)."""
        return build_id(self.name, bundle=bundle, programs=self.programs, version=self.version, cflags=self.cflags,
                        cc=self.cc)

    def _stage_programs(self, stage: Stage, t: Path, keep_sources: bool) -> BuildResult:
        """Host programs alone: their entries, the shim and the last-error API, linked from their objects."""
        from .host.build import stage_programs

        name = self.name
        ident = self.build_id(None)
        built = stage_programs(name, self.programs, t, cc=self.cc, ar=self.ar, ld=self.ld, objcopy=self.objcopy,
                               build_id=ident)
        for f, dest in [(built.shared, "lib"), (built.static, "lib"), (built.object, "lib")]:
            os.replace(f, stage.path(f"{dest}/{f.name}"))
        header = stamp(built.header, ident, f"{name}.h")
        stage.write(f"include/{name}.h", header)
        stage.write(f"include/{name}.hpp", stamp(built.cpp_header, ident, f"{name}.hpp"))
        kept = None
        if keep_sources:
            kept = stage.out / "share" / name / "src"
            for f in built.sources:
                os.replace(f, stage.path(f"share/{name}/src/{f.name}"))
        return self._finish(stage, kept, ident, header)

    def _finish(self, stage: Stage, kept: Path | None, ident: str, header: str) -> BuildResult:
        """The CMake and pkg-config files, and the paths of everything built. ``ident``: the build id; ``header``:
        the text of NAME.h."""
        out, name = stage.out, self.name
        what = _contents(len(self.bundle), len(self.programs))
        cmake = f"lib/cmake/{name}"
        version, pc = cmake_version(self.version, ident, name), pkgconfig(name, self.version, what, ident)
        stage.write(f"{cmake}/{name}ConfigVersion.cmake", version)
        stage.write(f"lib/pkgconfig/{name}.pc", pc)
        texts = {f"include/{name}.h": header, f"{cmake}/{name}ConfigVersion.cmake": version,
                 f"lib/pkgconfig/{name}.pc": pc}
        where = [(rel, texts[rel].encode().index(stamp_text(name, ident).encode()) if rel in texts
                  else offset_in(stage.staged(out / rel), name, ident))
                 for rel in (f"include/{name}.h", f"include/{name}.hpp", f"lib/lib{name}.so", f"lib/lib{name}.a",
                             f"{cmake}/{name}ConfigVersion.cmake", f"lib/pkgconfig/{name}.pc")]
        stage.write(f"{cmake}/{name}Config.cmake",
                    cmake_config(name, what, cmake_check(name, ident, self.version, where), ident))
        return BuildResult(name, out, out / "lib" / f"lib{name}.so", out / "lib" / f"lib{name}.a",
                           out / "include" / f"{name}.h", out / "include" / f"{name}.hpp",
                           out / cmake / f"{name}Config.cmake", out / "lib" / "pkgconfig" / f"{name}.pc", kept, ident)

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
        from .host.build import link_object

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


def _stamped(src: Sources, ident: str) -> Sources:
    """``src`` as this build publishes it: the headers holding build id ``ident``, the data object its ELF note."""
    return dataclasses.replace(src, header=stamp(src.header, ident, f"{src.name}.h"),
                               cpp_header=stamp(src.cpp_header, ident, f"{src.name}.hpp"),
                               data=note_asm(src.name, ident) + src.data)


def build_library(name: str, inputs: Iterable[Item], out_dir: str | os.PathLike[str], **opts: object) -> BuildResult:
    """Build library ``name`` from artifacts, bundles or .kpack paths into ``out_dir`` (the CLI's ``build``)."""
    keep = bool(opts.pop("keep_sources", False))
    return Library(name, *inputs, **opts).build(out_dir, keep_sources=keep)  # type: ignore[arg-type]


def _contents(kernels: int, programs: int) -> str:
    """What a library holds, for the CMake and pkg-config files: ``6 kernel specializations, 2 CuTe host
    programs``."""
    parts = [f"{kernels} kernel specialization{'s' * (kernels != 1)}"] if kernels or not programs else []
    parts += [f"{programs} CuTe host program{'s' * (programs != 1)}"] if programs else []
    return ", ".join(parts)


def cmake_config(name: str, contents: int | str, check: str = "", ident: str = "") -> str:
    """``contents``: what the library holds (a number is of kernel specializations); ``check``: the build-id check
    (:func:`kernelpack.clib.buildid.cmake_check`); ``ident``: the build id, which the targets hand to the compiler
    (NAME.h stops the compile if it is of another build)."""
    what = _contents(contents, 0) if isinstance(contents, int) else contents
    expect = (f'\n    INTERFACE_COMPILE_DEFINITIONS "{name.upper()}_KP_EXPECT_BUILD_ID64=0x{ident[:16]}ULL"'
              if ident else "")
    return f"""# Generated by kernelpack: CMake package for library {name} ({what}).
# Imported targets: {name}::{name} (shared library) and {name}::{name}_static (static archive; links libdl).
get_filename_component(_kp_{name}_prefix "${{CMAKE_CURRENT_LIST_DIR}}/../../.." ABSOLUTE)
{check}if(NOT TARGET {name}::{name})
  add_library({name}::{name} SHARED IMPORTED)
  set_target_properties({name}::{name} PROPERTIES
    IMPORTED_LOCATION "${{_kp_{name}_prefix}}/lib/lib{name}.so"
    IMPORTED_SONAME "lib{name}.so"
    INTERFACE_INCLUDE_DIRECTORIES "${{_kp_{name}_prefix}}/include"{expect})
endif()
if(NOT TARGET {name}::{name}_static)
  add_library({name}::{name}_static STATIC IMPORTED)
  set_target_properties({name}::{name}_static PROPERTIES
    IMPORTED_LOCATION "${{_kp_{name}_prefix}}/lib/lib{name}.a"
    INTERFACE_INCLUDE_DIRECTORIES "${{_kp_{name}_prefix}}/include"
    INTERFACE_LINK_LIBRARIES "${{CMAKE_DL_LIBS}}"{expect})
endif()
set({name}_INCLUDE_DIRS "${{_kp_{name}_prefix}}/include")
set({name}_LIBRARIES {name}::{name})
unset(_kp_{name}_prefix)
"""


def cmake_version(version: str, ident: str = "", name: str = "") -> str:
    """``ident``: the build id of library ``name`` (a comment line, read by NAMEConfig.cmake)."""
    version = check_version(version)  # a PEP 440 version: nothing CMake could read as code, quoted all the same
    stamp_line = f"# {stamp_text(name, ident)}\n" if ident else ""
    return f"""# Generated by kernelpack: compatible when the major version matches and the version is not older.
{stamp_line}set(PACKAGE_VERSION {cmake_string(version)})
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


def pkgconfig(name: str, version: str, contents: int | str, ident: str = "") -> str:
    """``contents``: what the library holds (a number is of kernel specializations); ``ident``: the build id
    (variable ``kernelpack_build_id``)."""
    version = check_version(version)  # pkg-config expands ${...} and stops at #: a checked version holds neither
    what = _contents(contents, 0) if isinstance(contents, int) else contents
    stamp_lines = f"# {stamp_text(name, ident)}\nkernelpack_build_id={ident}\n" if ident else ""
    return f"""{stamp_lines}prefix=${{pcfiledir}}/../..
includedir=${{prefix}}/include
libdir=${{prefix}}/lib

Name: {name}
Description: kernelpack GPU kernel library {name} ({what}; needs only the NVIDIA driver)
Version: {version}
Cflags: -I${{includedir}}
Libs: -L${{libdir}} -l{name}
Libs.private: -ldl
"""
