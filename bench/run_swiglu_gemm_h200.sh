#!/usr/bin/env bash
# Session 21, one H200: the gate/up GEMM with SwiGLU in its epilogue (gemm_swiglu_wgmma.cu). Its
# checks and timing against cuBLASLt + SiLU (infer_gemm_test --swiglu --bench), the engine's checks
# against the CPU reference (a scenario of 512+-row steps runs the kernel), then -- only when both
# pass -- the serve benchmark's prefill case and static batch with the kernel off
# (GPUSCOUT_SWIGLU_GEMM=0) and on (the default from session 21), interleaved ROUNDS times (each run
# builds its own engine): `gpuscout bench --only serve/prefill,serve/static --model llama-3.1-8b`. The first two
# calls of the session ran an earlier form of this script (bench/NOTES.md).
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_swiglu_gemm_h200.sh
# Needs $DIST/infer_gemm_test and $DIST/infer_engine_test. Writes $OUT/swiglu-gemm-ab.{txt,tar.gz}.
set -u
source bench/dist_env.sh
ab_begin swiglu-gemm-ab
{
  "$bin" --version
  echo "== infer_gemm_test --swiglu --bench"
  timeout 240 "$DIST/infer_gemm_test" --swiglu --bench
  kernel_rc=$?
  echo "== exit $kernel_rc"
  echo "== infer_engine_test (checks)"
  timeout 300 "$DIST/infer_engine_test" >"$runs/engine-checks.txt" 2>&1
  engine_rc=$?
  grep -E "PASS|FAIL|error" "$runs/engine-checks.txt" | cut -c1-300 | tail -40
  echo "== exit $engine_rc"
  if [ "$kernel_rc" = 0 ] && [ "$engine_rc" = 0 ]; then
    serve_ab_switch GPUSCOUT_SWIGLU_GEMM serve/prefill,serve/static swiglu
  else
    echo "== checks failed: no A/B"
  fi
} >>"$log" 2>&1
ab_end swiglu-gemm-ab
