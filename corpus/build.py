"""Compile specs in parallel processes, link one library per package, and check what was built.

Checks after linking: the library loads with ``kernelpack.load`` (its embedded bundle and host-program record,
no driver needed) with the expected families, and its C header (``-std=c99``) and C++ header (``-std=c++17``)
compile under ``-Wall -Wextra -Werror -pedantic``, and a C program calling nothing links against the static
archive and the shared library.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import subprocess
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from .results import KERNELPACK, LINK, Section
from .specs import Spec

_WORK: list[tuple[Spec, Callable[[Spec, Sequence[str]], Any], tuple[str, ...]]] = []


def _run_one(i: int) -> tuple[int, bytes | None, str, float]:
    spec, fn, archs = _WORK[i]
    t = time.time()
    try:
        obj = fn(spec, archs)
        tag = b"H" if type(obj).__name__ == "HostProgram" else b"B"
        return i, tag + obj.to_bytes(), "", time.time() - t
    except BaseException as e:  # noqa: BLE001 - reported per spec
        log = getattr(e, "log", "") or ""
        msg = f"{type(e).__name__}: {e}"
        if log and log not in msg:
            msg += " | " + log.strip().splitlines()[-1]
        if not isinstance(e, Exception):
            msg += "\n" + traceback.format_exc()
        return i, None, msg, time.time() - t


def _from_bytes(data: bytes) -> Any:
    """A Bundle, or a CuTe HostProgram (what :func:`_run_one` sent back, tagged by its first byte)."""
    from kernelpack.bundle.host_program import HostProgram
    from kernelpack.bundle.kpack import Bundle

    return HostProgram.from_bytes(data[1:]) if data[:1] == b"H" else Bundle.from_bytes(data[1:])


def compile_all(specs: Sequence[Spec], fn: Callable[[Spec, Sequence[str]], Any], archs: Sequence[str], jobs: int,
                progress: Callable[[str], None] = print) -> list[tuple[Spec, Any, str]]:
    """(spec, Bundle or None, error) for every spec, compiled in ``jobs`` forked processes."""
    _WORK.clear()
    _WORK.extend((s, fn, tuple(archs)) for s in specs)
    results: list[tuple[Spec, Any, str]] = [(s, None, "not run") for s in specs]
    done = 0
    if jobs <= 1:
        outs = (_run_one(i) for i in range(len(specs)))
        iterator: Any = outs
    else:
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("fork"))
        iterator = (f.result() for f in as_completed([pool.submit(_run_one, i) for i in range(len(specs))]))
    try:
        for i, data, err, secs in iterator:
            done += 1
            spec = specs[i]
            bundle = _from_bytes(data) if data is not None else None
            results[i] = (spec, bundle, err)
            status = "ok" if bundle is not None else "FAILED " + err[:160]
            progress(f"  [{done}/{len(specs)}] {spec.family}[{spec.variant}] {secs:.1f}s {status}")
    finally:
        if jobs > 1:
            pool.shutdown(cancel_futures=True)
    return results


def link(section_of: dict[str, Section], name: str, items: list[tuple[str, str, Any]], out: Path,
         progress: Callable[[str], None] = print) -> tuple[Any, list[tuple[str, str, Any]]]:
    """Build library ``name`` from ``items`` = (section key, kernel, Bundle | HostProgram). An item the library
    generator refuses is left out (a link failure of that kernel) and the rest is linked."""
    import kernelpack

    kept = list(items)
    while kept:
        try:
            _generate(name, [x for _, _, x in kept])
            break
        except Exception as e:  # noqa: BLE001 - find the item(s) responsible
            bad = _culprits(name, kept)
            if not bad:
                raise
            for item in bad:
                key, kernel, _ = item
                section_of[key].fail(kernel, "link", LINK, f"{type(e).__name__}: {e}" if len(bad) == 1 else
                                     _alone_error(name, item))
                kept.remove(item)
            progress(f"  left out of the library: {', '.join(k for _, k, _ in bad)}")
    if out.exists():
        shutil.rmtree(out)
    t = time.time()
    result = kernelpack.Library(name, *[x for _, _, x in kept]).build(out)
    progress(f"  linked {result.shared.name} ({result.shared.stat().st_size >> 10} KiB) in {time.time() - t:.1f}s")
    return result, kept


def _generate(name: str, objs: list[Any]) -> None:
    """Generate the library's C source (what ``build`` compiles); host programs alone have none to generate."""
    import kernelpack

    if all(type(x).__name__ == "HostProgram" for x in objs):
        return
    kernelpack.Library(name, *objs).generate()


def _alone_error(name: str, item: tuple[str, str, Any]) -> str:

    try:
        _generate(name, [item[2]])
        return "conflicts with another item of the library"
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def _culprits(name: str, items: list[tuple[str, str, Any]]) -> list[tuple[str, str, Any]]:
    """Items that fail alone; else the smallest prefix that fails (a conflict between items)."""

    bad = []
    for item in items:
        try:
            _generate(name, [item[2]])
        except Exception:  # noqa: BLE001
            bad.append(item)
    if bad:
        return bad
    for n in range(2, len(items) + 1):
        try:
            _generate(name, [x for _, _, x in items[:n]])
        except Exception:  # noqa: BLE001
            return [items[n - 1]]
    return []


def check_library(result: Any, families: set[str], cc: str = "cc", cxx: str = "c++") -> list[str]:
    """Problems found with a built library (empty: all good)."""
    import kernelpack

    problems = []
    mod = kernelpack.load(str(result.shared))
    have = set(mod.families) | set(mod.host_programs)
    missing = sorted(families - have)
    if missing:
        problems.append(f"kernelpack.load({result.shared.name}) lacks {len(missing)} families: {missing[:8]}")
    work = result.prefix / "header_check"
    work.mkdir(exist_ok=True)
    name = result.name
    (work / "c_check.c").write_text(f'#include "{name}.h"\nint main(void) {{\n    kp_status (*volatile f)(int) = '
                                    f'{name}_preload;\n    (void)f;\n    return 0;\n}}\n')
    (work / "cpp_check.cpp").write_text(f'#include "{name}.hpp"\nint main() {{ return 0; }}\n')
    inc = f"-I{result.include_dir}"
    warn = ["-Wall", "-Wextra", "-Werror", "-pedantic"]
    cmds = [
        [cc, "-std=c99", *warn, inc, "-c", "c_check.c", "-o", "c_check.o"],
        [cxx, "-std=c++17", *warn, inc, "-c", "cpp_check.cpp", "-o", "cpp_check.o"],
        [cc, "c_check.o", str(result.static), "-ldl", "-lpthread", "-o", "c_static"],
        [cc, "c_check.o", f"-L{result.shared.parent}", f"-l{name}", "-o", "c_shared"],
    ]
    for cmd in cmds:
        p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
        if p.returncode:
            problems.append(f"{' '.join(cmd[:2])}...: {(p.stderr or p.stdout).strip()[:600]}")
    return problems


def kernelpack_error(section: Section, kernel: str, stage: str, err: str, where: str = "") -> None:
    section.fail(kernel, stage, KERNELPACK, err, where)
