#!/usr/bin/env bash
# Ran against commit 3ee0235 and its follow-ups (bench/results/*-s12-*); the code it exercises (the small-m TMA variants,
# infer_engine_test --no-lt-pdl) was reverted after those runs, as bench/NOTES.md (session 12) records.
# Session 12: cuBLASLt's GEMMs started under programmatic launch (GemmRunner::set_programmatic_cublaslt)
# and the small-m register variants at a small shared-memory carveout, on one H200 in one call:
#   1. infer_gemm_test (the kernel and runner checks, the late-writer check of the early start), then
#      with GPUSCOUT_SMALL_M_GEMM=1 --bench: per Llama-3.1-8B shape the small-m variants against cuBLASLt;
#   2. infer_engine_test: the engine against the CPU reference (the early start on by default);
#   3. `infer_engine_test --bench llama-3.1-8b` with --no-lt-pdl and without, interleaved ROUNDS times
#      (same binary), then once with GPUSCOUT_SMALL_M_GEMM=1.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 [GEMM_BENCH=0] bash bench/run_lt_pdl_h200.sh
# Writes $OUT/lt-pdl.txt and $OUT/gemm-bench.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/lt-pdl.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_gemm_test" | grep -E "cuBLASLt|programmatic|FAIL|PASSED"
  echo "== gemm checks: exit ${PIPESTATUS[0]}"
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -4
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  for round in $(seq "${ROUNDS:-3}"); do
    for flag in --no-lt-pdl ""; do
      echo "== engine timing llama-3.1-8b ${flag:-lt-pdl}, round $round"
      # shellcheck disable=SC2086
      "$DIST/infer_engine_test" --bench llama-3.1-8b $flag | grep -E "start-up|decode batch|prefill|m=(1|8|16|32) |in-step"
    done
  done
  echo "== engine timing llama-3.1-8b lt-pdl with GPUSCOUT_SMALL_M_GEMM=1"
  GPUSCOUT_SMALL_M_GEMM=1 "$DIST/infer_engine_test" --bench llama-3.1-8b | grep -E "start-up|decode batch|m=32|in-step"
} >"$log" 2>&1
rm -f "$OUT/env.txt"
grep -E "^==|FAIL|PASSED|decode batch|prefill" "$log"
if [ "${GEMM_BENCH:-1}" != 0 ]; then
  GPUSCOUT_SMALL_M_GEMM=1 timeout 300 "$DIST/infer_gemm_test" --bench >"$OUT/gemm-bench.txt" 2>&1
  echo "infer_gemm_test --bench: exit $?"
  sed -n '/# bench/,$p' "$OUT/gemm-bench.txt"
fi
