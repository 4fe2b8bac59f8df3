#!/usr/bin/env bash
# Session 29: the argmax kernel with 1024 threads and four 16-byte loads in flight per thread, on one
# H200 in one call:
#   1. infer_kernels_test: every kernel check (argmax at vocabularies 128256, 32000 and 1003, ties);
#   2. infer_engine_test (the engine against the CPU reference);
#   3. `infer_engine_test --bench llama-3.1-8b` of the previous build ($DIST/old/infer_engine_test)
#      and this one, interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_argmax_ab_h200.sh
# Writes $OUT/argmax-ab.txt.
set -u
source bench/dist_env.sh
ab_begin argmax-ab
{
  "$DIST/infer_kernels_test" | grep -E "argmax|FAIL|PASSED"
  echo "== kernel checks: exit ${PIPESTATUS[0]}"
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -4
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  engine_ab llama-3.1-8b "${ROUNDS:-2}" "start-up|decode batch|prefill|static"
} >>"$log" 2>&1
ab_end argmax-ab
