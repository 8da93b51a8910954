"""Build-machine half of tests/test_tuning_gpu.py: every config of the autotuned Triton matmul
(tests/tuning_gpu_kernels.py) compiled here for sm_90a as one family, written to .gpu/ranges/matmul_configs.kpack.

    PYTHONPATH=src:tests python scripts/gpu_prepare_tuning.py [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main() -> int:
    from tuning_gpu_kernels import compile_bundle

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / ".gpu" / "ranges"
    out.mkdir(parents=True, exist_ok=True)
    path = compile_bundle("sm_90a").write(out / "matmul_configs.kpack")
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
