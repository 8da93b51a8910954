#!/usr/bin/env bash
# On the GPU machine: build the runtime's extensions in place for its python3 (launch path + torch bridge
# against its torch), run the runtime tests (fake-driver CPU tests, then GPU tests) and the launch benchmark.
# Artifacts come from .gpu/runtime (scripts/gpu_runtime_prepare.py on the build machine) and .gpu/launchcost
# (scripts/gpu_prepare_launchcost.py: the argument-count kernels, their C library, and the runtime's sources before
# the launch-cost work, benchmarked first in the same session for the before/after ratios). Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 KERNELPACK_GPU_ARTIFACTS=$PWD/.gpu KERNELPACK_CACHE_DIR=off
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | tee "$OUT/machine.txt"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" | tee -a "$OUT/machine.txt"
rm -rf build src/kernelpack/runtime/*.so
( time python3 setup.py -q build_ext --inplace ) > "$OUT/build.log" 2>&1
ls src/kernelpack/runtime/*.so | tee -a "$OUT/build.log"
status=0
if [ -z "${SKIP_TESTS:-}" ]; then
  python3 -m pytest -q -p no:cacheprovider --tb=short ${CPU_TESTS:-tests/test_runtime_launch.py tests/test_runtime_bridge.py tests/test_runtime_plan.py tests/test_runtime_derived.py tests/test_descriptor_launch.py tests/test_runtime_singletons.py tests/test_clib_build.py} > "$OUT/cpu_tests.log" 2>&1
  grep -E "^(FAILED|ERROR)|^E |passed|failed" "$OUT/cpu_tests.log" | tail -n 30
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_runtime_gpu.py 2>&1 | tee "$OUT/gpu_tests.log"
  status=${PIPESTATUS[0]}
fi
if [ -z "${SKIP_BENCH:-}" ]; then
  BEFORE=.gpu/launchcost/before
  if [ -d "$BEFORE/src" ] && [ -z "${SKIP_BEFORE:-}" ]; then  # the runtime before the launch-cost work, same bench
    ( cd "$BEFORE" && rm -rf build src/kernelpack/runtime/*.so && python3 setup.py -q build_ext --inplace ) \
      > "$OUT/build_before.log" 2>&1 || tail -5 "$OUT/build_before.log"
    echo "=== before (runtime from $BEFORE)" | tee "$OUT/bench_before.log"
    PYTHONPATH=$PWD/$BEFORE/src python3 bench/launch_overhead.py --json "$OUT/bench_before.json" 2>&1 \
      | tee -a "$OUT/bench_before.log"
  fi
  echo "=== after (runtime from src/)"
  python3 bench/launch_overhead.py --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.log"
fi
exit $status
