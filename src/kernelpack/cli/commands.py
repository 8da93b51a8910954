"""The ``kernelpack`` command line: demo, inspect, build, tune, wheel, capture.

Each subcommand is one row of :data:`COMMANDS` (its name, its one-line help, its ``--help`` description, its
arguments and what runs it): a new subcommand is a new row. Options every subcommand takes, before or after its
name: ``--debug`` (the traceback of any error), ``-v/--verbose`` (more detail), ``--version``.

Exit status (docs/cli.md): 0 success; 1 failed -- any :class:`KernelpackError` (bad project file, compile error,
build failure...) or an ``OSError`` from the environment (unreadable input, unwritable output, full disk), reported
as one line ``kernelpack: error: ...`` on stderr followed by the tool's log where there is one; 2 a usage error (the
command line itself: an unknown option, a missing argument); 3 ``inspect --device`` found a kernel with no binary for
that device; 70 an internal error (a bug in kernelpack: one line, ``--debug`` shows the traceback); 130 interrupted
(Ctrl-C: one line, no traceback); 141 the reader of the output went away (``kernelpack inspect ... | head``: no
message, as a tool ended by SIGPIPE). With ``--json``, a failure also prints a JSON error object on stdout
(:func:`error_object`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from ..core.errors import KernelpackError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_BINARY = 3  # inspect --device: some kernel has no binary for the device
EXIT_INTERNAL_ERROR = 70  # sysexits.h EX_SOFTWARE
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE
EXIT_USER_ERROR = EXIT_FAILED  # the name before usage errors had their own status


class UsageError(KernelpackError):
    """The command line is wrong (exit status 2, the usage printed with the message)."""


@dataclass(frozen=True)
class Command:
    """One subcommand: ``kernelpack NAME``."""

    name: str
    help: str  # one line, in ``kernelpack --help``
    description: str  # ``kernelpack NAME --help``
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


# ------------------------------------------------------------------------------------------------ inspect


def _inspect_args(i: argparse.ArgumentParser) -> None:
    i.add_argument("file", help="a .kpack bundle, a library built by kernelpack (libNAME.so / .a) or a cubin")
    i.add_argument("--json", action="store_true", help="machine-readable output")
    i.add_argument("--sass", action="store_true", help="also print the SASS disassembly (needs cuobjdump)")
    i.add_argument("--device", metavar="ARCH", default=None,
                   help="only say which binary a device of this arch (sm_120; need not be here) gets from each "
                        "kernel; exit status 3 when some kernel has none")
    i.add_argument("--verify", action="store_true",
                   help="verify every kernel's ABI against its cubins (what kernelpack.load defers to each kernel's "
                        "first use) and say so; a mismatch fails naming the kernel")


def _cmd_inspect(args: argparse.Namespace) -> int:
    from ..bundle.kpack import Bundle
    from .describe import describe, device_choice, disassemble, load_any
    from .render import render, render_device

    obj = load_any(args.file, verify=args.verify)  # a bundle's artifacts verify every cubin against their ABI
    if args.device is not None:
        choice = device_choice(obj, args.device)
        if args.json:
            print(json.dumps(choice, indent=2, sort_keys=True))
        else:
            render_device(choice)
        return EXIT_OK if choice["runs"] else EXIT_NO_BINARY
    if args.verify and isinstance(obj, Bundle):
        bins = {id(b) for a in obj for b in a.binaries if b.kind == "cubin"}
        print(f"verified: {len(obj)} specialization{'s' * (len(obj) != 1)}, {len(bins)} cubin"
              f"{'s' * (len(bins) != 1)}: every kernel's ABI and launch block match its cubins", file=sys.stderr)
    desc = describe(obj, library=_is_library(args.file))
    if args.json:
        print(json.dumps(desc, indent=2, sort_keys=True))
    else:
        render(desc, verbose=args.verbose)
    if args.sass:
        print(disassemble(obj, args.file))
    return EXIT_OK


def _is_library(path: str) -> bool:
    """A library built by kernelpack (not a .kpack or a cubin): what ``inspect`` calls it."""
    from ..bundle.kpack import MAGIC
    from ..core.files import read_head

    try:
        head = read_head(path, 8, "file")
    except KernelpackError:
        return False
    return not head.startswith(MAGIC) and (head.startswith(b"!<arch>\n") or path.endswith((".so", ".a"))
                                           or ".so." in os.path.basename(path))


# ------------------------------------------------------------------------------------------------ demo


def _demo_args(d: argparse.ArgumentParser) -> None:
    d.add_argument("--out", default="kernelpack-demo", help="output directory (default: ./kernelpack-demo)")
    d.add_argument("--arch", action="append", default=None, help="target arch (repeatable; default sm_80, sm_90a)")


def _cmd_demo(args: argparse.Namespace) -> int:
    from ..core.publish import check_out_dir
    from .demo import run_demo

    check_out_dir(args.out, "--out")
    return run_demo(args.out, archs=args.arch)


# ------------------------------------------------------------------------------------------------ build


def _build_args(b: argparse.ArgumentParser) -> None:
    b.add_argument("inputs", nargs="*", metavar="PROJECT | NAME BUNDLE...",
                   help="a project file or directory (default: ./kernelpack.toml), or a library name and bundles")
    b.add_argument("-o", "--out", default=None, help="output directory (required by the NAME BUNDLE... form; for a "
                                                         "project, overrides [library] out)")
    b.add_argument("-p", "--project", default=None, help="project file or directory")
    b.add_argument("-j", "--jobs", type=int, default=None, help="parallel compile processes (default: CPU count)")
    b.add_argument("--force", action="store_true", help="rebuild every step and relink (the compile cache still "
                                                        "applies; KERNELPACK_CACHE_DIR=off for a cold build)")
    b.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors (no progress, no summary)")
    b.add_argument("-k", "--keep-going", action="store_true",
                   help="leave out the steps that fail and link the rest (the exit status is 1 and names them; "
                        "the next build tries them again)")
    b.add_argument("--json", action="store_true", help="print the build report as JSON on stdout")
    b.add_argument("--tuning", default=None, metavar="FILE", help="a kernelpack tune file to embed instead of "
                                                                  "[library] tuning ('none': build without one)")
    b.add_argument("--executor", choices=("local", "ray"), default=None,
                   help="where compile steps run: local processes, or Ray tasks (default: [build] executor, else "
                        "local; ray needs kernelpack[ray])")
    b.add_argument("--address", default=None, metavar="HOST:PORT",
                   help="the Ray cluster to run on (implies --executor ray; default: [build] address, else a local "
                        "Ray instance of -j CPUs started and stopped by the build)")
    b.add_argument("--watch", action="store_true",
                   help="build, then build again on every change of a file the project reads, with -j warm worker "
                        "processes that keep what your kernel modules import (torch, the DSLs) imported; Ctrl-C "
                        "stops (with --json: one build report per line)")


def _cmd_build(args: argparse.Namespace) -> int:
    from ..core.publish import check_out_dir

    if args.out is not None:
        check_out_dir(args.out, "-o/--out")
    if len(args.inputs) >= 2:
        if args.watch:
            raise UsageError("--watch builds a project; kernelpack build NAME BUNDLE... links bundles once")
        return _build_bundles(args)
    if args.watch and (args.executor == "ray" or args.address is not None):
        raise UsageError("--watch runs its warm workers here; it cannot build on Ray (--executor ray, --address)")
    from ..project.ui import run_build

    return run_build(args.project or (args.inputs[0] if args.inputs else None), jobs=args.jobs, force=args.force,
                     quiet=args.quiet, as_json=args.json, out=args.out, tuning=args.tuning,
                     executor=args.executor, address=args.address, verbose=args.verbose, watch=args.watch,
                     keep_going=args.keep_going)


def _build_bundles(args: argparse.Namespace) -> int:
    """The direct form: ``kernelpack build NAME BUNDLE... -o DIR``."""
    if len(args.inputs) < 2 or args.out is None:
        raise UsageError("kernelpack build NAME BUNDLE... needs -o DIR (or kernelpack build [PROJECT] for a "
                         "kernelpack.toml project)")
    from ..core.names import check_library_name

    check_library_name(args.inputs[0], "library name")
    try:
        from ..clib import build_library
    except ImportError as e:
        raise KernelpackError(f"the C library generator is not available in this install: {e}") from None
    result = build_library(args.inputs[0], args.inputs[1:], args.out)
    if args.json:
        print(json.dumps({"library": args.inputs[0], "outputs": {k: str(v) for k, v in vars(result).items()
                                                                 if isinstance(v, os.PathLike)}}, indent=1))
    else:
        print(result)
    return EXIT_OK


# ------------------------------------------------------------------------------------------------ tune


def _tune_args(t: argparse.ArgumentParser) -> None:
    t.add_argument("bundle", help="the .kpack bundle built without a tuning table")
    t.add_argument("--problems", required=True, metavar="FILE.py:NAME", help="the problem shapes per family")
    t.add_argument("-o", "--out", default="tuning.json", help="the tuning file to write (default: tuning.json)")
    t.add_argument("--warmup", type=int, default=10, help="launches before timing (default: 10)")
    t.add_argument("--reps", type=int, default=50, help="timed launches per config and shape; the median counts "
                                                        "(default: 50)")
    t.add_argument("--rounds", type=int, default=3, help="rounds timing every config in turn; each config's best "
                                                          "median counts (default: 3)")
    t.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default: 0)")


def _cmd_tune(args: argparse.Namespace) -> int:
    from ..tuning.tune import run_tune

    path = run_tune(args.bundle, args.problems, args.out, warmup=args.warmup, reps=args.reps, device=args.device,
                    rounds=args.rounds)
    print(path)
    return EXIT_OK


# ------------------------------------------------------------------------------------------------ wheel


def _wheel_args(w: argparse.ArgumentParser) -> None:
    w.add_argument("input", nargs="?", default=None, metavar="PROJECT",
                   help="a project file or directory (default: ./kernelpack.toml or a pyproject.toml with "
                        "[tool.kernelpack])")
    w.add_argument("-o", "--out", default=None, metavar="DIST", help="where the wheel goes (default: dist/ beside "
                                                                      "the project file)")
    w.add_argument("-p", "--project", default=None, help="project file or directory")
    w.add_argument("--with-library", action="store_true", help="also carry the C library, headers, CMake and "
                                                                "pkg-config files (NAME/lib, NAME/include)")
    w.add_argument("--platform", default=None, metavar="CPU", help="x86_64 or aarch64: the CPU of the machines that "
                                                                    "will load it (default: this machine's)")
    w.add_argument("-j", "--jobs", type=int, default=None, help="parallel compile processes (default: CPU count)")
    w.add_argument("--force", action="store_true", help="rebuild every step (the compile cache still applies)")
    w.add_argument("--overwrite", action="store_true", help="replace a wheel of the same name with other contents")
    w.add_argument("--split", choices=["arch"], default=None,
                   help="arch: one provider wheel NAME_smNx per arch family and a front wheel NAME that loads the "
                        "one matching the device (for kernel sets too big for one wheel)")
    w.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors and the wheel's path")


def _cmd_wheel(args: argparse.Namespace) -> int:
    from ..core.publish import check_out_dir

    if args.out is not None:
        check_out_dir(args.out, "-o/--out")
    from ..wheel.ui import run_wheel

    return run_wheel(args.project or args.input, dist=args.out, with_library=args.with_library, platform=args.platform,
                     jobs=args.jobs,
                     force=args.force, overwrite=args.overwrite, quiet=args.quiet, split=args.split)



# ------------------------------------------------------------------------------------------------ capture


def _capture_args(c: argparse.ArgumentParser) -> None:
    c.add_argument("-o", "--out", default="captured", help="the project directory (default: ./captured); an "
                                                              "existing capture there is merged into")
    c.add_argument("--device", default=None, metavar="NAME", help="capture without a GPU, answering device queries "
                                                                  "for NAME (h100, h200, b200, a100, ...; "
                                                                  "docs/capture.md); default: this machine's GPU")
    c.add_argument("--configs", default=None, metavar="first|all|cN|chosen",
                   help="which configs of an autotuned kernel the project builds: the first (GPU-less default), all, "
                        "config N, or on a GPU the ones the autotuner chose (default there)")
    c.add_argument("--name", default=None, help="the library name (default: the directory's name)")
    c.add_argument("--interpret", action="append", default=None, metavar="KERNEL",
                   help="run this Triton kernel with Triton's CPU interpreter during a GPU-less capture (for host "
                        "code that reads its results back); repeatable")
    c.add_argument("--native", action="store_true",
                   help="also record kernels the code launches through the CUDA driver itself (CUDA C++ built with "
                        "nvcc, whose host code computes the launch): each becomes a [[cubin]] entry")
    c.add_argument("--native-from", action="append", default=None, metavar="GLOB",
                   help="with --native: keep only kernels from libraries matching GLOB (a path or file name; "
                        "'memory' for images loaded from memory); default every library but the framework's own "
                        "(torch, the CUDA libraries, Triton); repeatable; implies --native")
    c.add_argument("-q", "--quiet", action="store_true", help="print nothing but what was skipped and errors")
    c.add_argument("--json", action="store_true", help="print the capture's report as JSON")
    c.add_argument("run", nargs=argparse.REMAINDER, metavar="-- python SCRIPT [ARGS]",
                   help="the command to run (python SCRIPT ARGS or python -m MODULE ARGS)")


def _cmd_capture(args: argparse.Namespace) -> int:
    if not [a for a in args.run if a != "--"]:
        raise UsageError("kernelpack capture: give the command to run after --: kernelpack capture -o DIR "
                         "[--device h200] -- python script.py [ARGS]")
    from ..capture.ui import run_capture

    return run_capture(args.run, out=args.out, device=args.device, configs=args.configs, name=args.name,
                       interpret=args.interpret or (), quiet=args.quiet, as_json=args.json, native=args.native,
                       native_from=args.native_from or ())


def _export_args(x: argparse.ArgumentParser) -> None:
    x.add_argument("input", nargs="?", default=None, metavar="PROJECT", help="a project file or directory")
    x.add_argument("-p", "--project", default=None, help="project file or directory")
    x.add_argument("--hf-kernels", required=True, metavar="DIR", help="the repository folder to write")
    x.add_argument("--platform", default=None, metavar="CPU", help="x86_64 or aarch64 (default: this machine's)")
    x.add_argument("-j", "--jobs", type=int, default=None, help="parallel compile processes (default: CPU count)")
    x.add_argument("--force", action="store_true", help="rebuild every step (the compile cache still applies)")
    x.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors and the variant's folder")


def _cmd_export(args: argparse.Namespace) -> int:
    from ..core.publish import check_out_dir

    check_out_dir(args.hf_kernels, "--hf-kernels")
    from ..wheel.ui import run_export

    return run_export(args.project or args.input, hf_kernels=args.hf_kernels, platform=args.platform,
                      jobs=args.jobs, force=args.force, quiet=args.quiet)


COMMANDS: tuple[Command, ...] = (
    Command("demo", "compile the example kernels, write a bundle and a C library, inspect them",
            "kernelpack demo compiles the example CUDA C++ kernels shipped with kernelpack for sm_80 and sm_90a (no "
            "GPU needed: NVRTC or nvcc), writes OUT/demo.kpack and the C/C++ library OUT/lib, and prints what inspect "
            "shows of them.", _demo_args, _cmd_demo),
    Command("inspect", "show kernels, parameters and resources of a cubin, bundle or library",
            "kernelpack inspect FILE shows what a .kpack bundle, a library built by kernelpack or a cubin holds: per "
            "kernel specialization its parameters and C types, its launch rule (block, grid, Triton config, dispatch "
            "order) and each binary's resources; per library the GPUs it runs on. --device ARCH answers which binary "
            "a device gets (exit status 3 when some kernel has none).", _inspect_args, _cmd_inspect),
    Command("build", "build a project (kernelpack.toml) or link bundles into a C/C++ library",
            "kernelpack build [PROJECT] compiles every kernel a kernelpack.toml (or a Python project module) lists, in "
            "parallel, rebuilding only what changed, and links the library; with --watch it then rebuilds on every "
            "change, with warm workers. kernelpack build NAME BUNDLE... -o DIR links .kpack bundles directly.",
            _build_args, _cmd_build),
    Command("tune", "time every config of a bundle's families on problem shapes (on a GPU) and write a tuning file "
                    "for kernelpack build",
            "kernelpack tune BUNDLE --problems FILE.py:NAME -o tuning.json times each config specialization of the "
            "families NAME describes (a dict {family: kernelpack.tuning.Problem}, or a function returning one) with "
            "CUDA events and writes the fastest per shape. See docs/tuning.md.", _tune_args, _cmd_tune),
    Command("wheel", "build a project's kernels as a Python wheel (pip install)",
            "kernelpack wheel [PROJECT] builds the project as kernelpack build does (incrementally) and writes "
            "NAME-VERSION-cp310-abi3-TAG.whl: the package NAME with the bundle, its own runtime, typed stubs and, with "
            "--with-library, the C library. Needs [library] version. See docs/wheels.md.", _wheel_args, _cmd_wheel),
    Command("capture", "run your PyTorch code and write the kernelpack project of every Triton, cuTile and CuTe "
                       "DSL kernel it launches",
            "kernelpack capture -o DIR [--device h200] -- python script.py [ARGS] runs the script in this process, "
            "records every Triton, cuTile and CuTe DSL launch with the signature the DSL's own binder derives, and "
            "writes (or merges into) the project DIR: kernelpack.toml, capture_args.py, capture.json. With --device "
            "and no GPU, CPU tensors stand in for CUDA tensors and kernels are not run. See docs/capture.md.",
            _capture_args, _cmd_capture),
    Command("export", "write a project's kernels in another ecosystem's layout",
            "kernelpack export --hf-kernels DIR [PROJECT] builds the project and writes a Hugging Face kernel-hub "
            "repository (build/<variant>/ with metadata.json) that the kernels package loads. See docs/wheels.md.",
            _export_args, _cmd_export),
)


# ------------------------------------------------------------------------------------------------ the parser


class _Parser(argparse.ArgumentParser):
    """argparse, raising its usage errors (so ``--json`` can answer them and the status is :data:`EXIT_USAGE`)."""

    def error(self, message: str) -> NoReturn:
        raise _Usage(message, self.format_usage())


class _Usage(Exception):
    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.message, self.usage = message, usage


def _common(p: argparse.ArgumentParser, top: bool) -> None:
    """The options every subcommand takes, before its name or after (one after overrides none before)."""
    from ..core.version import __version__

    keep: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
    p.add_argument("--debug", action="store_true", help="print the traceback of an error", **keep)
    p.add_argument("-v", "--verbose", action="store_true", help="more detail (every output path, the slowest steps, "
                                                                  "every kernel row; inspect: provenance and hashes)",
                   **keep)
    p.add_argument("--version", action="version", version=f"kernelpack {__version__}",
                   help="print kernelpack's version and exit")


def make_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kernelpack", description="Compile GPU kernels once; ship them anywhere. Exit status: 0 ok, 1 "
                                               "failed, 2 usage error, 3 inspect --device found a kernel with no "
                                               "binary, 70 internal error, 130 interrupted (docs/cli.md).")
    _common(p, top=True)
    common = _Parser(add_help=False)
    _common(common, top=False)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for c in COMMANDS:
        sp = sub.add_parser(c.name, parents=[common], help=c.help, description=c.description)
        c.arguments(sp)
        sp.set_defaults(func=c.run)
    return p


def error_object(e: BaseException, status: int) -> dict[str, Any]:
    """What ``--json`` prints on stdout when a command fails: ``{"error": {"status": 1, "kind": "failed", "type":
    "ProjectError", "message": "...", "log": "..." or null}}``; ``kind`` is one of usage, failed, internal,
    interrupted."""
    kind = {EXIT_USAGE: "usage", EXIT_INTERNAL_ERROR: "internal", EXIT_INTERRUPTED: "interrupted"}.get(status,
                                                                                                   "failed")
    if isinstance(e, KernelpackError):
        message, log = e.message, e.log
    elif isinstance(e, OSError):
        message, log = f"{e.strerror or e}{f': {e.filename}' if e.filename else ''}", None
    elif isinstance(e, _Usage):
        message, log = e.message, None
    else:
        message, log = str(e) or type(e).__name__, None
    return {"error": {"status": status, "kind": kind, "type": type(e).__name__ if not isinstance(e, _Usage)
                      else "UsageError", "message": message, "log": log}}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        with _pipe_errors_raised():
            return _main(argv)
    except BrokenPipeError:
        return _quiet_broken_pipe()


@contextlib.contextmanager
def _pipe_errors_raised() -> Iterator[None]:
    """rich answers a closed stdout with ``SystemExit(1)`` (``Console.on_broken_pipe``); while a command runs it
    raises BrokenPipeError instead, which :func:`main` answers as every other write to a closed pipe."""
    try:
        from rich.console import Console
    except ImportError:  # pragma: no cover - rich is a dependency
        yield
        return

    def on_broken_pipe(self: Any) -> None:
        raise BrokenPipeError

    saved = Console.on_broken_pipe
    Console.on_broken_pipe = on_broken_pipe  # type: ignore[method-assign]
    try:
        yield
    finally:
        Console.on_broken_pipe = saved  # type: ignore[method-assign]


def _main(argv: list[str]) -> int:
    as_json = "--json" in argv
    try:
        args = make_parser().parse_args(argv)
    except _Usage as e:
        print(e.usage.rstrip(), file=sys.stderr)
        print(f"kernelpack: error: {e.message}", file=sys.stderr)
        return _report_json(e, EXIT_USAGE, as_json)
    debug = bool(getattr(args, "debug", False))
    as_json = bool(getattr(args, "json", False))
    try:
        return int(args.func(args))
    except BrokenPipeError:
        raise
    except KeyboardInterrupt as e:
        print("kernelpack: interrupted", file=sys.stderr)
        return _report_json(e, EXIT_INTERRUPTED, as_json)
    except UsageError as e:
        _traceback(debug)
        print(f"kernelpack: error: {e.message}", file=sys.stderr)
        return _report_json(e, EXIT_USAGE, as_json)
    except KernelpackError as e:
        _traceback(debug)
        print(f"kernelpack: error: {e.message}", file=sys.stderr)
        if e.log:
            print(f"--- log ---\n{e.log.rstrip()}", file=sys.stderr)
        return _report_json(e, EXIT_FAILED, as_json)
    except OSError as e:  # the environment, not kernelpack: a file that cannot be read or written, a full disk
        _traceback(debug)
        where = f": {e.filename}" if e.filename else ""
        print(f"kernelpack: error: {e.strerror or e}{where}", file=sys.stderr)
        return _report_json(e, EXIT_FAILED, as_json)
    except Exception as e:
        _traceback(debug)
        print(f"kernelpack: internal error: {type(e).__name__}: {e} (a bug in kernelpack; "
              f"{'see the traceback above' if debug else 'rerun with --debug for the traceback'} and report it)",
              file=sys.stderr)
        return _report_json(e, EXIT_INTERNAL_ERROR, as_json)


def _report_json(e: BaseException, status: int, as_json: bool) -> int:
    if as_json:
        print(json.dumps(error_object(e, status), indent=1))
    return status


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away (``| head``): nothing more is written, nothing is said, and Python's flush of
    stdout at exit is pointed at /dev/null so it cannot complain either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (a test's capture): nothing to silence
        pass
    return EXIT_BROKEN_PIPE


def _traceback(debug: bool) -> None:
    if debug:
        traceback.print_exc()


if __name__ == "__main__":
    sys.exit(main())
