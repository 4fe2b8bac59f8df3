#!/usr/bin/env bash
# Engine-to-engine spread of the decode step (session 9): RUNS engines in a row of
# `infer_engine_test --bench llama-3.1-8b`, each printing its start-up choices (GEMM: kernel, and
# cuBLASLt's candidate with its configuration and the runner-up's time; decode attention plans) and
# its decode steps, so that a step time that moves between engines can be set against what the
# engine chose. Then Nsight Compute on the batch-32 streaming decode attention kernel.
# Usage (repository root on the GPU machine): DIST=.devdist RUNS=6 bash bench/run_engine_variance_h200.sh
# Writes $OUT/engine-variance.txt and $OUT/decode-attention-ncu.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/engine-variance.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  for run in $(seq "${RUNS:-6}"); do
    echo "== engine $run"
    "$DIST/infer_engine_test" --bench llama-3.1-8b | grep -E "gemm|attention|decode batch"
  done
} >"$log" 2>&1
grep -E "^==|decode batch" "$log"
if command -v ncu >/dev/null; then
  timeout 240 ncu --kernel-name regex:decode_attention_kernel --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    "$DIST/infer_kernels_test" --decode-profile llama >"$OUT/decode-attention-ncu.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers|Block Limit|Stall" \
    "$OUT/decode-attention-ncu.txt" | head -30
fi
