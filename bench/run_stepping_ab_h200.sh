#!/usr/bin/env bash
# Session 13: pipelined against synchronous stepping in the serve benchmark, on one H200 in one call:
# `gpuscout bench --only serve/copy,serve/decode,serve/static --model llama-3.1-8b --stepping MODE`,
# the two modes interleaved ROUNDS times (each run builds its own engine), the report lines kept.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_stepping_ab_h200.sh
# Writes $OUT/stepping-ab.txt and $OUT/stepping-ab.tar.gz (each run's result file).
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/stepping-ab.txt"
runs=$(mktemp -d)
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  for round in $(seq "${ROUNDS:-3}"); do
    for mode in synchronous pipelined; do
      echo "== $mode, round $round"
      "$bin" -v bench --only serve/copy,serve/decode,serve/static --model llama-3.1-8b --stepping "$mode" \
        --out "$runs/serve-$mode-$round.json" --tags machine:nvidia-h200,script:run_stepping_ab_h200 2>&1 |
        grep -E "^\[gpu0\] serve/(copy|decode|static)"
      echo "== exit ${PIPESTATUS[0]}"
    done
  done
} >"$log" 2>&1
tar czf "$OUT/stepping-ab.tar.gz" -C "$runs" .
rm -f "$OUT/env.txt"
cut -c1-240 "$log"
