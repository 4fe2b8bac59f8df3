#!/usr/bin/env bash
# Session 25: the ring GEMV over FP8 weights (batch-1 decode with --weights fp8). Reverted after this
# run (slower than the FP8 skinny kernel); the kernel, its checks and GPUSCOUT_RING_GEMV_FP8 are in
# commit 452ba0d, which this script needs.
# Checks first: infer_kernels_test (every kernel check, the FP8 ring's among them) and the engine's
# checks against the CPU reference (FP8 on our kernels at one row among them). Then the serve
# benchmark's batch-1 decode case with FP8 weights, GPUSCOUT_RING_GEMV_FP8=0 (the FP8 skinny kernel)
# against 1 (the ring), interleaved ROUNDS times for Llama-3.1-8B, once for Llama-3.1-70B on one GPU.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_ring_fp8_h200.sh
# Writes $OUT/ring-fp8.txt and $OUT/ring-fp8.tar.gz (each serve run's result file).
set -u
source bench/dist_env.sh
ab_begin ring-fp8
{
  echo "== infer_kernels_test"
  "$DIST/infer_kernels_test" 2>&1 | grep -E "FAIL|ring|fp8|PASSED|FAILED|SKIP" | cut -c1-300 | tail -40
  echo "== infer_engine_test (checks)"
  "$DIST/infer_engine_test" 2>&1 | grep -E "FAIL|FP8|PASS" | cut -c1-300 | tail -12
  for model in llama-3.1-8b llama-3.1-70b; do
    rounds=${ROUNDS:-2}
    [ "$model" = llama-3.1-70b ] && rounds=1
    for round in $(seq "$rounds"); do
      for value in 0 1; do
        echo "== $model fp8 GPUSCOUT_RING_GEMV_FP8=$value, round $round"
        GPUSCOUT_RING_GEMV_FP8=$value "$bin" -v bench --only serve/decode --serve-batch 1,8 --model "$model" \
          --weights fp8 --tp 1 --out "$runs/$model-ring$value-$round.json" \
          --tags "machine:nvidia-h200,script:run_ring_fp8_h200" 2>&1 | grep -E "^\[gpu0\] serve/(decode|engine)" | cut -c1-250
        echo "== exit ${PIPESTATUS[0]}"
      done
    done
  done
} >>"$log" 2>&1
ab_end ring-fp8
