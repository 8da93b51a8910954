#!/usr/bin/env python3
"""On the GPU-less build machine: compile the Triton (3.9 here) and cuTile bundles the GPU tests run, into
.gpu/frontends/{triton,cutile}.kpack (git-ignored, carried). The GPU machine has Triton 3.6 and no cuTile, so these
artifacts, not ones compiled there, are what the tests check."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import frontend_builds as fb  # noqa: E402


def main() -> None:
    out = ROOT / ".gpu" / "frontends"
    out.mkdir(parents=True, exist_ok=True)
    for name, build in (("triton.kpack", fb.triton_bundle), ("cutile.kpack", fb.cutile_bundle)):
        bundle = build()
        path = bundle.write(out / name)
        labels = ", ".join(f"{a.label}({'/'.join(map(str, a.archs))})" for a in bundle)
        print(f"wrote {path} ({path.stat().st_size} bytes): {labels}")


if __name__ == "__main__":
    main()
