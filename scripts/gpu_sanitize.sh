#!/usr/bin/env bash
# On the GPU machine: the end-to-end GPU tests of every frontend under compute-sanitizer memcheck and racecheck.
# One run per (tool, frontend) on a representative subset (-k), with --target-processes all so the C/C++ programs
# the tests start are checked too. Prints one summary line per run with the error count; logs go to $OUT.
# Artifacts come from .gpu/ (scripts/gpu_prepare.sh on the build machine), as for scripts/gpu_check.sh.
#
#   OUT=/tmp/kp-out bash scripts/gpu_sanitize.sh            # both tools, every frontend (about 6-7 minutes)
#   TOOLS=memcheck FRONTENDS="cuda clib" bash scripts/gpu_sanitize.sh
# Driver API calls that fail on purpose are not counted (SANITIZER_ARGS defaults to --report-api-errors no): the C
# library's one-device path launches first and binds a context only on CUDA_ERROR_INVALID_CONTEXT, and the tests
# provoke refusals. SANITIZER_ARGS="--report-api-errors explicit" shows them.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kp-out}; mkdir -p "$OUT/sanitize"
export PYTHONUNBUFFERED=1 KERNELPACK_GPU_ARTIFACTS=$PWD/.gpu KERNELPACK_CACHE_DIR=off KERNELPACK_CONCURRENCY_REPS=${KERNELPACK_CONCURRENCY_REPS:-2}
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
SAN=${SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
PER_RUN_S=${PER_RUN_S:-180}
if ! ls src/kernelpack/runtime/_launch*.so >/dev/null 2>&1 || [ -n "${REBUILD:-}" ]; then
  rm -rf build src/kernelpack/runtime/*.so
  python3 setup.py -q build_ext --inplace > "$OUT/sanitize/build.log" 2>&1 || tail -20 "$OUT/sanitize/build.log"
fi

# frontend -> "test files|-k expression" (a representative subset: every kind of launch, small sizes)
declare -A SUBSET=(
  [cuda]="tests/test_gpu_cuda.py|"
  [clib]="tests/test_clib_gpu.py|c_program or static_archive"
  [runtime]="tests/test_runtime_gpu.py|add_is_right or every_scalar or struct_by_value or tensor_descriptor or hidden or dynamic_shared or clusters"
  [triton]="tests/test_triton_gpu.py|vector_add or axpy or scratch or tma_descriptors_and_scratch"
  [cute]="tests/test_cute_gpu.py|elementwise or policy or kernel_level or fresh_thread"
  [cutile]="tests/test_cutile_gpu.py|vector_add or through_kernelpack_load"
  [cpp]="tests/test_frontends_cpp_gpu.py|"
  [concurrency]="tests/test_concurrency_gpu.py|"
)
FRONTENDS=${FRONTENDS:-"cuda clib runtime triton cute cutile cpp concurrency"}
TOOLS=${TOOLS:-"memcheck racecheck"}
summary="$OUT/sanitize/summary.txt"; : > "$summary"
start=$SECONDS status=0
for tool in $TOOLS; do
  for fe in $FRONTENDS; do
    IFS='|' read -r files expr <<< "${SUBSET[$fe]}"
    ls $files >/dev/null 2>&1 || { echo "$tool $fe: SKIPPED (no $files)" | tee -a "$summary"; continue; }
    dir="$OUT/sanitize/$tool-$fe"; rm -rf "$dir"; mkdir -p "$dir"
    t0=$SECONDS
    timeout "$PER_RUN_S" "$SAN" --tool "$tool" --target-processes all --log-file "$dir/proc.%p.log" \
      --print-limit 20 ${SANITIZER_ARGS:---report-api-errors no} \
      python3 -m pytest -q -p no:cacheprovider -m gpu -x ${expr:+-k "$expr"} $files > "$dir/pytest.log" 2>&1
    rc=$?
    # memcheck ends each process's log with "ERROR SUMMARY: N errors", racecheck with "RACECHECK SUMMARY: ... (N errors"
    errors=$(cat "$dir"/proc.*.log 2>/dev/null | sed -n -e 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' \
      -e 's/.*RACECHECK SUMMARY: .*(\([0-9]*\) error.*/\1/p' | awk '{s += $1} END {print s + 0}')
    logs=$(grep -lE "ERROR SUMMARY|RACECHECK SUMMARY" "$dir"/proc.*.log 2>/dev/null | wc -l)
    tests=$(grep -Eo "[0-9]+ (passed|failed|skipped|error)" "$dir/pytest.log" | paste -sd, -)
    verdict=CLEAN
    [ "${errors:-0}" != 0 ] && verdict=ERRORS
    [ "$rc" = 124 ] && verdict="TIMEOUT(${PER_RUN_S}s)"
    [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$verdict" = CLEAN ] && verdict="TESTS-FAILED(rc=$rc)"
    printf '%-9s %-12s errors=%-4s summaries=%-3s tests=[%s] %ss %s\n' "$tool" "$fe" "${errors:-0}" "$logs" \
      "$tests" $((SECONDS - t0)) "$verdict" | tee -a "$summary"
    [ "$verdict" != CLEAN ] && status=1
  done
done
echo "total $((SECONDS - start))s; logs in $OUT/sanitize" | tee -a "$summary"
exit $status
