#!/usr/bin/env bash
# Session 25: FP8 activation quantization as one kernel (GPUSCOUT_FP8_QUANT_FUSED=1, the default) or
# as two (=0), before each cuBLASLt FP8 GEMM. Reverted after this run (no decode gain, prefill 6%
# slower); the one-kernel path and GPUSCOUT_FP8_QUANT_FUSED are in commit 4f9aae7, which this needs.
# Checks first: infer_kernels_test (both paths at 5 .. 1M elements, each twice in a row) and the
# engine's checks against the CPU reference (the FP8 scenarios). Then the serve benchmark's decode
# cases and static batch with FP8 weights (Llama-3.1-8B), two kernels against one, interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_fp8_quant_ab_h200.sh
# Writes $OUT/fp8-quant-ab.txt and $OUT/fp8-quant-ab.tar.gz (each serve run's result file).
set -u
source bench/dist_env.sh
ab_begin fp8-quant-ab
{
  echo "== infer_kernels_test"
  "$DIST/infer_kernels_test" 2>&1 | grep -E "FAIL|quantize|PASSED|FAILED" | cut -c1-300 | tail -30
  echo "== infer_engine_test (checks)"
  "$DIST/infer_engine_test" 2>&1 | grep -E "FAIL|FP8|PASS" | cut -c1-300 | tail -8
  for round in $(seq "${ROUNDS:-2}"); do
    for value in 0 1; do
      echo "== llama-3.1-8b fp8 GPUSCOUT_FP8_QUANT_FUSED=$value, round $round"
      GPUSCOUT_FP8_QUANT_FUSED=$value "$bin" -v bench --only serve/decode,serve/static,serve/prefill \
        --model llama-3.1-8b --weights fp8 --out "$runs/quant$value-$round.json" \
        --tags "machine:nvidia-h200,script:run_fp8_quant_ab_h200" 2>&1 | grep -E "^\[gpu0\] serve/(decode|static|prefill)" | cut -c1-250
      echo "== exit ${PIPESTATUS[0]}"
    done
  done
} >>"$log" 2>&1
ab_end fp8-quant-ab
