#!/usr/bin/env bash
# On the GPU machine (no network, no DSLs): install kernelpack into a venv over the system packages, run the
# GPU tests against the artifacts carried in .gpu/, then the benchmarks. Logs go to $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KERNELPACK_GPU_ARTIFACTS=$PWD/.gpu KERNELPACK_CACHE_DIR=off
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | tee "$OUT/machine.txt"
python3 -m venv --system-site-packages /tmp/kpv >/dev/null
/tmp/kpv/bin/pip install -q --no-build-isolation --no-deps -e . 2>&1 | tail -3
PY=/tmp/kpv/bin/python
$PY -m pytest -m gpu -q -p no:cacheprovider ${GPU_TESTS:-tests} 2>&1 | tee "$OUT/gpu_tests.log"
status=${PIPESTATUS[0]}
for b in ${GPU_BENCH:-}; do
  echo "=== $b"; $PY "$b" 2>&1 | tee -a "$OUT/bench.log"
done
exit $status
