"""The ``kernelpack`` command line: demo, inspect, build."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .errors import KernelpackError


def _cmd_inspect(args: argparse.Namespace) -> int:
    from .describe import describe, disassemble, load_any, render

    obj = load_any(args.file)
    if args.json:
        print(json.dumps(describe(obj), indent=2, sort_keys=True))
    else:
        render(describe(obj))
    if args.sass:
        print(disassemble(obj, args.file))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args.out, archs=args.arch)


def _cmd_build(args: argparse.Namespace) -> int:
    try:
        from .clib import build_library
    except ImportError as e:
        raise KernelpackError(f"the C library generator is not available in this install: {e}") from None
    result = build_library(args.name, args.inputs, args.out)
    print(result)
    return 0


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernelpack", description="Compile GPU kernels once; ship them anywhere.")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="compile the example kernels, write a bundle and a C library, inspect them")
    d.add_argument("--out", default="kernelpack-demo", help="output directory (default: ./kernelpack-demo)")
    d.add_argument("--arch", action="append", default=None, help="target arch (repeatable; default sm_80, sm_90a)")
    d.set_defaults(func=_cmd_demo)

    i = sub.add_parser("inspect", help="show kernels, parameters and resources of a cubin, bundle or library")
    i.add_argument("file")
    i.add_argument("--json", action="store_true", help="machine-readable output")
    i.add_argument("--sass", action="store_true", help="also print the SASS disassembly (needs cuobjdump)")
    i.set_defaults(func=_cmd_inspect)

    b = sub.add_parser("build", help="link bundles into a C/C++ library (libNAME.so/.a + NAME.h/.hpp)")
    b.add_argument("name", help="library name (a C identifier)")
    b.add_argument("inputs", nargs="+", help=".kpack bundles")
    b.add_argument("-o", "--out", required=True, help="output directory")
    b.set_defaults(func=_cmd_build)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KernelpackError as e:
        print(f"kernelpack: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
