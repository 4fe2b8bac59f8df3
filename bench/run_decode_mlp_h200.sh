#!/usr/bin/env bash
# Session 22, one H200: the decode MLP kernel (mlp_decode_wgmma.cu: RMSNorm'd rows -> gate/up ->
# SiLU * up -> down + residual in one persistent kernel). Its checks and its timing against the
# unfused path in CUDA graphs of 16 layers (infer_gemm_test --decode-mlp --bench), the engine's checks
# against the CPU reference (its decode-mlp scenarios run the kernel at 2-32 rows), then -- only when
# all pass and AB=1 -- the engine's decode timing (infer_engine_test --bench llama-3.1-8b) and the
# serve benchmark's decode and static-batch cases with GPUSCOUT_DECODE_MLP=0 and =1, interleaved
# ROUNDS times (each run builds its own engine).
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 AB=1 bash bench/run_decode_mlp_h200.sh
# Needs $DIST/infer_gemm_test and $DIST/infer_engine_test. Writes $OUT/decode-mlp.{txt,tar.gz}.
set -u
source bench/dist_env.sh
ab_begin decode-mlp
{
  "$bin" --version
  echo "== infer_gemm_test --decode-mlp --bench"
  timeout 240 "$DIST/infer_gemm_test" --decode-mlp --bench
  kernel_rc=$?
  echo "== exit $kernel_rc"
  echo "== infer_engine_test (checks)"
  timeout 300 "$DIST/infer_engine_test" >"$runs/engine-checks.txt" 2>&1
  engine_rc=$?
  grep -E "decode-mlp|FAIL|error|infer_engine_test" "$runs/engine-checks.txt" | cut -c1-300
  echo "== exit $engine_rc"
  if [ "$kernel_rc" = 0 ] && [ "$engine_rc" = 0 ] && [ "${AB:-1}" = 1 ]; then
    for round in $(seq "${ROUNDS:-2}"); do
      for value in 0 1; do
        echo "== engine timing, GPUSCOUT_DECODE_MLP=$value, round $round"
        GPUSCOUT_DECODE_MLP=$value timeout 200 "$DIST/infer_engine_test" --bench llama-3.1-8b |
          grep -E "start-up|decode batch|graph replays" | cut -c1-300
      done
    done
    serve_ab_switch GPUSCOUT_DECODE_MLP serve/decode,serve/static mlp
  else
    echo "== checks failed or AB=0: no A/B"
  fi
} >>"$log" 2>&1
ab_end decode-mlp
