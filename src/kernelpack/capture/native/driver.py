"""The recorder (``recorder.c``) built for this machine's CUDA driver and loaded in its place.

The recorder is a shared library with the soname ``libcuda.so.1``. Loaded into a process before anything opens the
driver, every later ``dlopen("libcuda.so.1")`` (the CUDA runtime's, Triton's, torch's) and every library linked
against ``libcuda.so.1`` gets it: the dynamic loader matches a loaded library by its soname. It opens the real
driver by its path and forwards every export of it: the functions it records (:func:`hooked`) through its own code,
every other one through a jump (``recorder_exports.c``, generated here from the real driver's dynamic symbol table).
It is built once per driver file with the C compiler (``CC``) into kernelpack's cache.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import re
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import KernelpackError
from ...core.files import read_bounded
from ...frontends.prebuilt.fatbin import FatbinError, host_sections

HERE = Path(__file__).parent
SOURCE = HERE / "recorder.c"
CSRC = HERE.parent.parent / "csrc"  # kp_cuda.h: the driver's types, as kernelpack's C library declares them
ENV_DRIVER = "KERNELPACK_RECORD_DRIVER"  # the real driver (a path): found when not given
ENV_LOG = "KERNELPACK_RECORD_LOG"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,200}")
_SHT_DYNSYM = 11
_JUMPS = {  # one exported function: a jump through slot i of kp_rec_real
    "x86_64": "{n}:\n\tjmp *kp_rec_real+{off}(%rip)\n",
    "aarch64": "{n}:\n\tadrp x16, kp_rec_real+{off}\n\tldr x16, [x16, #:lo12:kp_rec_real+{off}]\n\tbr x16\n",
}
_PROBE = ("import ctypes, os\n"
          "ctypes.CDLL('libcuda.so.1')\n"
          "for line in open('/proc/self/maps'):\n"
          "    path = line.split(None, 5)[5].strip() if len(line.split(None, 5)) == 6 else ''\n"
          "    if os.path.basename(path).startswith('libcuda.so'):\n"
          "        print(path)\n"
          "        break\n")


@dataclass(frozen=True)
class Recorder:
    """The recorder loaded in this process: its library, the real driver it forwards to, and its log."""

    library: Path
    driver: Path
    log: Path


_installed: list[tuple[Recorder, ctypes.CDLL]] = []


def installed() -> Recorder | None:
    return _installed[0][0] if _installed else None


def hooked() -> frozenset[str]:
    """The functions the recorder defines itself (``EXPORT`` in recorder.c): not forwarded by a jump."""
    return frozenset(re.findall(r"^EXPORT CUresult (\w+)\(", SOURCE.read_text(), re.M))


def mapped_files() -> list[tuple[int, int, str]]:
    """(start, end, path) of every file mapped into this process."""
    out = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    lo, hi = parts[0].split("-")
                    out.append((int(lo, 16), int(hi, 16), parts[5].strip()))
    except OSError:
        pass
    return out


def loaded_driver() -> str | None:
    """The path of the CUDA driver this process has loaded (``libcuda.so*``), or None."""
    return next((p for _, _, p in mapped_files() if os.path.basename(p).startswith("libcuda.so")), None)


def real_driver() -> Path:
    """The driver ``dlopen("libcuda.so.1")`` finds on this machine (``$KERNELPACK_RECORD_DRIVER`` when set), looked
    up in a child process so that this one loads nothing."""
    given = os.environ.get(ENV_DRIVER, "").strip()
    if given:
        if not Path(given).is_file():
            raise KernelpackError(f"{ENV_DRIVER}={given!r}: no such file (the CUDA driver to record, libcuda.so.1)")
        return Path(given)
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise KernelpackError(f"recording native launches: cannot look for the CUDA driver ({e})") from None
    path = proc.stdout.strip()
    if proc.returncode != 0 or not path:
        last = (proc.stderr.strip().splitlines() or ["libcuda.so.1 not found"])[-1]
        raise KernelpackError(f"recording native launches needs the CUDA driver (libcuda.so.1), and none opens here: "
                              f"{last}")
    return Path(path)


def exports(driver: Path) -> list[str]:
    """The functions the driver exports (its dynamic symbol table's defined global or weak functions, ifuncs
    included), by name; names that are not C identifiers are left out."""
    data = read_bounded(driver, "CUDA driver (libcuda.so.1) to record")
    if data[:6] != b"\x7fELF\x02\x01":
        raise KernelpackError(f"recording native launches: {driver} is not a 64-bit little-endian ELF library")
    try:
        sections = host_sections(data, str(driver))
        dynsym = next((s for s in sections if s.kind == _SHT_DYNSYM), None)
        if dynsym is None or dynsym.link >= len(sections):
            raise KernelpackError(f"recording native launches: {driver} has no dynamic symbol table")
        table = dynsym.bytes_of(data, str(driver))
        strings = sections[dynsym.link].bytes_of(data, str(driver))
    except FatbinError as e:
        raise KernelpackError(f"recording native launches: {e.message}") from None
    names, own = set(), hooked()
    for name_off, info, _, shndx, _, _ in struct.iter_unpack("<IBBHQQ", table[:len(table) // 24 * 24]):
        if shndx == 0 or (info & 0xF) not in (2, 10) or (info >> 4) not in (1, 2):
            continue
        end = strings.find(b"\0", name_off)
        name = strings[name_off:end].decode("latin-1")
        if _IDENT.fullmatch(name) and name not in own:
            names.add(name)
    return sorted(names)


def exports_source(names: list[str], machine: str | None = None) -> str:
    """``recorder_exports.c``: every name a function that jumps through its slot of ``kp_rec_real``."""
    machine = machine or platform.machine()
    jump = _JUMPS.get(machine)
    if jump is None:
        raise KernelpackError(f"recording native launches: not done on {machine} (only {', '.join(_JUMPS)})")
    out = ["/* Generated by kernelpack.capture.native.driver: the real driver's other exports, forwarded. */",
           '#define HIDDEN __attribute__((visibility("hidden")))',
           f"HIDDEN const unsigned kp_rec_count = {len(names)};",
           f"HIDDEN void* kp_rec_real[{max(len(names), 1)}];",
           "HIDDEN const char* const kp_rec_names[] = {"]
    out += [f'    "{n}",' for n in names] + ["    0,", "};", "__asm__(", '    ".text\\n"']
    for i, n in enumerate(names):
        body = f".globl {n}\n.type {n}, @function\n" + jump.format(n=n, off=8 * i) + f".size {n}, .-{n}\n"
        out.append("    " + " ".join(f'"{line}\\n"' for line in body.splitlines()))
    out.append(");")
    return "\n".join(out) + "\n"


def build(driver: Path) -> Path:
    """The recorder for ``driver``: built once into kernelpack's cache (a private temporary directory when the cache
    is off), named ``libcuda.so.1``."""
    from ...core.config import knobs

    st = driver.stat()
    key = hashlib.sha256(b"\0".join([SOURCE.read_bytes(), (CSRC / "kp_cuda.h").read_bytes(), str(driver).encode(),
                                     f"{st.st_size}:{st.st_mtime_ns}:{platform.machine()}".encode()])).hexdigest()[:20]
    cache = knobs().cache_dir
    base = (cache / "native-recorder") if cache is not None else Path(tempfile.mkdtemp(prefix="kernelpack-record-"))
    out = base / key / "libcuda.so.1"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=out.parent))
    gen = work / "recorder_exports.c"
    gen.write_text(exports_source(exports(driver)))
    cc = knobs().cc
    cmd = [cc, "-std=gnu99", "-O1", "-fPIC", "-shared", "-Wl,-soname,libcuda.so.1", "-I", str(CSRC), "-o",
           str(work / "libcuda.so.1"), str(SOURCE), str(gen), "-ldl", "-lpthread"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        raise KernelpackError(f"recording native launches: cannot run the C compiler {cc!r} ({e}); install one or "
                              f"set CC") from None
    if proc.returncode != 0:
        raise KernelpackError(f"recording native launches: building the recorder failed: {' '.join(cmd)}",
                              log=proc.stderr)
    os.replace(work / "libcuda.so.1", out)
    return out


def install(log: Path) -> Recorder:
    """Load the recorder into this process, writing to ``log`` (once per process: a second call returns the first
    recorder). The driver must not be loaded yet."""
    if _installed:
        return _installed[0][0]
    loaded = loaded_driver()
    if loaded is not None:
        raise KernelpackError(f"recording native launches: this process has loaded the CUDA driver already "
                              f"({loaded}); start the capture before anything uses CUDA (before torch.cuda), or run "
                              f"the code under `kernelpack capture --native -- python script.py`")
    driver = real_driver()
    library = build(driver)
    saved = {k: os.environ.get(k) for k in (ENV_DRIVER, ENV_LOG)}
    os.environ[ENV_DRIVER], os.environ[ENV_LOG] = str(driver), str(log)
    try:
        handle = ctypes.CDLL(str(library))
    except OSError as e:
        raise KernelpackError(f"recording native launches: cannot load the recorder {library}: {e}") from None
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    rec = Recorder(library, driver, log)
    _installed.append((rec, handle))
    return rec
