#!/usr/bin/env bash
# Session 16: the RMSNorm gains folded into the QKV and gate/up weights, decode steps of 2+ rows
# without RMSNorm kernels (RoPE and SiLU apply each row's norm scale; EngineOptions::fold_norm_gains).
# Reverted after this A/B (neutral): a later build ignores GPUSCOUT_NORM_FOLD and has no
# --elementwise-only; the code is commit f679c1a.
# Checks first: infer_kernels_test (all cases, then the elementwise ones under compute-sanitizer
# memcheck) and the engine's checks against the CPU reference (which run folded by default). Then the
# serve benchmark's decode cases and static batch with the fold off (GPUSCOUT_NORM_FOLD=0) and on,
# interleaved ROUNDS times (each run builds its own engine):
# `gpuscout bench --only serve/decode,serve/static --model llama-3.1-8b`.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_norm_fold_ab_h200.sh
# Writes $OUT/norm-fold-ab.txt and $OUT/norm-fold-ab.tar.gz (each run's result file).
set -u
source bench/dist_env.sh
ab_begin norm-fold-ab
{
  echo "== infer_kernels_test"
  "$DIST/infer_kernels_test" 2>&1 | grep -E "FAIL|scaled|norm|PASSED|FAILED" | cut -c1-300 | tail -20
  echo "== compute-sanitizer memcheck: infer_kernels_test --elementwise-only"
  compute-sanitizer --tool memcheck "$DIST/infer_kernels_test" --elementwise-only 2>&1 | grep -E "ERROR SUMMARY|FAIL|PASSED|FAILED" | tail -5
  echo "== infer_engine_test (checks)"
  "$DIST/infer_engine_test" 2>&1 | grep -E "PASS|FAIL|norm gains" | cut -c1-300 | tail -30
  serve_ab_switch GPUSCOUT_NORM_FOLD serve/decode,serve/static fold
} >>"$log" 2>&1
ab_end norm-fold-ab
