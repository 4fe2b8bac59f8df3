#!/usr/bin/env bash
# Session 21, one H200: the gate/up GEMM with SwiGLU in its epilogue (gemm_swiglu_wgmma.cu). Its
# checks and timing against cuBLASLt + SiLU (infer_gemm_test --swiglu --bench: both epilogues), the
# engine's checks against the CPU reference with each epilogue (GPUSCOUT_SWIGLU_EPILOGUE; a scenario
# of 512+-row steps runs the kernel), then -- only when all pass -- the serve benchmark's prefill case
# and static batch with the kernel off (GPUSCOUT_SWIGLU_GEMM=0), on with the in-place epilogue (the
# default) and on with the deferred one, interleaved ROUNDS times (each run builds its own engine):
# `gpuscout bench --only serve/prefill,serve/static --model llama-3.1-8b`. Earlier calls of the
# session ran earlier forms of this script (bench/NOTES.md).
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_swiglu_gemm_h200.sh
# (KERNEL_BENCH=0: the kernel's checks without its timing.)
# Needs $DIST/infer_gemm_test and $DIST/infer_engine_test. Writes $OUT/swiglu-gemm-ab.{txt,tar.gz}.
set -u
source bench/dist_env.sh
ab_begin swiglu-gemm-ab
{
  "$bin" --version
  echo "== infer_gemm_test --swiglu --bench"
  bench_flag=--bench
  [ "${KERNEL_BENCH:-1}" = 0 ] && bench_flag=  # checks only
  timeout 240 "$DIST/infer_gemm_test" --swiglu $bench_flag
  kernel_rc=$?
  echo "== exit $kernel_rc"
  engine_rc=0
  for epilogue in in-place deferred; do
    echo "== infer_engine_test (checks), GPUSCOUT_SWIGLU_EPILOGUE=$epilogue"
    GPUSCOUT_SWIGLU_EPILOGUE=$epilogue timeout 300 "$DIST/infer_engine_test" >"$runs/engine-checks-$epilogue.txt" 2>&1
    rc=$?
    grep -E "swiglu|unfused|FAIL|error|infer_engine_test" "$runs/engine-checks-$epilogue.txt" | cut -c1-300
    echo "== exit $rc"
    [ "$rc" = 0 ] || engine_rc=$rc
  done
  if [ "$kernel_rc" = 0 ] && [ "$engine_rc" = 0 ]; then
    for round in $(seq "${ROUNDS:-3}"); do
      serve_ab_run "GPUSCOUT_SWIGLU_GEMM=0, round $round" "$runs/off-$round.json" serve/prefill,serve/static \
        GPUSCOUT_SWIGLU_GEMM=0 --
      for epilogue in in-place deferred; do
        serve_ab_run "$epilogue, round $round" "$runs/$epilogue-$round.json" serve/prefill,serve/static \
          GPUSCOUT_SWIGLU_EPILOGUE=$epilogue --
      done
    done
  else
    echo "== checks failed: no A/B"
  fi
} >>"$log" 2>&1
ab_end swiglu-gemm-ab
