#!/usr/bin/env bash
# Session 21, one H200, the final build (the gate/up SwiGLU GEMM on by default): the engine's checks
# against the CPU reference, the kernel checks (prefill attention's wgmma kernel now shares its helpers
# with the GEMM), then the serve run beside PyTorch (FIND_PEAK=0 bench/run_serve_h200.sh).
# Needs $DIST/infer_engine_test and $DIST/infer_kernels_test. Writes under $OUT.
set -uo pipefail
source bench/dist_env.sh
ab_begin final-checks  # $OUT, $log with the environment header, and $runs for the runs' output
{
  "$bin" --version
  echo "== infer_engine_test"
  timeout 300 "$DIST/infer_engine_test" >"$runs/engine.txt" 2>&1
  echo "== exit $?"
  grep -E "swiglu|unfused|FAIL|error|infer_engine_test" "$runs/engine.txt" | cut -c1-300
  echo "== infer_kernels_test"
  timeout 240 "$DIST/infer_kernels_test" >"$runs/kernels.txt" 2>&1
  echo "== exit $?"
  grep -E "FAIL|PASSED|FAILED|error" "$runs/kernels.txt" | cut -c1-300 | tail -20
} >>"$log" 2>&1
ab_end final-checks
FIND_PEAK=0 bash bench/run_serve_h200.sh
