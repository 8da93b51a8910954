#!/usr/bin/env python3
"""kernelpack's conformance corpus: real third-party kernels, compiled without a GPU, linked, checked.

    python scripts/corpus.py                          # the whole corpus -> build/corpus/, docs/corpus.md
    python scripts/corpus.py --reduced                # a few kernels per package and DSL (what CI runs)
    python scripts/corpus.py --package liger --dsl triton --case rms_norm -j 2
    python scripts/corpus.py --report-only            # re-render docs/corpus.md from build/corpus/results.json
    python scripts/corpus.py --gpu-prepare            # also copy what the GPU run needs into .gpu/corpus/

Packages (pinned: liger-kernel 0.8.5, flashinfer-python 0.7.2.post1) must be importable: install them with
``pip install --no-deps --target DIR`` and put DIR on PYTHONPATH after kernelpack's src (see docs/corpus.md).
A package that is missing is reported and skipped. To compile Triton kernels with the GPU machine's Triton (3.6),
put a Triton 3.6 install first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if str(ROOT / "src") not in sys.path:
    sys.path.insert(1, str(ROOT / "src"))

PACKAGES = {"liger": ("triton", "cutile", "cute"), "flashinfer": ("cuda", "cute")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--package", action="append", choices=sorted(PACKAGES), help="default: all")
    ap.add_argument("--dsl", action="append", help="triton, cutile, cute, cuda (default: all)")
    ap.add_argument("--case", action="append", default=[], help="only these case ids")
    ap.add_argument("--reduced", action="store_true", help="only the cases marked reduced (CI)")
    ap.add_argument("--arch", action="append", help="override each corpus file's archs (e.g. sm_80)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "corpus")
    ap.add_argument("--report", type=Path, default=None, help="markdown report (default: docs/corpus.md for a "
                    "full run, none for --reduced/--case runs)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--gpu-prepare", action="store_true", help="copy the libraries, manifest and liger's "
                    "pure-Python package into .gpu/corpus/ for scripts/corpus_gpu.py")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9 warns when unset; 1 is its default

    from corpus import report
    from corpus.pipeline import Options
    from corpus.results import read_results, write_results
    from corpus.run import run

    full = not (args.reduced or args.case or args.arch or args.package or args.dsl)
    report_path = args.report or (ROOT / "docs" / "corpus.md" if full or args.report_only else None)
    if args.report_only:
        meta, sections = read_results(args.out / "results.json")
    else:
        opts = Options(archs=tuple(args.arch or ()), jobs=args.jobs, reduced=args.reduced, cases=tuple(args.case),
                       progress=(lambda s: None) if args.quiet else (lambda s: print(s, flush=True)))
        t = time.time()
        packages = args.package or sorted(PACKAGES)
        meta, sections = run(packages, tuple(args.dsl or ()), opts, args.out)
        meta["seconds"] = round(time.time() - t, 1)
        meta["command"] = " ".join(["scripts/corpus.py", *(argv if argv is not None else sys.argv[1:])])
        write_results(args.out / "results.json", sections, meta)
    table = report.table(sections)
    print(table)
    if report_path is not None:
        report.write(report_path, meta, sections)
        print(f"wrote {report_path}")
    if args.gpu_prepare:
        from corpus.gpu_prepare import prepare

        print(json.dumps(prepare(args.out, ROOT / ".gpu" / "corpus"), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
