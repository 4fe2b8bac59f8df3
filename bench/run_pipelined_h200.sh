#!/usr/bin/env bash
# Session 13: pipelined stepping (plan n + 1 submitted before step n is collected), on one H200 in
# one call: the engine checks (pipelined tokens equal synchronous ones: mixed, preempt, graphs on and
# off; and every earlier check), then `infer_engine_test --bench llama-3.1-8b` twice: per decode batch
# the execute() step, the same graph replayed back to back, and the pipelined step.
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_pipelined_h200.sh
# Writes $OUT/pipelined.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/pipelined.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_engine_test" | grep -E "pipelined|FAIL|PASS$|infer_engine_test"
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  for round in 1 2; do
    echo "== engine timing llama-3.1-8b, round $round"
    "$DIST/infer_engine_test" --bench llama-3.1-8b | grep -E "decode batch|graph replays|pipelined|prefill"
  done
} >"$log" 2>&1
rm -f "$OUT/env.txt"
cut -c1-240 "$log"
