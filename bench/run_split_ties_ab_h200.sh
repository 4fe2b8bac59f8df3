#!/usr/bin/env bash
# Session 15: the batch-32 decode step and the static batch (32 x 512/128) with cuBLASLt's per-call
# near ties settled by time alone (GPUSCOUT_LT_SPLIT_TIES=0) and by the fewest k-splits (=1; the rule
# was reverted after this A/B, so a later build runs the first configuration only), under the offline
# step budget (16384, the default) and 8192, on one card in one call: `gpuscout bench --only
# serve/decode/llama-3.1-8b/tp1/b32_ctx512,serve/static --model llama-3.1-8b [--max-step-tokens 8192]`,
# the three configurations interleaved ROUNDS times (each run builds its own engine).
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_split_ties_ab_h200.sh
# Writes $OUT/split-ties-ab.txt and $OUT/split-ties-ab.tar.gz (each run's result file).
set -u
source bench/dist_env.sh
ab_begin split-ties-ab
for round in $(seq "${ROUNDS:-3}"); do
  for config in ties0-default ties1-default ties1-8192; do
    ties=${config%%-*}
    budget=${config#*-}
    flags=()
    [ "$budget" = default ] || flags=(--max-step-tokens "$budget")
    serve_ab_run "GPUSCOUT_LT_SPLIT_TIES=${ties#ties}, step budget $budget, round $round" "$runs/$config-$round.json" \
      serve/decode/llama-3.1-8b/tp1/b32_ctx512,serve/static "GPUSCOUT_LT_SPLIT_TIES=${ties#ties}" -- "${flags[@]}"
  done
done >>"$log" 2>&1
ab_end split-ties-ab
