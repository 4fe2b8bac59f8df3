#!/usr/bin/env bash
# Session 11, third call: which difference between two builds of the chunked ring GEMV moves the
# batch-1 step. `infer_engine_test --bench llama-3.1-8b` (GPUSCOUT_RING_FIRST_SHARE=1) of
# $DIST/old (every block owning n / grid rows), $DIST/v1 (chunk claims one ahead), $DIST/v2nf
# (claims three ahead, no __threadfence) and $DIST (claims three ahead, a fence before the end marks
# and before the block's done count), interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_ring_chunks_isolate_h200.sh
# Writes $OUT/ring-chunks-isolate.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/ring-chunks-isolate.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  for round in $(seq "${ROUNDS:-3}"); do
    for build in old v1 v2nf v2; do
      exe="$DIST/$build/infer_engine_test"
      [ "$build" = v2 ] && exe="$DIST/infer_engine_test"
      echo "== engine timing llama-3.1-8b $build, round $round"
      GPUSCOUT_RING_FIRST_SHARE=1 GPUSCOUT_RING_CHUNK_KB=16 "$exe" --bench llama-3.1-8b |
        grep -E "start-up|gemm .* m=1 |batch 1 context <= 2048|decode batch"
    done
  done
} >"$log" 2>&1
grep -E "^==|decode batch   1" "$log"
