#!/usr/bin/env bash
# Session 14: the serve benchmark's prefill-heavy cases with the prefill attention on mma.sync
# (GPUSCOUT_PREFILL_WGMMA=0) and on warpgroup MMA (=1, the default), on one card in one call:
# `gpuscout bench --only serve/prefill,serve/static --model llama-3.1-8b`, the two interleaved ROUNDS
# times (each run builds its own engine), the report lines kept.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_prefill_wgmma_ab_h200.sh
# Writes $OUT/prefill-wgmma-ab.txt and $OUT/prefill-wgmma-ab.tar.gz (each run's result file).
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/prefill-wgmma-ab.txt"
runs=$(mktemp -d)
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  for round in $(seq "${ROUNDS:-3}"); do
    for wgmma in 0 1; do
      echo "== GPUSCOUT_PREFILL_WGMMA=$wgmma, round $round"
      GPUSCOUT_PREFILL_WGMMA=$wgmma "$bin" -v bench --only serve/prefill,serve/static --model llama-3.1-8b \
        --out "$runs/serve-wgmma$wgmma-$round.json" --tags machine:nvidia-h200,script:run_prefill_wgmma_ab_h200 2>&1 |
        grep -E "^\[gpu0\] serve/(prefill|static)"
      echo "== exit ${PIPESTATUS[0]}"
    done
  done
} >"$log" 2>&1
tar czf "$OUT/prefill-wgmma-ab.tar.gz" -C "$runs" .
rm -f "$OUT/env.txt"
cut -c1-240 "$log"
