#!/usr/bin/env bash
# Ran against the commit its result file names (bench/results/h200-prefill-tuning-s12-*); the code it
# exercises (EngineOptions::tune_prefill_gemms, infer_engine_test --no-prefill-gemm-tuning) was
# reverted after that run, as bench/NOTES.md (session 12) records.
# Session 12: cuBLASLt's candidates timed at start-up for the GEMMs of a full prefill step
# (EngineOptions::tune_prefill_gemms), on one H200 in one call: the engine checks, then
# `infer_engine_test --bench llama-3.1-8b` with --no-prefill-gemm-tuning and without, interleaved
# ROUNDS times (same binary), with the m=8192 choices.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_prefill_tuning_h200.sh
# Writes $OUT/prefill-tuning.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/prefill-tuning.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -4
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  for round in $(seq "${ROUNDS:-3}"); do
    for flag in --no-prefill-gemm-tuning ""; do
      echo "== engine timing llama-3.1-8b ${flag:-prefill GEMMs tuned}, round $round"
      # shellcheck disable=SC2086
      "$DIST/infer_engine_test" --bench llama-3.1-8b $flag | grep -E "start-up|decode batch|prefill|m=8192"
    done
  done
} >"$log" 2>&1
rm -f "$OUT/env.txt"
cut -c1-260 "$log"
