#!/usr/bin/env bash
# Session 18 probe: what a step with a prompt chunk pays for running eagerly (the engine bench with
# and without --no-graphs) and for GEMMs at row counts no bucket tuned (infer_gemm_test --mid-rows).
# Needs $DIST/infer_engine_test and $DIST/infer_gemm_test. Writes $OUT/mixed-probe.txt.
set -uo pipefail
source bench/dist_env.sh
ab_begin mixed-probe
{
  echo "# build $("$bin" --version | head -1)"
  echo "== infer_gemm_test --mid-rows"
  timeout 240 "$DIST/infer_gemm_test" --mid-rows
  for round in $(seq "${ROUNDS:-1}"); do
    for mode in graphs eager; do
      echo "== infer_engine_test --bench llama-3.1-8b ($mode), round $round"
      flag=()
      [ "$mode" = eager ] && flag=(--no-graphs)
      timeout 300 "$DIST/infer_engine_test" --bench llama-3.1-8b "${flag[@]}" | grep -vE "^  (gemm|attention) "
    done
  done
} >>"$log" 2>&1
cut -c1-300 "$log"
