#!/usr/bin/env bash
# The CUDA serving engine on the H200 machine: the correctness test (tiny model through the engine
# and the CPU reference, TP2 too when 2 GPUs are visible), then the timing mode for a catalog model.
# Usage (repository root on the GPU machine):
#   bench/run_engine_h200.sh DIST OUTDIR [MODEL] [TP]
#     DIST: a folder with infer_engine_test and lib/ (built here, packed by the caller), e.g.
#           build-engine/dist; MODEL defaults to llama-3.1-8b, TP to 1.
# Writes OUTDIR/env.txt, OUTDIR/test.txt, OUTDIR/bench.txt.
set -u
dist=${1:-build-engine/dist}
out=${2:-${OUT:-out}}
model=${3:-llama-3.1-8b}
tp=${4:-1}
mkdir -p "$out"
export LD_LIBRARY_PATH="$(pwd)/$dist/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
    --format=csv
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
  ldd "$dist/infer_engine_test" | grep -E 'not found|nccl|cublas|cudart'
} >"$out/env.txt" 2>&1
s=$(date +%s)
"$dist/infer_engine_test" 2>&1 | tee "$out/test.txt"
echo "test exit ${PIPESTATUS[0]} ($(($(date +%s) - s)) s)" | tee -a "$out/test.txt"
s=$(date +%s)
"$dist/infer_engine_test" --bench "$model" --tp "$tp" 2>&1 | tee "$out/bench.txt"
echo "bench exit ${PIPESTATUS[0]} ($(($(date +%s) - s)) s)" | tee -a "$out/bench.txt"
