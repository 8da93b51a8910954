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
# frontends before cute: gpu_prepare_cute.py links .gpu/frontends/*.kpack into the mixed library (.gpu/cute/kpmix)
for prep in scripts/gpu_prepare_frontends.py scripts/gpu_prepare_cute.py scripts/gpu_runtime_prepare.py \
            scripts/gpu_prepare_examples.py scripts/gpu_prepare_per_arch.py scripts/gpu_prepare_wheels.py \
            scripts/gpu_prepare_launchcost.py scripts/gpu_prepare_ptx.py \
            scripts/gpu_prepare_pdl.py scripts/gpu_prepare_tuning.py scripts/gpu_prepare_fp8.py; do
  if [ -f "$prep" ]; then echo "== $prep"; python3 "$prep" | tail -2; fi
done
# bench_load's bundles and C libraries (scripts/gpu_round.sh): synthesized here, timed once on the fake driver
LOAD_SHAPES="100:10 1000:100 10000:1000 10000:100 100:10:19 1000:100:19 10000:100:19"
echo "== bench/load_scale.py (synthesize .gpu/loadscale)"
python3 bench/load_scale.py --work .gpu/loadscale --arch sm_90a --rounds 1 --shapes $LOAD_SHAPES --clib 1000 10000 \
  | tail -2
# what the GPU run does not read (the carry is limited to 64 MiB): the bench's cold-start program is built here
rm -rf .gpu/loadscale/pycache .gpu/loadscale/clib-*/synth/lib/libsynth.a .gpu/loadscale/clib-*/synth/include/synth.hpp
du -sh .gpu
