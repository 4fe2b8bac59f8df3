#!/usr/bin/env bash
# Session 15: the batch-32 decode step and the static batch (32 x 512/128) with cuBLASLt's per-call
# near ties settled by time alone (GPUSCOUT_LT_SPLIT_TIES=0, as before) and by the fewest k-splits
# (the default now), under the offline step budget (16384, the default) and 8192, on one card in
# one call: `gpuscout bench --only serve/decode/llama-3.1-8b/tp1/b32_ctx512,serve/static --model
# llama-3.1-8b [--max-step-tokens 8192]`, the three configurations interleaved ROUNDS times (each
# run builds its own engine).
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_split_ties_ab_h200.sh
# Writes $OUT/split-ties-ab.txt and $OUT/split-ties-ab.tar.gz (each run's result file).
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/split-ties-ab.txt"
runs=$(mktemp -d)
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  for round in $(seq "${ROUNDS:-3}"); do
    for config in ties0-default ties1-default ties1-8192; do
      ties=${config%%-*}
      budget=${config#*-}
      flag=()
      [ "$budget" = default ] || flag=(--max-step-tokens "$budget")
      echo "== GPUSCOUT_LT_SPLIT_TIES=${ties#ties}, step budget $budget, round $round"
      GPUSCOUT_LT_SPLIT_TIES=${ties#ties} "$bin" -v bench --only serve/decode/llama-3.1-8b/tp1/b32_ctx512,serve/static \
        --model llama-3.1-8b "${flag[@]}" --out "$runs/$config-$round.json" \
        --tags machine:nvidia-h200,script:run_split_ties_ab_h200 2>&1 | grep -E "^\[gpu0\] serve/(decode|static)"
      echo "== exit ${PIPESTATUS[0]}"
    done
  done
} >"$log" 2>&1
tar czf "$OUT/split-ties-ab.tar.gz" -C "$runs" .
rm -f "$OUT/env.txt"
cut -c1-240 "$log"
