#!/usr/bin/env bash
# On the GPU machine (python3 3.12, torch, Triton 3.6; no DSLs, no network), carrying .gpu/ from scripts/gpu_prepare.sh
# plus .gpu/corpus (python scripts/corpus.py --gpu-prepare) and .gpu/corpus-fi (python -m corpus.flashinfer
# --gpu-prepare): one device call for this round's GPU checks, most important first, each under its own time cap so
# one slow part cannot starve the rest. STEPS (default: all) picks some by name; CAP_<step> overrides a cap (seconds).
# Everything the steps write goes to a work folder; at the end it is gathered into ONE file, $OUT/round.log (the
# device tool returns only a few files from $OUT), with the JSON results beside it.
set -uo pipefail
cd "$(dirname "$0")/.."
FINAL=${OUT:-/tmp/kp-out}; mkdir -p "$FINAL"
OUT=$(mktemp -d /tmp/kp-round.XXXX); export OUT
trap 'gather' EXIT
gather() {
  { for f in "$OUT"/machine.txt "$OUT"/*.log "$OUT"/*.md "$OUT"/*.txt; do
      [ -f "$f" ] && { echo "===== $(basename "$f")"; cat "$f"; }; done; } > "$FINAL/round.log" 2>/dev/null
  cp "$OUT"/*.json "$FINAL"/ 2>/dev/null || true
}
export PYTHONUNBUFFERED=1 KERNELPACK_GPU_ARTIFACTS=$PWD/.gpu KERNELPACK_CACHE_DIR=off PYTHONPATH=$PWD/src
STEPS=${STEPS:-"corpus_triton corpus_cute corpus_fi cpu_tests tests bench_clib bench_launch bench_load profile_load first_launch first_launch_synth"}
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | tee "$OUT/machine.txt"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" >> "$OUT/machine.txt"
rm -rf build src/kernelpack/runtime/*.so
python3 setup.py -q build_ext --inplace > "$OUT/build.log" 2>&1 || tail -5 "$OUT/build.log"
step() {  # name, seconds, command...
  local name=$1 cap=$2; shift 2
  case " $STEPS " in *" $name "*) ;; *) return 0 ;; esac
  local var="CAP_$name"; cap=${!var:-$cap}
  local t0=$SECONDS; timeout "$cap" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "== $name: rc=$rc in $((SECONDS - t0)) s"; tail -3 "$OUT/$name.log"
}
step corpus_triton 120 python3 scripts/corpus_gpu.py --dsl triton --reps 8 --out "$OUT/corpus_triton.md"
step corpus_cute 70 python3 scripts/corpus_gpu.py --dsl cute --dsl cutile --reps 8 --out "$OUT/corpus_cute.md"
step corpus_fi 40 python3 scripts/corpus_gpu_flashinfer.py --reps 10 --out "$OUT"
# the fake-driver tests of the launch path against this machine's python and torch (the bridge reads TensorImpl)
step cpu_tests 90 python3 -m pytest -q -p no:cacheprovider -rfE ${CPU_TESTS:-tests/test_runtime_bridge.py \
  tests/test_runtime_launch.py tests/test_load_first_use.py tests/test_lazy_load.py tests/test_dispatch_record.py}
step tests 100 python3 -m pytest -m gpu -q -p no:cacheprovider -rfEs ${GPU_TESTS:-tests/test_tuning_gpu.py \
  tests/test_fp8_gpu.py tests/test_launch_flags_gpu.py tests/test_triton_gpu.py tests/test_descriptor_launch.py}
step bench_clib 45 python3 bench/clib_launch.py --kernels 200
step bench_launch 130 python3 bench/launch_overhead.py --json "$OUT/bench.json"
step bench_load 75 python3 bench/load_scale.py --work .gpu/loadscale --rounds 3 \
  --shapes 100:10 1000:100 10000:1000 10000:100 100:10:19 1000:100:19 10000:100:19
step profile_load 40 python3 scripts/gpu_profile_load.py .gpu/loadscale/synth-10000-100-sm_90a.kpack k0
step first_launch 40 python3 scripts/gpu_first_launch.py .gpu/runtime/many.kpack --runs 3
step first_launch_synth 60 bash -c "python3 scripts/gpu_first_launch.py .gpu/loadscale/synth-100-10-sm_90a.kpack \
  --synth k5:2 --runs 5 && python3 scripts/gpu_first_launch.py .gpu/loadscale/synth-10000-100-sm_90a-p19.kpack \
  --synth k50:19 --runs 5"
exit 0
