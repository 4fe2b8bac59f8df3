#!/usr/bin/env bash
# Session 26: cuBLASLt's runner-up as the second kernel of the engine's in-step resolution above 8 rows
# (GPUSCOUT_GEMM_LT_TIES=1). The kernel timeline (bench/run_kernel_trace_h200.sh) showed picks that run
# faster per call but start ~4 us late in a step. Checks first: infer_gemm_test (the runner's runner-up
# swapped in and checked at 9..64 rows) and the engine's checks with the switch on; then
# `infer_engine_test --bench llama-3.1-8b` with the switch off and on, interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 [CHECK_ENGINE=0] bash bench/run_gemm_lt_ties_ab_h200.sh
# Writes $OUT/gemm-lt-ties-ab.txt.
set -u
source bench/dist_env.sh
ab_begin gemm-lt-ties-ab
{
  echo "== infer_gemm_test (checks)"
  timeout 300 "$DIST/infer_gemm_test" 2>&1 | grep -E "FAIL|runner rows|PASSED|FAILED" | cut -c1-300 | tail -40
  if [ "${CHECK_ENGINE:-1}" = 1 ]; then
    echo "== infer_engine_test (checks, GPUSCOUT_GEMM_LT_TIES=1)"
    GPUSCOUT_GEMM_LT_TIES=1 timeout 400 "$DIST/infer_engine_test" 2>&1 | grep -E "PASS|FAIL" | cut -c1-300 | tail -30
  fi
  for round in $(seq "${ROUNDS:-2}"); do
    for value in 0 1; do
      echo "== engine timing GPUSCOUT_GEMM_LT_TIES=$value, round $round"
      GPUSCOUT_GEMM_LT_TIES=$value timeout 300 "$DIST/infer_engine_test" --bench llama-3.1-8b 2>&1 |
        grep -E "device|start-up|decode batch|graph replays|prefill|in-step batch (8|16|32)" | cut -c1-400
    done
  done
} >>"$log" 2>&1
cut -c1-400 "$log"
