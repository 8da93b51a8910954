"""Link CuTe host programs into a driver-only library: libNAME.so, libNAME.a and NAME.h.

    objects (CuTe export_to_c, one per program and arch) + shim.c (driver API over dlopen) + NAME_entry.c
      -- ld -r -->  one relocatable object  -- objcopy: only NAME_* stay global -->  .a and .so

Localizing everything else means two such libraries, shared or static, never clash in one program (each carries
its own ``_cudaLaunchKernelEx`` & co). Only the system C compiler and binutils are used. ``kernelpack.Library`` drives
it: :func:`link_object` for host programs beside kernels, :func:`stage_programs` for host programs alone;
:func:`build_host_library` is a thin wrapper over the latter.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ...bundle.host_program import HostProgram
from ...core import config
from ...core._reprs import clip_left
from ...core.names import entry_name
from ...core.toolchain import run_tool
from ..buildid import note_asm
from ..cdecl import TypeNames
from .entry import generate


@dataclass(frozen=True)
class HostLibrary:
    """Paths of a built host-program library."""

    name: str
    shared: Path
    static: Path
    header: Path
    object: Path  # the combined relocatable object (what the C library generator links in)
    exports: tuple[str, ...]

    def __repr__(self) -> str:
        return (f"<HostLibrary lib{self.name}.so/.a + {self.name}.h at {clip_left(str(self.shared.parent.parent), 120)}"
                f": {len(self.exports)} exports>")


def shim_source() -> str:
    return resources.files("kernelpack.clib.host").joinpath("shim.c").read_text()


def support_files() -> dict[str, str]:
    """The C sources every host-program build compiles beside the generated entry: the shim, the entries' fixed part
    (kp_host.c) and what they share with the C library's runtime (the launch model, driver types, error state)."""
    pkg = resources.files("kernelpack")
    out = {f: pkg.joinpath("csrc").joinpath(f).read_text() for f in ("kp_model.h", "kp_cuda.h", "kp_error.c")}
    out.update({f: pkg.joinpath("clib").joinpath("host").joinpath(f).read_text() for f in ("kp_host.c", "shim.c")})
    return out


def link_object(lib: str, programs: Sequence[HostProgram], workdir: Path, *, cc: str | None = None,
                ld: str = "ld", objcopy: str = "objcopy", names: TypeNames | None = None,
                library_header: str | None = None, build_id: str | None = None) -> tuple[Path, tuple[str, ...], str]:
    """Build ``workdir/lib<lib>_cute.o``: programs' objects + shim + entries, only ``<lib>_*`` global.

    Returns the object, the exported symbols and the header text. This is the hook for the C library generator:
    link the object into its own library and append the header. With ``library_header`` (the generator's NAME.h,
    which already declares the entries, with ``names`` its TypeNames) the entries report errors through the
    library's own last-error state and the header returned is only the declarations (see ``entry.generate``).
    ``build_id``: the library's build id, when the programs make the library alone (its ELF note is linked in; a
    kernel library's data object carries its own).
    """
    cc = cc or config.knobs().cc
    integrated = library_header is not None
    header, source = generate(lib, programs, names, integrated=integrated)
    (workdir / f"{lib}.h").write_text(library_header if library_header is not None else header)
    (workdir / f"{lib}_entry.c").write_text(source)
    for fname, text in support_files().items():
        (workdir / ("kp_cute_shim.c" if fname == "shim.c" else fname)).write_text(text)
    flags = ["-std=gnu11", "-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-Werror", f"-I{workdir}"]
    run_tool([cc, *flags, "-c", f"{lib}_entry.c", "-o", "entry.o"], f"compiling {lib}_entry.c", workdir)
    run_tool([cc, *flags, "-c", "kp_cute_shim.c", "-o", "shim.o"], "compiling the kernelpack CuTe shim", workdir)
    objs = []
    if build_id is not None:
        (workdir / f"{lib}_kp_build.s").write_text(note_asm(lib, build_id) +
                                                  '\t.section .note.GNU-stack, "", %progbits\n')
        run_tool([cc, "-c", f"{lib}_kp_build.s", "-o", "kp_build.o"], f"assembling the build id of {lib}", workdir)
        objs.append("kp_build.o")
    for prog in programs:
        for o in prog.objects:
            path = workdir / f"{o.prefix}.o"
            path.write_bytes(o.data)
            objs.append(path.name)
    combined = workdir / f"lib{lib}_cute.o"
    run_tool([ld, "-r", "-o", combined.name, "entry.o", "shim.o", *objs], "ld -r (combining objects)", workdir)
    exports = exported(lib, programs, integrated=integrated)
    keep = workdir / "exports.txt"
    keep.write_text("\n".join(exports) + "\n")
    run_tool([objcopy, f"--keep-global-symbols={keep.name}", combined.name], "objcopy (localizing symbols)", workdir)
    return combined, exports, header


def exported(lib: str, programs: Sequence[HostProgram], *, integrated: bool = False) -> tuple[str, ...]:
    """The symbols the programs' object exports: their entries and, alone (not ``integrated`` into a kernel
    library, which defines its own), the last-error API."""
    api = ["set_default_device"] if integrated else ["last_error", "last_cuda_error", "set_default_device",
                                                      "build_id", "check_build_id"]
    return tuple(sorted([entry_name(lib, p.symbol) for p in programs] + [f"{lib}_{n}" for n in api]))


@dataclass(frozen=True)
class Staged:
    """A library of host programs alone, built in a stage's work folder (see :func:`stage_programs`)."""

    shared: Path
    static: Path
    header: str
    cpp_header: str
    object: Path
    exports: tuple[str, ...]
    sources: tuple[Path, ...]  # NAME_entry.c and the C sources compiled beside it


def stage_programs(lib: str, programs: Sequence[HostProgram], work: Path, *, cc: str, ar: str, ld: str = "ld",
                   objcopy: str = "objcopy", build_id: str | None = None) -> Staged:
    """Link ``programs`` alone into ``work/lib<lib>.so`` and ``.a`` (what :class:`kernelpack.Library` builds from
    host programs without kernels): their entries, the shim and the last-error API; nothing else global.
    ``build_id``: the library's (its headers keep the slot for it, :func:`kernelpack.clib.buildid.stamp`)."""
    names = TypeNames(lib)  # one set of C type names for NAME.h and NAME.hpp
    combined, exports, header = link_object(lib, programs, work, cc=cc, ld=ld, objcopy=objcopy, names=names,
                                            build_id=build_id)
    run_tool([cc, "-shared", "-o", f"lib{lib}.so", combined.name, f"-Wl,-soname,lib{lib}.so", "-ldl", "-lpthread",
              "-Wl,-z,noexecstack", "-Wl,-z,defs", "-Wl,--no-undefined"], f"linking lib{lib}.so", work)
    run_tool([ar, "rcsD", f"lib{lib}.a", combined.name], f"archiving lib{lib}.a", work)
    from ..cppheader import host_cpp_header

    sources = tuple(work / f for f in (f"{lib}_entry.c", "kp_cute_shim.c", *support_files()) if f != "shim.c")
    return Staged(work / f"lib{lib}.so", work / f"lib{lib}.a", header, host_cpp_header(lib, programs, names),
                  combined, exports, sources)


def build_host_library(lib: str, programs: Sequence[HostProgram], out_dir: str | os.PathLike[str], *,
                       cc: str | None = None, ar: str | None = None) -> HostLibrary:
    """Build ``out_dir/lib/lib<lib>.so``, ``lib<lib>.a``, ``out_dir/include/<lib>.h`` (and what every kernelpack
    library has: ``<lib>.hpp``, a CMake package, a pkg-config file): ``kernelpack.Library(lib, *programs)``."""
    from ..build import Library

    built = Library(lib, *programs, cc=cc, ar=ar).build(out_dir)
    return HostLibrary(lib, built.shared, built.static, built.header, built.lib_dir / f"lib{lib}_cute.o",
                       exported(lib, programs))
