#!/usr/bin/env bash
# Session 28: H100 figures to test the transferred calibration (transfer_stream_curve) against, and the
# configuration-search check of infer_gemm_test fixed in session 27 (searched pick against the
# heuristic's best above 8 rows).
#   1. gpuscout bench --only gemm: Llama-3.1-8B's qkv, o, gate_up, down and lm_head at 1/8/16/32/128 rows
#      and 8192^3, BF16 and FP8 (the decode shapes the H200 table's weight-stream curves come from);
#   2. gpuscout bench --only memory: read/write/copy/triad at 32 MiB .. 4 GiB (the HBM curve);
#   3. infer_gemm_test (its checks, the searched-pick lines).
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_h100_calibration_check.sh
# Writes $OUT/h100-gemm-decode.json, $OUT/h100-memory.json, $OUT/calibration-check.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
tags="--tags machine:${MACHINE:-nvidia-h100-x1},script:run_h100_calibration_check"
log="$OUT/calibration-check.txt"
write_env "$log"
{
  s=$(date +%s)
  "$bin" -v bench --only gemm --precisions bf16,fp8 --gemm-model llama-3.1-8b \
    --gemm-shapes qkv,o,gate_up,down,lm_head --gemm-m 1,8,16,32,128 --gemm-sizes 8192 \
    --out "$OUT/h100-gemm-decode.json" $tags 2>&1 | tail -3
  echo "== gemm: exit ${PIPESTATUS[0]} after $(($(date +%s) - s)) s"
  s=$(date +%s)
  "$bin" -v bench --only memory/copy,memory/triad,memory/read,memory/write \
    --memory-sizes 32MiB,128MiB,512MiB,1GiB,4GiB --out "$OUT/h100-memory.json" $tags 2>&1 | tail -3
  echo "== memory: exit ${PIPESTATUS[0]} after $(($(date +%s) - s)) s"
  s=$(date +%s)
  echo "== infer_gemm_test (checks)"
  timeout 240 "$DIST/infer_gemm_test" 2>&1 | grep -E "FAIL|searched pick|PASSED|FAILED" | cut -c1-300 | tail -40
  echo "== infer_gemm_test: exit ${PIPESTATUS[0]} after $(($(date +%s) - s)) s"
} >>"$log" 2>&1
cut -c1-300 "$log"
