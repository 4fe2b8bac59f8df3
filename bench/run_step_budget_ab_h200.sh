#!/usr/bin/env bash
# Session 15: the static batch (32 x 512/128) under the scheduler's step budget of 8192 tokens (two
# prefill steps, session 14's behaviour) and the offline default of 16384 (one step, as vLLM's LLM
# class on a >= 70 GiB GPU), on one card in one call: `gpuscout bench --only serve/static --model
# llama-3.1-8b [--max-step-tokens 8192]`, interleaved ROUNDS times (each run builds its own engine).
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_step_budget_ab_h200.sh
# Writes $OUT/step-budget-ab.txt and $OUT/step-budget-ab.tar.gz (each run's result file).
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/step-budget-ab.txt"
runs=$(mktemp -d)
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  for round in $(seq "${ROUNDS:-3}"); do
    for budget in 8192 default; do
      flag=()
      [ "$budget" = default ] || flag=(--max-step-tokens "$budget")
      echo "== step budget $budget, round $round"
      "$bin" -v bench --only serve/static --model llama-3.1-8b "${flag[@]}" \
        --out "$runs/static-$budget-$round.json" --tags machine:nvidia-h200,script:run_step_budget_ab_h200 2>&1 |
        grep -E "^\[gpu0\] serve/static"
      echo "== exit ${PIPESTATUS[0]}"
    done
  done
} >"$log" 2>&1
tar czf "$OUT/step-budget-ab.tar.gz" -C "$runs" .
rm -f "$OUT/env.txt"
cut -c1-240 "$log"
