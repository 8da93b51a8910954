"""A reader during a publish (issue 25 item 5): a build replaces its outputs one rename at a time, so a reader can get
files of two builds. Every output carries the build id (kernelpack.clib.buildid) and the readers that read several
files refuse a mix, naming both builds: the generated CMake package at configure time, the header/library pair at
run time (NAME_check_build), NAME.hpp beside another build's NAME.h at compile time, and a module loaded from a
library when the library dlopen gives is not the build whose bytes it read. GPU-less; needs a CUDA C++ compiler."""

from __future__ import annotations

import itertools
import os
import random
import re
import subprocess
import threading
from pathlib import Path

import pytest

from kernelpack.bundle.embedded import read_embedded
from kernelpack.core import config, publish
from kernelpack.core.errors import BundleError
from kernelpack.core.publish import Stage, output_dir
from kernelpack.frontends.cuda.toolkit import find_nvcc, nvrtc_available
from kernelpack.runtime.host import SharedLibrary
from toolchain_support import CC, CXX, needs_tools

pytestmark = pytest.mark.skipif(not nvrtc_available() and find_nvcc() is None, reason="no CUDA C++ compiler")

KERNEL = """
extern "C" __global__ void axpy(float a, const float* x, float* y, {n_type} n) {{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}}
"""
SETS = {"A": "int", "B": "long long"}
TOML = '[library]\nname = "race"\narchs = ["sm_90a"]\n[[cuda]]\nsource = "k.cu"\nkernels = ["axpy"]\n'
H, HPP, SO, A_, PC = "include/race.h", "include/race.hpp", "lib/librace.so", "lib/librace.a", "lib/pkgconfig/race.pc"
CONFIG, VERSION = "lib/cmake/race/raceConfig.cmake", "lib/cmake/race/raceConfigVersion.cmake"
CMAKE_READS = (CONFIG, VERSION, H, HPP, SO, A_, PC)  # what find_package(race) and the package read
STUBS = "macro(add_library)\nendmacro()\nmacro(set_target_properties)\nendmacro()\ninclude(\"${CONFIG}\")\n"


class Builds:
    """Two complete output sets of one project (the kernel's signature differs), as `kernelpack build` published
    them: file -> bytes per set, and each set's build id."""

    def __init__(self, root: Path) -> None:
        from kernelpack.project import build

        proj = root / "proj"
        proj.mkdir()
        (proj / "kernelpack.toml").write_text(TOML)
        self.files: dict[str, dict[str, bytes]] = {}
        with config.override(cache_dir=root / "cache"):
            for which, n_type in SETS.items():
                (proj / "k.cu").write_text(KERNEL.format(n_type=n_type))
                build(proj, jobs=1)
                out = proj / "build"
                self.files[which] = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()
                                     and (p.parts[-2] != ".kernelpack-build" or p.name == "state.json")}
        assert self.files["A"].keys() == self.files["B"].keys()
        self.order = sorted(self.files["A"])  # the order a publish renames them in (Stage.files)
        self.ids = {w: re.search(rb'#define RACE_KP_BUILD_ID "([0-9a-f]{64})"', f[H]).group(1).decode()  # type: ignore
                    for w, f in self.files.items()}
        assert self.ids["A"] != self.ids["B"]
        self.root = root
        self._cmake: dict[tuple[str, ...], tuple[bool, str]] = {}
        self._pair: dict[tuple[str, str], str] = {}

    def which(self, rel: str, data: bytes) -> str:
        """The set ``data`` (a file's bytes as read) belongs to: every file a reader gets is whole."""
        found = [w for w, f in self.files.items() if f[rel] == data]
        assert found, f"{rel}: a torn or foreign file ({len(data)} bytes)"
        return found[0]

    def prefix(self, pattern: dict[str, str], name: str) -> Path:
        """A prefix holding each file of the set ``pattern`` names for it (the others of set A)."""
        d = self.root / name
        for rel in self.order:
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_bytes(self.files[pattern.get(rel, "A")][rel])
        return d

    def cmake(self, pattern: tuple[str, ...]) -> tuple[bool, str]:
        """(configured, message) of the package whose CMAKE_READS come from the sets in ``pattern``: every pattern
        is judged by one ``cmake -P`` run the first time one is asked for (the package file included from each
        prefix in turn; its ``message(FATAL_ERROR)`` recorded rather than ending the run)."""
        if not self._cmake:
            patterns = list(itertools.product("AB", repeat=len(CMAKE_READS)))
            dirs = [self.prefix(dict(zip(CMAKE_READS, p)), "cmake-" + "".join(p)) for p in patterns]
            script = self.root / "all.cmake"
            script.write_text(ALL_PATTERNS)
            r = subprocess.run(["cmake", f"-DDIRS={';'.join(map(str, dirs))}", "-P", str(script)], capture_output=True,
                               text=True)
            assert r.returncode == 0, r.stdout + r.stderr
            for p, d in zip(patterns, dirs):
                refusal = (d / "verdict.txt").read_text()
                self._cmake[p] = (refusal == "", refusal)
        return self._cmake[pattern]

    def pair(self, header: str, library: str) -> str:
        """What race_check_build() says in a program compiled with set ``header``'s race.h and run with set
        ``library``'s librace.so."""
        if (header, library) not in self._pair:
            src = self.root / "main.c"
            src.write_text(CHECK_MAIN)
            inc = self.prefix({H: header}, f"pair-h{header}")
            exe = self.root / f"main-{header}"
            if not exe.exists():
                subprocess.run([CC, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{inc / 'include'}",
                                str(src), "-o", str(exe), f"-L{inc / 'lib'}", "-lrace"], check=True)
            lib = self.prefix({SO: library}, f"pair-l{library}") / "lib"
            r = subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                               env={**os.environ, "LD_LIBRARY_PATH": str(lib)})
            self._pair[(header, library)] = r.stdout.strip()
        return self._pair[(header, library)]


ALL_PATTERNS = """macro(add_library)
endmacro()
macro(set_target_properties)
endmacro()
function(message mode)
  if(mode STREQUAL "FATAL_ERROR")
    set(_refusal "${ARGN}" PARENT_SCOPE)
  else()
    _message(${mode} ${ARGN})
  endif()
endfunction()
function(check_one dir)
  set(_refusal "")
  include("${dir}/lib/cmake/race/raceConfig.cmake")
  file(WRITE "${dir}/verdict.txt" "${_refusal}")
endfunction()
foreach(d IN LISTS DIRS)
  check_one("${d}")
endforeach()
"""

CHECK_MAIN = r"""
#include <stdio.h>
#include "race.h"
int main(void) {
    kp_status s = race_check_build();
    printf("%s %s\n", race_status_name(s), s == KP_SUCCESS ? race_build_id() : race_last_error());
    return 0;
}
"""


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    return Builds(tmp_path_factory.mktemp("race"))


def test_every_output_carries_the_build_id(builds: Builds) -> None:
    for which, files in builds.files.items():
        ident = builds.ids[which]
        stamp = f"kernelpack-build-id:race:{ident}".encode()
        for rel in (H, HPP, SO, A_, CONFIG, VERSION, PC):
            assert stamp in files[rel], rel
        for rel in (SO, A_):
            assert dict(read_embedded(rel, data=files[rel]).build_ids) == {"race": ident}
    assert builds.ids["A"] != builds.ids["B"]


@needs_tools("cmake")
def test_the_cmake_package_refuses_every_mix_of_two_builds(builds: Builds) -> None:
    """All 2^7 ways of taking each file find_package(race) reads from build A or B: a package of one build configures,
    every mix stops naming both builds and telling the user to run CMake again."""
    refused = 0
    for pattern in itertools.product("AB", repeat=len(CMAKE_READS)):
        ok, out = builds.cmake(pattern)
        if len(set(pattern)) == 1:
            assert ok, out
            continue
        assert not ok, (pattern, out)
        text = " ".join(out.split())
        own = builds.ids[pattern[0]]  # raceConfig.cmake's build
        other = builds.ids["B" if pattern[0] == "A" else "A"]
        assert "kernelpack library race at" in text and "mixes two builds" in text, out
        assert f"is of build {own}" in text and f"build {other}" in text, out
        assert "run CMake again once it has finished" in text, out
        for rel, which in zip(CMAKE_READS[1:], pattern[1:]):
            assert (f"{rel}: build {other}" in text) == (which != pattern[0]), (rel, pattern, out)
        refused += 1
    assert refused == 2 ** len(CMAKE_READS) - 2


@needs_tools("cmake")
def test_the_cmake_package_stops_the_configure(builds: Builds) -> None:
    """What the run above records: the real ``cmake -P`` of a mixed package ends in FATAL_ERROR."""
    d = builds.prefix({SO: "B"}, "fatal")
    (d / "check.cmake").write_text(STUBS)
    r = subprocess.run(["cmake", f"-DCONFIG={d / CONFIG}", "-P", str(d / "check.cmake")], capture_output=True,
                       text=True)
    assert r.returncode != 0 and "CMake Error" in r.stderr
    assert f"lib/librace.so: build {builds.ids['B']}" in " ".join(r.stderr.split()), r.stderr


@needs_tools("cmake")
def test_the_cmake_package_refuses_a_version_file_of_another_build(builds: Builds, tmp_path: Path) -> None:
    """find_package chose the package by the version raceConfigVersion.cmake gave it; raceConfig.cmake is of another
    version (the version file was replaced between the two reads)."""
    d = builds.prefix({}, "version")
    (d / "check.cmake").write_text(STUBS)
    r = subprocess.run(["cmake", "-DCMAKE_FIND_PACKAGE_NAME=race", "-Drace_VERSION=2.0.0", f"-DCONFIG={d / CONFIG}",
                        "-P", str(d / "check.cmake")], capture_output=True, text=True)
    assert r.returncode != 0 and "version 2.0.0 (this package is version 1.0.0)" in " ".join(r.stderr.split())


@needs_tools("cmake")
def test_find_package_configures_one_build_and_stops_at_a_mix(builds: Builds, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(consumer NONE)\n"
                                         "find_package(race 1.0 REQUIRED)\n")
    for name, pattern, ok in (("one", {}, True), ("mix", {H: "B"}, False)):
        prefix = builds.prefix(pattern, f"fp-{name}")
        r = subprocess.run(["cmake", "-S", str(proj), "-B", str(tmp_path / name), f"-DCMAKE_PREFIX_PATH={prefix}"],
                           capture_output=True, text=True)
        assert (r.returncode == 0) == ok, r.stdout + r.stderr
        if not ok:
            assert f"include/race.h: build {builds.ids['B']}" in " ".join(r.stderr.split()), r.stderr


def test_the_header_and_library_pair_checks_its_build_at_run_time(builds: Builds) -> None:
    for header, library in itertools.product("AB", repeat=2):
        out = builds.pair(header, library)
        if header == library:
            assert out == f"KP_SUCCESS {builds.ids[library]}"
        else:
            assert out == (f"KP_ERROR_BUILD_MISMATCH race_check_build: this program was compiled with a race.h of "
                           f"kernelpack build {builds.ids[header]} but runs with librace of build {builds.ids[library]}"
                           f": they come from two builds (one was published while the program was compiled, or the "
                           f"library was replaced since); compile the program again against the library it runs with")


CPP_MAIN = '#include "race.hpp"\nint main() { race::check_build(); return 0; }\n'


def test_a_cpp_header_beside_a_c_header_of_another_build_does_not_compile(builds: Builds, tmp_path: Path) -> None:
    src = tmp_path / "main.cpp"
    src.write_text(CPP_MAIN)
    for hpp, h in itertools.product("AB", repeat=2):
        inc = builds.prefix({HPP: hpp, H: h}, f"cpp-{hpp}{h}") / "include"
        r = subprocess.run([CXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{inc}", "-fsyntax-only",
                            str(src)], capture_output=True, text=True)
        assert (r.returncode == 0) == (hpp == h), r.stderr
        if hpp != h:
            assert "race.hpp and the race.h it includes come from two kernelpack builds" in r.stderr
    # a project configured with build A's package (race::race defines RACE_KP_EXPECT_BUILD_ID64) compiling B's header
    inc = builds.prefix({H: "B"}, "expect") / "include"
    expect = f"-DRACE_KP_EXPECT_BUILD_ID64=0x{builds.ids['A'][:16]}ULL"
    c = tmp_path / "main.c"
    c.write_text(CHECK_MAIN)
    r = subprocess.run([CC, "-std=c99", "-Wall", "-Werror", expect, f"-I{inc}", "-fsyntax-only", str(c)],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "race.h is of another kernelpack build than the CMake package" in r.stderr
    ok = f"-DRACE_KP_EXPECT_BUILD_ID64=0x{builds.ids['B'][:16]}ULL"
    subprocess.run([CC, "-std=c99", "-Wall", "-Werror", ok, f"-I{inc}", "-fsyntax-only", str(c)], check=True)


def _probe(lib: SharedLibrary) -> None:
    lib.function("race_build_id", [], "probe")


def test_a_library_replaced_after_it_was_read_is_refused_naming_both_builds(builds: Builds, tmp_path: Path) -> None:
    """What a module loaded from librace.so does before it calls a host program: the library dlopen gives must be
    the build its bytes described (they were read when it was loaded)."""
    so = tmp_path / "lib" / "librace.so"
    so.parent.mkdir()
    so.write_bytes(builds.files["A"][SO])
    read = dict(read_embedded(so).build_ids)
    (tmp_path / "new.so").write_bytes(builds.files["B"][SO])
    os.replace(tmp_path / "new.so", so)  # a build published B after the module read A
    lib = SharedLibrary(str(so), False, read)
    message = f"was read as librace of kernelpack build {builds.ids['A']}, but the library this process runs from " \
              f"that path is build {builds.ids['B']}"
    with pytest.raises(BundleError, match=re.escape(message)):
        _probe(lib)
    with pytest.raises(BundleError, match="load it again once the build has finished"):
        _probe(lib)  # refused again, never called
    # the same process loading the new bytes again: dlopen hands back the library it loaded first (build B here)
    SharedLibrary(str(so), False, dict(read_embedded(so).build_ids)).function("race_build_id", [], "probe")
    (tmp_path / "new.so").write_bytes(builds.files["A"][SO])
    os.replace(tmp_path / "new.so", so)  # the next build, A again: the path reads as A, the process holds B
    with pytest.raises(BundleError, match=f"read as librace of kernelpack build {builds.ids['A']}.*is build "
                                          f"{builds.ids['B']}.*already loaded another build"):
        _probe(SharedLibrary(str(so), False, dict(read_embedded(so).build_ids)))


# ------------------------------------------------------------------------------------------------ the race


_LINKS = itertools.count()  # each path dlopen-ed once per process (dlopen hands back what it loaded from a path)


class Reader:
    """Reads the outputs in the order a publish renames them, again and again, and judges each snapshot by the bytes
    (which build each file is) and by the checked readers: the CMake package (the files find_package reads), the
    header/library pair (race.h + librace.so), and a module's dlopen of the library after reading its bytes."""

    def __init__(self, builds: Builds, out: Path, work: Path) -> None:
        self.builds, self.out, self.work = builds, out, work
        self.published = 0  # publishes completed (the publisher counts)
        self.mixed_during: set[int] = set()  # the publishes in progress when a mixed snapshot began
        self.counts = dict.fromkeys(("snapshots", "mixed", "cmake_mixed", "cmake_refused", "pair_mixed",
                                     "pair_refused", "load_mixed", "load_refused", "kpack_or_state_only"), 0)
        self.done = threading.Condition()
        self.completed = 0

    def snapshot(self) -> None:
        b, c = self.builds, self.counts
        during = self.published + 1
        snap = {rel: b.which(rel, (self.out / rel).read_bytes()) for rel in b.order}
        c["snapshots"] += 1
        # dlopen now, of what the path holds now, as a new process would (a path never dlopen-ed in this one)
        link = self.work / f"dl{next(_LINKS)}.so"
        os.link(self.out / SO, link)
        dl = b.which(SO, link.read_bytes())
        mixed, cmake = len(set(snap.values())) > 1, tuple(snap[rel] for rel in CMAKE_READS)
        c["mixed"] += mixed
        if mixed:
            self.mixed_during.add(during)
        if len(set(cmake)) > 1:
            c["cmake_mixed"] += 1
            c["cmake_refused"] += not b.cmake(cmake)[0]
        else:
            assert b.cmake(cmake)[0]
            c["kpack_or_state_only"] += mixed
        pair = b.pair(snap[H], snap[SO])
        if snap[H] != snap[SO]:
            c["pair_mixed"] += 1
            c["pair_refused"] += pair.startswith("KP_ERROR_BUILD_MISMATCH")
        else:
            assert pair.startswith("KP_SUCCESS")
        if dl != snap[SO] or c["snapshots"] % 25 == 0:  # dlopen-ed where the builds differ, and every 25th
            ids = dict(read_embedded(SO, data=b.files[snap[SO]][SO]).build_ids)  # what kernelpack.load read
            try:
                _probe(SharedLibrary(str(link), False, ids))
                refused = False
            except BundleError:
                refused = True
            assert refused == (dl != snap[SO])
            c["load_mixed"] += dl != snap[SO]
            c["load_refused"] += refused
        link.unlink()
        with self.done:
            self.completed += 1
            self.done.notify_all()

    def wait_for_two(self) -> None:
        """Until two snapshots more are complete (so one was read whole after this call began)."""
        with self.done:
            target = self.completed + 2
            self.done.wait_for(lambda: self.completed >= target, timeout=30)


def _race(builds: Builds, out: Path, work: Path, publishes: int, pause: float) -> dict[str, int]:
    """``publishes`` publishes of sets A and B in turn while a Reader reads; with ``pause`` > 0 the publisher waits,
    after each rename with that probability (seeded), until the reader has read a whole snapshot."""
    reader = Reader(builds, out, work)
    rng = random.Random(25)
    real, running = os.replace, [True]

    def replace(src, dst):  # type: ignore[no-untyped-def]
        real(src, dst)
        if "/new/" in str(src) and rng.random() < pause:
            reader.wait_for_two()

    def publisher() -> None:
        try:
            for i in range(publishes):
                with output_dir(out) as d, Stage(d) as stage:
                    for rel, data in builds.files["AB"[i % 2]].items():
                        stage.write(rel, data)
                reader.published = i + 1
        finally:
            running[0] = False

    publish.os.replace = replace  # type: ignore[assignment]
    try:
        t = threading.Thread(target=publisher)
        t.start()
        while running[0]:
            reader.snapshot()
        t.join()
    finally:
        publish.os.replace = real  # type: ignore[assignment]
    assert publish.JOURNAL not in os.listdir(out)
    return {**reader.counts, "publishes_mixed": len(reader.mixed_during & set(range(1, publishes + 1)))}


def test_a_reader_in_rename_order_during_publishes_detects_every_mix(builds: Builds, tmp_path: Path) -> None:
    """The issue's measurement (a reader in the publish's rename order during 60 publishes), then 30 more publishes
    that pause after a seeded quarter of their renames until the reader has read a whole snapshot (so mixes are
    certain): every mix a checked reader gets is refused, and nothing else is."""
    out = tmp_path / "out"
    with output_dir(out) as d, Stage(d) as stage:
        for rel, data in builds.files["B"].items():
            stage.write(rel, data)
    builds.cmake(("A",) * len(CMAKE_READS))  # every verdict ready before the first publish
    for h, so in itertools.product("AB", repeat=2):
        builds.pair(h, so)
    for name, publishes, pause in (("free-running", 60, 0.0), ("pausing", 30, 0.25)):
        c = _race(builds, out, tmp_path, publishes, pause)
        print(f"\n{name}: {publishes} publishes, {c['snapshots']} snapshots read in rename order, {c['mixed']} "
              f"mixed (during {c['publishes_mixed']} of the publishes); refused: "
              f"CMake package {c['cmake_refused']} of {c['cmake_mixed']}, race.h + librace.so {c['pair_refused']} of "
              f"{c['pair_mixed']}, read then dlopen {c['load_refused']} of {c['load_mixed']}; mixed only in "
              f"race.kpack / state.json (which no reader reads with another file): {c['kpack_or_state_only']}")
        assert c["cmake_refused"] == c["cmake_mixed"]
        assert c["pair_refused"] == c["pair_mixed"]
        assert c["load_refused"] == c["load_mixed"]
        if pause:  # a whole snapshot between the renames of race.h and librace.so is certain (seeded pauses)
            assert c["cmake_mixed"] and c["pair_mixed"], c
