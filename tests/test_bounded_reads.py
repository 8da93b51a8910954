"""Reading files is bounded: every reader of bundles, libraries and cubins (``Bundle.read``, ``kernelpack.load``,
``read_embedded_bundle``, ``kernelpack inspect``) refuses a FIFO, a device, a directory and a file above
``KERNELPACK_MAX_FILE_BYTES`` before reading it -- in well under a second and a few MiB, never hanging.

Each read runs in a time box (SIGALRM) with a cap on the address space it may add (RLIMIT_AS), so a regression
fails the test instead of hanging it or filling the machine's memory.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import fuzz_support as fz
import kernelpack
from kernelpack.bundle.kpack import HEADER_SIZE, MAGIC, Bundle
from kernelpack.cli.describe import load_any
from kernelpack.clib import read_embedded_bundle
from kernelpack.core import config
from kernelpack.core.errors import BundleError, KernelpackError
from kernelpack.core.files import read_bounded

SPARSE = 10 << 30  # bytes the sparse file claims (no disk used)
TIME_BOX_S = 10.0
HEADROOM = 64 << 20  # address space a refusal may add

READERS = {
    "Bundle.read": Bundle.read,
    "kernelpack.load": kernelpack.load,
    "read_embedded_bundle": read_embedded_bundle,
    "inspect (load_any)": load_any,
}


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> fz.Seeds:
    return fz.make_seeds(tmp_path_factory.mktemp("bounded"))


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name -> (path, what the refusal says)."""
    fifo = tmp_path / "fifo.kpack"
    os.mkfifo(fifo)
    sparse = tmp_path / "sparse.kpack"
    with open(sparse, "wb") as f:
        f.truncate(SPARSE)
    folder = tmp_path / "folder.kpack"
    folder.mkdir()
    link = tmp_path / "zero.so"
    link.symlink_to("/dev/zero")
    return {
        "fifo": (fifo, "is a FIFO \\(named pipe\\), not a regular file"),
        "dev_zero": (Path("/dev/zero"), "is a character device, not a regular file"),
        "symlink_to_dev_zero": (link, "is a character device, not a regular file"),
        "directory": (folder, "is a directory, not a regular file"),
        "sparse_10_GiB": (sparse, "is 10.0 GiB \\(10737418240 bytes\\), above the limit of 4.0 GiB "
                                  "\\(4294967296 bytes\\) per file; set KERNELPACK_MAX_FILE_BYTES"),
    }


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "symlink_to_dev_zero", "directory", "sparse_10_GiB"])
@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_refuses_what_is_no_regular_file_or_too_big(hostile, reader, kind):
    path, message = hostile[kind]
    with fz.bounded(TIME_BOX_S, HEADROOM), pytest.raises(KernelpackError, match=message) as e:  # a hang: the box
        READERS[reader](path)
    assert str(path) in str(e.value)
    if reader != "inspect (load_any)":
        assert isinstance(e.value, BundleError)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "sparse_10_GiB"])
def test_inspect_command_refuses_without_hanging(hostile, kind):
    path, message = hostile[kind]
    proc = subprocess.run([sys.executable, "-m", "kernelpack.cli", "inspect", str(path)], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, KERNELPACK_CACHE_DIR="off"))
    assert proc.returncode == 1, proc.stderr  # a failed command (kernelpack.cli), not a usage error
    assert proc.stderr.startswith("kernelpack: error: file ") and "Traceback" not in proc.stderr, proc.stderr
    assert message.replace("\\", "") in proc.stderr


def test_the_limit_is_a_knob(seeds, tmp_path, monkeypatch):
    bundle, lib = tmp_path / "b.kpack", tmp_path / "libfz.so"
    bundle.write_bytes(seeds.bundle)
    lib.write_bytes(seeds.shared)
    for path, data in ((bundle, seeds.bundle), (lib, seeds.shared)):
        with config.override(max_file_bytes=len(data)):  # exactly the limit: read
            assert kernelpack.load(path) is not None
            assert load_any(path) is not None
        with config.override(max_file_bytes=len(data) - 1), pytest.raises(BundleError, match=(
                f"is .*\\({len(data)} bytes\\), above the limit of .*\\({len(data) - 1} bytes\\)")):
            kernelpack.load(path)
    monkeypatch.setenv("KERNELPACK_MAX_FILE_BYTES", "1K")
    assert config.knobs().max_file_bytes == 1024
    with pytest.raises(BundleError, match="above the limit of 1.0 KiB \\(1024 bytes\\) per file"):
        Bundle.read(bundle)
    for raw, n in (("4096", 4096), ("512M", 512 << 20), ("8g", 8 << 30), ("2GiB", 2 << 30), ("1T", 1 << 40),
                   (" 7 ", 7)):
        monkeypatch.setenv("KERNELPACK_MAX_FILE_BYTES", raw)
        assert config.knobs().max_file_bytes == n, raw
    for raw in ("0", "-1", "1.5G", "12Q", "G", "lots"):
        monkeypatch.setenv("KERNELPACK_MAX_FILE_BYTES", raw)
        with pytest.raises(KernelpackError, match=f"KERNELPACK_MAX_FILE_BYTES={raw!r}: expected a positive number"):
            config.knobs()
    monkeypatch.delenv("KERNELPACK_MAX_FILE_BYTES")
    assert config.knobs().max_file_bytes == config.DEFAULT_MAX_FILE_BYTES == 4 << 30


def _sparse(path: Path, head: bytes, size: int = 1 << 30) -> Path:
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
    return path


def test_headers_are_checked_before_the_rest_is_read(tmp_path):
    """1 GiB (sparse) files within the limit whose first 64 bytes already refuse them: a bundle header stating 4096
    bytes, an ELF header whose section table lies beyond the file, no header at all. Each refusal reads 64 bytes."""
    bundle = _sparse(tmp_path / "lying.kpack",
                     struct.pack("<8sIIQQ32s", MAGIC, 1, 3, HEADER_SIZE, 4096 - HEADER_SIZE, bytes(32)))
    elf = bytearray(64)
    elf[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", elf, 0x28, 2 << 30)  # e_shoff: 2 GiB
    struct.pack_into("<HH", elf, 0x3A, 64, 30)  # e_shentsize, e_shnum
    lib = _sparse(tmp_path / "liblying.so", bytes(elf))
    zeros = _sparse(tmp_path / "libzeros.so", b"")
    cases = [
        (bundle, (Bundle.read, kernelpack.load, load_any), "truncated or padded: the header says 4096 bytes, the file "
                                                           "has 1073741824"),
        (lib, (kernelpack.load, read_embedded_bundle), r"truncated or malformed ELF section table \(it ends at byte "
                                                       r"2147485568, the file has 1073741824\)"),
        (zeros, (kernelpack.load, read_embedded_bundle), r"no kernelpack bundle inside \(neither an ELF file nor an "
                                                         r"ar archive\)"),
        (zeros, (load_any,), "not a cubin, a kernelpack bundle or a kernelpack library"),
    ]
    for path, readers, message in cases:
        for reader in readers:
            with fz.bounded(TIME_BOX_S, HEADROOM), pytest.raises(KernelpackError, match=message):
                reader(path)


def test_a_file_that_changes_size_while_read_is_refused(tmp_path):
    path = tmp_path / "growing.kpack"
    path.write_bytes(b"x" * 1000)

    def grow(head: bytes, size: int) -> None:  # runs between fstat and the read
        with open(path, "ab") as f:
            f.write(b"more")

    with pytest.raises(KernelpackError, match="changed size while being read \\(it had 1000 bytes when opened\\)"):
        read_bounded(path, "bundle", check_head=grow)

    def shrink(head: bytes, size: int) -> None:
        os.truncate(path, 10)

    with pytest.raises(KernelpackError, match="changed size while being read"):
        read_bounded(path, "bundle", check_head=shrink)


def test_plain_files_links_and_errors(seeds, tmp_path):
    bundle = tmp_path / "b.kpack"
    bundle.write_bytes(seeds.bundle)
    link = tmp_path / "link.kpack"
    link.symlink_to(bundle)
    assert read_bounded(link, "bundle") == seeds.bundle
    assert Bundle.read(link) == Bundle.from_bytes(seeds.bundle)
    empty = tmp_path / "empty.kpack"
    empty.write_bytes(b"")
    assert read_bounded(empty, "bundle") == b""
    with pytest.raises(BundleError, match="0 bytes is too short for a kernelpack bundle"):
        Bundle.read(empty)
    with pytest.raises(BundleError, match="cannot read bundle .*missing.kpack: No such file or directory"):
        Bundle.read(tmp_path / "missing.kpack")
    with pytest.raises(BundleError, match="cannot read bundle or library .*missing.so: No such file or directory"):
        kernelpack.load(tmp_path / "missing.so")
    unreadable = tmp_path / "secret.kpack"
    unreadable.write_bytes(seeds.bundle)
    unreadable.chmod(0)
    if os.geteuid() != 0:  # root reads anything
        with pytest.raises(BundleError, match="Permission denied"):
            Bundle.read(unreadable)
