#!/usr/bin/env bash
# Session 13: pipelined against synchronous stepping in the serve benchmark, on one H200 in one call:
# `gpuscout bench --only serve/copy,serve/decode,serve/static --model llama-3.1-8b --stepping MODE`,
# the two modes interleaved ROUNDS times (each run builds its own engine), the report lines kept.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_stepping_ab_h200.sh
# Writes $OUT/stepping-ab.txt and $OUT/stepping-ab.tar.gz (each run's result file).
set -u
source bench/dist_env.sh
ab_begin stepping-ab
for round in $(seq "${ROUNDS:-3}"); do
  for mode in synchronous pipelined; do
    serve_ab_run "$mode, round $round" "$runs/serve-$mode-$round.json" serve/copy,serve/decode,serve/static -- \
      --stepping "$mode"
  done
done >>"$log" 2>&1
ab_end stepping-ab
