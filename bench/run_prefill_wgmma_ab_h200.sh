#!/usr/bin/env bash
# Session 14: the serve benchmark's prefill-heavy cases with the prefill attention on mma.sync
# (GPUSCOUT_PREFILL_WGMMA=0) and on warpgroup MMA (=1, the default), on one card in one call:
# `gpuscout bench --only serve/prefill,serve/static --model llama-3.1-8b`, the two interleaved ROUNDS
# times (each run builds its own engine), the report lines kept.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_prefill_wgmma_ab_h200.sh
# Writes $OUT/prefill-wgmma-ab.txt and $OUT/prefill-wgmma-ab.tar.gz (each run's result file).
set -u
source bench/dist_env.sh
ab_begin prefill-wgmma-ab
for round in $(seq "${ROUNDS:-3}"); do
  for wgmma in 0 1; do
    serve_ab_run "GPUSCOUT_PREFILL_WGMMA=$wgmma, round $round" "$runs/serve-wgmma$wgmma-$round.json" \
      serve/prefill,serve/static "GPUSCOUT_PREFILL_WGMMA=$wgmma" --
  done
done >>"$log" 2>&1
ab_end prefill-wgmma-ab
