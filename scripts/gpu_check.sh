#!/usr/bin/env bash
# On the GPU machine (no network, no DSLs): use kernelpack from src/ with the machine's python3 (torch, triton,
# cuda-bindings, pytest live in its own venv), run the GPU tests against the artifacts carried in .gpu/,
# then the benchmarks named in $GPU_BENCH. Logs go to $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KERNELPACK_GPU_ARTIFACTS=$PWD/.gpu KERNELPACK_CACHE_DIR=off
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | tee "$OUT/machine.txt"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
PY=python3
if [ -z "${SKIP_BUILD:-}" ]; then  # the runtime's extensions, built in place for this machine's python3 and torch
  rm -rf build src/kernelpack/runtime/*.so
  ( time $PY setup.py -q build_ext --inplace ) > "$OUT/build.log" 2>&1 || tail -20 "$OUT/build.log"
  ls src/kernelpack/runtime/*.so
fi
$PY -m pytest -m gpu -q -rs -p no:cacheprovider --junitxml="$OUT/gpu_tests.xml" ${GPU_TESTS:-tests} 2>&1 | tee "$OUT/gpu_tests.log"
status=${PIPESTATUS[0]}
for b in ${GPU_BENCH:-}; do
  echo "=== $b"; $PY "$b" 2>&1 | tee -a "$OUT/bench.log"
done
exit $status
