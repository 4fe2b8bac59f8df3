#!/usr/bin/env bash
# Session 12: RMSNorm blocks of 128 threads for prefill-sized batches, on one H200 in one call: the
# kernel checks (RMSNorm at 9 and 600 rows), the 16 x 512 prefill step's kernels alone of the previous
# build ($DIST/old/infer_kernels_test) and this one interleaved twice, the engine checks, then
# `infer_engine_test --bench llama-3.1-8b` of both builds interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=1 bash bench/run_rmsnorm_narrow_h200.sh
# Writes $OUT/rmsnorm-narrow.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/rmsnorm-narrow.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" | grep -E "rmsnorm|FAIL|PASSED"
  echo "== kernel checks: exit ${PIPESTATUS[0]}"
  prefill_kernels_ab 2
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -4
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  engine_ab llama-3.1-8b "${ROUNDS:-1}" "decode batch|prefill"
} >"$log" 2>&1
rm -f "$OUT/env.txt"
cut -c1-200 "$log"
