#!/usr/bin/env python3
"""The corpus on the GPU machine: every compiled kernel launched from Python and C++, checked and timed.

    python scripts/gpu.py prepare corpus corpus_fi             # build machine: fills .gpu/corpus/, .gpu/corpus-fi/
    python3 scripts/corpus_gpu.py                              # GPU machine (torch, Triton 3.6; no cuTile/CuTe)
    python3 scripts/corpus_gpu.py --case rms_norm --reps 5 --out report.md
    python3 scripts/corpus_gpu.py --shard 2/3                  # every 3rd Triton case from the 2nd
    python3 scripts/corpus_gpu.py --dsl cute                   # only the CuTe rows (or cutile, triton)
    python3 scripts/corpus_gpu.py --package flashinfer --out $OUT   # FlashInfer (.gpu/corpus-fi)
    python3 scripts/corpus_gpu.py --package flashinfer --dry-run    # anywhere: load the library, check the manifest

liger (corpus/gpu_run.py): Triton kernels: liger's wrappers run on CUDA tensors; each launch runs liger's Triton JIT
(the reference), then kernelpack's Python runtime and the library's C entry through a C++ driver compiled here with
g++ against the C library, from the same starting state; every tensor argument must match, NaN-filled fresh tensors
catch elements never written. cuTile and CuTe kernels (neither DSL is on the GPU machine): the launch recorded at
capture time (argument dtypes, shapes, strides, scalars, grid; a CuTe host program's arguments) on fresh random
inputs, C++ == Python bit for bit, and for CuTe kernels with a known op (rms_norm forward, scale-in-place,
cross-entropy forward) Python against a float64 torch reference.

flashinfer (corpus/flashinfer_gpu.py): each kernel family and host program, each variant, from C++ (a g++ harness
over the typed C entries) and Python, on fresh inputs, each against a float64 torch reference.

Time (corpus/gpu_timing.py): kernel time of back-to-back launches queued behind a sleep kernel (the GPU has a
backlog: the events measure GPU execution, not the host's launch cost), package vs kernelpack (target: within 3%),
and the host time per launch, apart. A failing kernel or case is reported and the run continues. The markdown table
goes to stdout and to --out (a .md file, or a folder for the default names); both packages share corpus/gpu_runner.py.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--package", choices=("liger", "flashinfer"), default="liger")
    ap.add_argument("--dir", type=Path, default=None, help="what gpu.py prepare wrote (default: .gpu/corpus, "
                    ".gpu/corpus-fi for flashinfer)")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions per launch (0: no timing; default 20, "
                    "50 for flashinfer)")
    ap.add_argument("--out", type=Path, default=None, help="markdown report: a .md file or a folder (default: $OUT "
                    "when set, else <dir> for liger, /tmp/kp-out for flashinfer)")
    liger = ap.add_argument_group("liger")
    liger.add_argument("--case", action="append", default=[], help="only these Triton case ids")
    liger.add_argument("--dsl", action="append", choices=("triton", "cutile", "cute"), default=[],
                       help="only these DSLs' rows (default: all)")
    liger.add_argument("--shard", default="1/1", help="K/N: only every N-th Triton case starting at the K-th (the JIT "
                       "compiles each kernel on first launch: split the run to fit a command's time limit); cuTile "
                       "and CuTe rows come with shard 1")
    fi = ap.add_argument_group("flashinfer")
    fi.add_argument("--only", action="append", help="only these families / host programs")
    fi.add_argument("--dry-run", action="store_true", help="load the library and check the manifest; no GPU")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    from corpus.gpu_runner import report_file, write_report

    if args.package == "flashinfer":
        from corpus.flashinfer_gpu import run

        folder = report_file(args.out, "corpus_gpu_flashinfer.md", Path("/tmp/kp-out")).parent
        return run(args.dir or ROOT / ".gpu" / "corpus-fi", folder, 50 if args.reps is None else args.reps, args.only,
                   args.dry_run)
    from corpus.gpu_run import run_liger

    gpu_dir = args.dir or ROOT / ".gpu" / "corpus"
    k, n = (int(x) for x in args.shard.split("/"))
    table = run_liger(gpu_dir, args.case, set(args.dsl or ("triton", "cutile", "cute")), (k, n),
                      20 if args.reps is None else args.reps)
    write_report(report_file(args.out, "corpus_gpu.md" if n == 1 else f"corpus_gpu_{k}of{n}.md", gpu_dir), table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
