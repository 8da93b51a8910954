"""What tileiras said when it failed: its own diagnostics, which cuTile drops.

cuTile runs tileiras (TileIR bytecode -> cubin) with stdout and stderr captured and raises
``CompilerExecutionError("Return code N\\n<stderr>")``: stdout is dropped, and for most failures tileiras' stderr is
one line (``error: failed to compile Tile IR program``, return code 5: the PTX or SASS step behind it failed and
tileiras prints nothing of that step). What tileiras can say beyond that comes as *remarks* (``--remarks=all``:
the instructions it selected or failed to select, each at a source location), which cuTile only writes to a YAML
file of its disk cache.

:func:`tileiras_failure` runs tileiras once more on the same kernel's bytecode (``export_kernel(...,
output_format="tileir_bytecode")``, the exact input cuTile gave it) with the flags cuTile used plus
``--remark-format=command-line --remarks=all``, captures both streams, and returns the line for
``CompileError.message`` and the text for its ``log``: the command, the return code, stderr and the remarks. It
also says when the kernel's parameters exceed what a CUDA kernel may take (a failure tileiras reports only as
return code 5).
"""

from __future__ import annotations

import io
import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Any

MAX_PARAM_BYTES = 32764  # a kernel's parameters on sm_70+ with CUDA 12.1+ (every arch tileiras targets)
RERUN_TIMEOUT_S = 600.0
_REMARK = re.compile(r"^\s*remark\[(\w+)\]:\s*(.*)$")
_REMARK_FLAGS = ("--remark-format", "--remarks", "--remarks-output-file", "--remarks-passed", "--remarks-missed",
                 "--remarks-failed", "--remarks-analysis")


def is_tileiras_failure(exc: BaseException) -> bool:
    """cuTile's error for tileiras exiting with a nonzero return code (``CompilerExecutionError``)."""
    return type(exc).__name__ in ("CompilerExecutionError", "TileCompilerExecutionError") or (
        hasattr(exc, "compiler_flags") and str(exc).startswith("Return code"))


def return_code(exc: BaseException) -> int | None:
    m = re.match(r"Return code (-?\d+)", str(exc))
    return int(m.group(1)) if m else None


def tileiras_failure(kernel: Any, sig: Any, gpu_code: str, where: str, exc: BaseException,
                     param_bytes: int) -> tuple[str, str]:
    """(message, log) of tileiras failing to compile ``kernel`` for ``sig`` (``where``: "kernel K (sm_90a)")."""
    rc = return_code(exc)
    flags = _flags(str(getattr(exc, "compiler_flags", "") or ""), gpu_code)
    stderr_lines = [x for x in str(exc).splitlines()[1:] if x.strip() and x.strip() != "Unknown location"]
    run = _rerun(kernel, sig, gpu_code, flags, exc)
    log = [f"{where}: tileiras exited with return code {rc}" + (f" (cuTile's flags: {' '.join(flags)})" if flags
                                                                   else "")]
    if stderr_lines:
        log.append("cuTile's report of tileiras' stderr:\n" + "\n".join(stderr_lines))
    counts: dict[str, int] = {}
    if isinstance(run, str):
        log.append(f"tileiras could not be run again for its remarks: {run}")
    else:
        cmd, code, out, err = run
        log.append(f"tileiras run again for its remarks: {cmd}\nreturn code {code}")
        log.append("stderr:\n" + (err.rstrip() or "(empty)"))
        log.append("stdout (remarks):\n" + (out.rstrip() or "(empty)"))
        for line in out.splitlines():
            m = _REMARK.match(line)
            if m:
                counts[m.group(1)] = counts.get(m.group(1), 0) + 1
        if err.strip():
            stderr_lines = [x.strip() for x in err.splitlines() if x.strip()]
    said = "; ".join(dict.fromkeys(_strip_error(x) for x in stderr_lines)) or "no message"
    parts = [f"{where}: tileiras failed (return code {rc}): {said}"]
    if param_bytes > MAX_PARAM_BYTES:
        hint = (f"the kernel's parameters take {param_bytes} bytes, more than the {MAX_PARAM_BYTES} a CUDA kernel may "
                f"take (pass fewer or smaller arguments: a list of arrays takes 12 bytes)")
        parts.append(hint)
        log.insert(1, f"hint: {hint}")
    if counts:
        parts.append("tileiras' remarks are in the log (" + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
                     + ")")
    elif not isinstance(run, str):
        parts.append("tileiras' output is in the log")
    return "; ".join(parts), "\n\n".join(x for x in log if x)


def _strip_error(line: str) -> str:
    return re.sub(r"^\s*error:\s*", "", line).strip()


def _flags(text: str, gpu_code: str) -> list[str]:
    """cuTile's tileiras flags without its remark options (cuTile writes remarks to a YAML file of its cache)."""
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
            continue
        name = w.split("=", 1)[0]
        if name in _REMARK_FLAGS:
            skip = "=" not in w and name == "--remarks-output-file"
            continue
        out.append(w)
    return out or ["--gpu-name", gpu_code]


def _rerun(kernel: Any, sig: Any, gpu_code: str, flags: list[str],
           exc: BaseException) -> tuple[str, int, str, str] | str:
    """(command, return code, stdout, stderr) of tileiras on the kernel's bytecode with every remark enabled, or why
    it could not be run. The bytecode is the file cuTile gave tileiras where it is still there (its command is on
    the ``CalledProcessError`` cuTile raised from), else the kernel exported as bytecode again."""
    try:
        from cuda.tile._compile import _find_compiler_bin  # type: ignore[import-untyped]

        binary: Any = _find_compiler_bin()
    except Exception as e:  # a cuTile without this (private) function, no tileiras: the error stays cuTile's
        return f"{type(e).__name__}: {e}"
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = str(getattr(binary, "ld_path", "") or env.get("LD_LIBRARY_PATH", ""))
    env["PATH"] = str(getattr(binary, "bin_path", "") or env.get("PATH", ""))
    with tempfile.TemporaryDirectory(prefix="kp-tileiras-") as tmp:
        src, out = _their_bytecode(exc), Path(tmp) / "kernel.cubin"
        if src is None:
            try:
                from cuda.tile.compilation import export_kernel  # type: ignore[import-untyped]

                buf = io.BytesIO()
                export_kernel(kernel, [sig], buf, gpu_code=gpu_code, output_format="tileir_bytecode")
            except Exception as e:
                return f"exporting the kernel's TileIR bytecode failed: {type(e).__name__}: {e}"
            src = Path(tmp) / "kernel.tileirbc"
            src.write_bytes(buf.getvalue())
        cmd = [str(binary.path), str(src), "-o", str(out), *flags, "--remark-format=command-line", "--remarks=all"]
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, timeout=RERUN_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{type(e).__name__}: {e}"
        shown = " ".join(shlex.quote(c) for c in ["tileiras", src.name, "-o", out.name, *cmd[4:]])
        return (shown, p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))


def _their_bytecode(exc: BaseException) -> Path | None:
    """The bytecode file of cuTile's failed tileiras command, when it is still there."""
    from ...core.diagnostics import chain

    for e in chain(exc):
        cmd = getattr(e, "cmd", None)
        if isinstance(e, subprocess.CalledProcessError) and isinstance(cmd, (list, tuple)) and len(cmd) > 1:
            path = Path(str(cmd[1]))
            if path.suffix == ".bytecode" and path.is_file():
                return path
    return None
