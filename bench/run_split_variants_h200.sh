#!/usr/bin/env bash
# `infer_engine_test --bench llama-3.1-8b` of several builds interleaved ROUNDS times, one H200, one
# call: $DIST/old (the previous build), each $DIST/VARIANT given in VARIANTS (builds of one commit
# with different compile-time settings, named in the commit that made them), and $DIST itself (new).
# Usage: DIST=.devdist VARIANTS="b c" ROUNDS=2 bash bench/run_split_variants_h200.sh
# Writes $OUT/split-variants.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/split-variants.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  for round in $(seq "${ROUNDS:-2}"); do
    for variant in old ${VARIANTS:-} new; do
      exe="$DIST/$variant/infer_engine_test"
      [ "$variant" = new ] && exe="$DIST/infer_engine_test"
      echo "== engine timing llama-3.1-8b $variant, round $round"
      "$exe" --bench llama-3.1-8b ${BENCH_FLAGS:-} | grep -E "start-up|batch 1 context <= 2048|decode batch"
    done
  done
} >"$log" 2>&1
grep -E "^==|decode batch" "$log"
