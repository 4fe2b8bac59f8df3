#!/usr/bin/env bash
# Session 15: the static batch (32 x 512/128) under the scheduler's step budget of 8192 tokens (two
# prefill steps, session 14's behaviour) and the offline default of 16384 (one step, as vLLM's LLM
# class on a >= 70 GiB GPU), on one card in one call: `gpuscout bench --only serve/static --model
# llama-3.1-8b [--max-step-tokens 8192]`, interleaved ROUNDS times (each run builds its own engine).
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_step_budget_ab_h200.sh
# Writes $OUT/step-budget-ab.txt and $OUT/step-budget-ab.tar.gz (each run's result file).
set -u
source bench/dist_env.sh
ab_begin step-budget-ab
for round in $(seq "${ROUNDS:-3}"); do
  for budget in 8192 default; do
    flags=()
    [ "$budget" = default ] || flags=(--max-step-tokens "$budget")
    serve_ab_run "step budget $budget, round $round" "$runs/static-$budget-$round.json" serve/static -- "${flags[@]}"
  done
done >>"$log" 2>&1
ab_end step-budget-ab
