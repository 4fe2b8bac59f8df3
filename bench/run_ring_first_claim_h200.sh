#!/usr/bin/env bash
# Session 11: a ring GEMV change against the build before it (first run: the first claim issued once
# the ring is full; second: the left-over rows in 8 KB chunks), on one H200 in one call: the kernel
# checks (ring cases), then `infer_engine_test --bench llama-3.1-8b` of the previous build
# ($DIST/old/infer_engine_test) and this one interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_ring_first_claim_h200.sh
# Writes $OUT/ring-first-claim.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/ring-first-claim.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" | grep -E "ring|FAIL|PASSED"
  echo "== kernel checks: exit ${PIPESTATUS[0]}"
  engine_ab llama-3.1-8b "${ROUNDS:-2}" "decode batch"
} >"$log" 2>&1
rm -f "$OUT/env.txt"
grep -E "^==|FAIL|PASSED|decode batch" "$log"
