"""The ``kernelpack`` command line: demo, inspect, build, tune, wheel, capture.

Exit status: 0 success; 2 a user error — any :class:`KernelpackError` (bad project file, compile error, build
failure...) or an ``OSError`` from the environment (unreadable input, unwritable output, full disk) — reported as one
line ``kernelpack: error: ...`` on stderr, followed by the tool's log where there is one; 1 an internal error (a bug
in kernelpack: one line, ``--debug`` shows the traceback); 130 interrupted (Ctrl-C: one line, no traceback).
``--debug`` prints the traceback of any error.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Sequence

from ..core.errors import KernelpackError

EXIT_USER_ERROR = 2
EXIT_INTERNAL_ERROR = 1
EXIT_INTERRUPTED = 130


def _cmd_inspect(args: argparse.Namespace) -> int:
    from ..bundle.kpack import Bundle
    from .describe import describe, device_choice, disassemble, load_any, render, render_device

    obj = load_any(args.file, verify=args.verify)  # a bundle's artifacts verify every cubin against their ABI
    if args.device is not None:
        choice = device_choice(obj, args.device)
        if args.json:
            print(json.dumps(choice, indent=2, sort_keys=True))
        else:
            render_device(choice)
        return 0
    if args.verify and isinstance(obj, Bundle):
        bins = {id(b) for a in obj for b in a.binaries if b.kind == "cubin"}
        print(f"verified: {len(obj)} specialization{'s' * (len(obj) != 1)}, {len(bins)} cubin"
              f"{'s' * (len(bins) != 1)}: every kernel's ABI and launch block match its cubins", file=sys.stderr)
    if args.json:
        print(json.dumps(describe(obj), indent=2, sort_keys=True))
    else:
        render(describe(obj))
    if args.sass:
        print(disassemble(obj, args.file))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from ..core.publish import check_out_dir
    from .demo import run_demo

    check_out_dir(args.out, "--out")
    return run_demo(args.out, archs=args.arch)


def _cmd_build(args: argparse.Namespace) -> int:
    from ..core.publish import check_out_dir

    if args.out is not None:
        check_out_dir(args.out, "-o/--out")
    if len(args.inputs) >= 2:
        return _build_bundles(args)
    from ..project.ui import run_build

    return run_build(args.project or (args.inputs[0] if args.inputs else None), jobs=args.jobs, force=args.force,
                     quiet=args.quiet, as_json=args.json, out=args.out, tuning=args.tuning,
                     executor=args.executor, address=args.address, keep_going=args.keep_going)


def _build_bundles(args: argparse.Namespace) -> int:
    """The direct form: ``kernelpack build NAME BUNDLE... -o DIR``."""
    if len(args.inputs) < 2 or args.out is None:
        raise KernelpackError("usage: kernelpack build NAME BUNDLE... -o DIR (or kernelpack build [PROJECT] for a "
                              "kernelpack.toml project)")
    from ..core.names import check_library_name

    check_library_name(args.inputs[0], "library name")
    try:
        from ..clib import build_library
    except ImportError as e:
        raise KernelpackError(f"the C library generator is not available in this install: {e}") from None
    result = build_library(args.inputs[0], args.inputs[1:], args.out)
    print(result)
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    from ..tuning.tune import run_tune

    path = run_tune(args.bundle, args.problems, args.out, warmup=args.warmup, reps=args.reps, device=args.device,
                    rounds=args.rounds)
    print(path)
    return 0


def _cmd_wheel(args: argparse.Namespace) -> int:
    from ..core.publish import check_out_dir

    if args.out is not None:
        check_out_dir(args.out, "-o/--out")
    from ..wheel.ui import run_wheel

    return run_wheel(args.project or args.input, dist=args.out, with_library=args.with_library, platform=args.platform,
                     jobs=args.jobs,
                     force=args.force, overwrite=args.overwrite, quiet=args.quiet)


def _cmd_capture(args: argparse.Namespace) -> int:
    from ..capture.ui import run_capture

    return run_capture(args.run, out=args.out, device=args.device, configs=args.configs, name=args.name,
                       interpret=args.interpret or (), quiet=args.quiet, as_json=args.json)


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernelpack", description="Compile GPU kernels once; ship them anywhere.")
    debug_help = "print the traceback of an error"
    p.add_argument("--debug", action="store_true", help=debug_help)
    common = argparse.ArgumentParser(add_help=False)  # --debug after the command too (not overriding one before)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug_help)
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", parents=[common],
                       help="compile the example kernels, write a bundle and a C library, inspect them")
    d.add_argument("--out", default="kernelpack-demo", help="output directory (default: ./kernelpack-demo)")
    d.add_argument("--arch", action="append", default=None, help="target arch (repeatable; default sm_80, sm_90a)")
    d.set_defaults(func=_cmd_demo)

    i = sub.add_parser("inspect", parents=[common],
                       help="show kernels, parameters and resources of a cubin, bundle or library")
    i.add_argument("file")
    i.add_argument("--json", action="store_true", help="machine-readable output")
    i.add_argument("--sass", action="store_true", help="also print the SASS disassembly (needs cuobjdump)")
    i.add_argument("--device", metavar="ARCH", default=None,
                   help="only say which binary a device of this arch (sm_120; need not be here) gets from each kernel")
    i.add_argument("--verify", action="store_true",
                   help="verify every kernel's ABI against its cubins (what kernelpack.load defers to each kernel's "
                        "first use) and say so; a mismatch fails naming the kernel")
    i.set_defaults(func=_cmd_inspect)

    b = sub.add_parser("build", parents=[common],
                       help="build a project (kernelpack.toml) or link bundles into a C/C++ library",
                       description="kernelpack build [PROJECT] compiles every kernel a kernelpack.toml (or a Python "
                                   "project module) lists, in parallel, rebuilding only what changed, and links the "
                                   "library. kernelpack build NAME BUNDLE... -o DIR links .kpack bundles directly.")
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
                   help="leave out the steps that fail and link the rest (the exit status is still 2 and names them; "
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
    b.set_defaults(func=_cmd_build)

    t = sub.add_parser("tune", parents=[common], help="time every config of a bundle's families on problem shapes "
                                                      "(on a GPU) and write a tuning file for kernelpack build",
                       description="kernelpack tune BUNDLE --problems FILE.py:NAME -o tuning.json times each config "
                                   "specialization of the families NAME describes (a dict {family: "
                                   "kernelpack.tuning.Problem}, or a function returning one) with CUDA events and "
                                   "writes the fastest per shape. See docs/tuning.md.")
    t.add_argument("bundle", help="the .kpack bundle built without a tuning table")
    t.add_argument("--problems", required=True, metavar="FILE.py:NAME", help="the problem shapes per family")
    t.add_argument("-o", "--out", default="tuning.json", help="the tuning file to write (default: tuning.json)")
    t.add_argument("--warmup", type=int, default=10, help="launches before timing (default: 10)")
    t.add_argument("--reps", type=int, default=50, help="timed launches per config and shape; the median counts "
                                                        "(default: 50)")
    t.add_argument("--rounds", type=int, default=3, help="rounds timing every config in turn; each config's best "
                                                          "median counts (default: 3)")
    t.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default: 0)")
    t.set_defaults(func=_cmd_tune)

    c = sub.add_parser("capture", parents=[common], help="run your PyTorch code and write the kernelpack project of "
                                                         "every Triton, cuTile and CuTe DSL kernel it launches",
                       description="kernelpack capture -o DIR [--device h200] -- python script.py [ARGS] runs the "
                                   "script in this process, records every Triton, cuTile and CuTe DSL launch with "
                                   "the signature the DSL's own binder derives, and writes (or merges into) the "
                                   "project DIR: kernelpack.toml, capture_args.py, capture.json. With --device and "
                                   "no GPU, CPU tensors stand in for CUDA tensors and kernels are not run. See "
                                   "docs/capture.md.")
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
    c.add_argument("-q", "--quiet", action="store_true", help="print nothing but what was skipped and errors")
    c.add_argument("--json", action="store_true", help="print the capture's report as JSON")
    c.add_argument("run", nargs=argparse.REMAINDER, metavar="-- python SCRIPT [ARGS]",
                   help="the command to run (python SCRIPT ARGS or python -m MODULE ARGS)")
    c.set_defaults(func=_cmd_capture)

    w = sub.add_parser("wheel", parents=[common], help="build a project's kernels as a Python wheel (pip install)",
                       description="kernelpack wheel [PROJECT] builds the project as kernelpack build does "
                                   "(incrementally) and writes NAME-VERSION-py3-none-TAG.whl: the package NAME with "
                                   "the bundle, typed stubs and, with --with-library, the C library. Needs [library] "
                                   "version. See docs/wheels.md.")
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
    w.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors and the wheel's path")
    w.set_defaults(func=_cmd_wheel)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    debug = bool(getattr(args, "debug", False))
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("kernelpack: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KernelpackError as e:
        _traceback(debug)
        print(f"kernelpack: error: {e.message}", file=sys.stderr)
        if e.log:
            print(f"--- log ---\n{e.log.rstrip()}", file=sys.stderr)
        return EXIT_USER_ERROR
    except OSError as e:  # the environment, not kernelpack: a file that cannot be read or written, a full disk
        _traceback(debug)
        where = f": {e.filename}" if e.filename else ""
        print(f"kernelpack: error: {e.strerror or e}{where}", file=sys.stderr)
        return EXIT_USER_ERROR
    except Exception as e:
        _traceback(debug)
        print(f"kernelpack: internal error: {type(e).__name__}: {e} (a bug in kernelpack; "
              f"{'see the traceback above' if debug else 'rerun with --debug for the traceback'} and report it)",
              file=sys.stderr)
        return EXIT_INTERNAL_ERROR


def _traceback(debug: bool) -> None:
    if debug:
        traceback.print_exc()


if __name__ == "__main__":
    sys.exit(main())
