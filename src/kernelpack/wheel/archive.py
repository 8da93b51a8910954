"""Wheels and sdists as bytes, the same bytes for the same inputs.

Entries in a fixed order (the package's files sorted, then ``.dist-info`` with ``RECORD`` last), one timestamp for
all (``SOURCE_DATE_EPOCH``, default 1980-01-01, the earliest a zip can hold), fixed permissions (0644, 0755 for a
shared library), Unix as the creating system, one compression level; ``RECORD`` holds each file's SHA-256 and size
(PEP 376/427). The sdist is a ustar-compatible PAX tar, sorted, owned by 0:0, gzip-compressed with no name and the
same timestamp in its header.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import tarfile
import time
import zipfile
from collections.abc import Mapping

from ..core import config
from .meta import WheelError, WheelMeta, wheel_file

ZIP_EPOCH = 315532800  # 1980-01-01T00:00:00Z
Files = Mapping[str, bytes]  # archive path -> content


def source_date_epoch() -> int:
    """``SOURCE_DATE_EPOCH`` (checked), else 1980-01-01; never earlier than a zip can store."""
    raw = config.knobs().source_date_epoch
    if raw is None:
        return ZIP_EPOCH
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 11:
        raise WheelError(f"SOURCE_DATE_EPOCH={raw!r}: expected a whole number of seconds since 1970-01-01 (e.g. the "
                         f"last commit's: git log -1 --format=%ct)")
    return max(int(raw), ZIP_EPOCH)


def _mode(path: str) -> int:
    return 0o755 if path.endswith(".so") or ".so." in path.rsplit("/", 1)[-1] else 0o644


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def wheel_bytes(meta: WheelMeta, tag: str, files: Files, *, purelib: bool) -> bytes:
    """The wheel of ``files`` (paths inside the wheel, below the package's folder) with its .dist-info."""
    info = f"{meta.dist}.dist-info"
    entries = [(p, files[p]) for p in sorted(files)]
    if any(p.startswith(f"{info}/") for p in files):
        raise WheelError(f"{info}/ is written by kernelpack; a package file may not lie there")
    entries += [(f"{info}/METADATA", meta.metadata().encode("utf-8")),
                (f"{info}/WHEEL", wheel_file(tag, purelib).encode("utf-8"))]
    record = "".join(f"{_csv(p)},{record_hash(d)},{len(d)}\n" for p, d in entries) + f"{info}/RECORD,,\n"
    entries.append((f"{info}/RECORD", record.encode("utf-8")))
    stamp = time.gmtime(source_date_epoch())[:6]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, data in entries:
            zi = zipfile.ZipInfo(path, stamp)
            zi.create_system = 3  # Unix: the permissions below are what an installer reads
            zi.external_attr = (0o100000 | _mode(path)) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=6)
    return buf.getvalue()


def _csv(path: str) -> str:
    """A RECORD path field (CSV): quoted when it holds a comma or a quote."""
    return '"' + path.replace('"', '""') + '"' if any(c in path for c in ',"\r\n') else path


def sdist_bytes(top: str, files: Files) -> bytes:
    """``top/...`` for each of ``files`` as a reproducible ``.tar.gz``."""
    epoch = source_date_epoch()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        dirs = sorted({"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)})
        for d in dirs:
            tf.addfile(_tarinfo(f"{top}/{d}", epoch, tarfile.DIRTYPE, 0o755))
        for path in sorted(files):
            data = files[path]
            ti = _tarinfo(f"{top}/{path}", epoch, tarfile.REGTYPE, _mode(path))
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=epoch, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def _tarinfo(name: str, epoch: int, kind: bytes, mode: int) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.mtime = kind, mode, epoch
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti
