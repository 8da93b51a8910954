#!/usr/bin/env bash
# On the GPU-less build machine: compile every artifact the GPU run needs into .gpu/ (git-ignored, carried).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu
python3 - <<'PY'
from kernelpack.demo import compile_examples
path = compile_examples(("sm_80", "sm_90a")).write(".gpu/demo.kpack")
print("wrote", path, path.stat().st_size, "bytes")
PY
if [ -x scripts/gpu_prepare_extra.sh ]; then scripts/gpu_prepare_extra.sh; fi
du -sh .gpu
