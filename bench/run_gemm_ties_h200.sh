#!/usr/bin/env bash
# GEMM near ties settled in whole decode steps (session 9), A/B on one H200 in one call: the GEMM
# runner checks (each kernel of a swapped choice against CPU math), the engine checks (their graphs
# go through the in-step resolution), then `infer_engine_test --bench llama-3.1-8b` with
# --no-gemm-ties (the choices timing alone made) and without it (the default), interleaved ROUNDS
# times, each printing its start-up, its in-step lines and its decode steps.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_gemm_ties_h200.sh
# (MODES=resolved: only the default engine, ROUNDS times).
# DIST holds gpuscout (scripts/make-device-dist.sh), infer_gemm_test and infer_engine_test.
# Writes $OUT/gemm-ties.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/gemm-ties.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_gemm_test" | grep -E "runner|FAIL|PASS" | tail -40
  echo "== gemm checks: exit ${PIPESTATUS[0]}"
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -16
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  for round in $(seq "${ROUNDS:-3}"); do
    for mode in ${MODES:---no-gemm-ties resolved}; do
      [ "$mode" = resolved ] && mode=""
      echo "== engine timing llama-3.1-8b ${mode:-in-step ties}, round $round"
      # shellcheck disable=SC2086
      "$DIST/infer_engine_test" --bench llama-3.1-8b $mode | grep -E "start-up|in-step|decode batch"
    done
  done
} >"$log" 2>&1
grep -E "^==|FAIL|PASS|start-up|in-step|decode batch" "$log"
