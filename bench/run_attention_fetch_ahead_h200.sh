#!/usr/bin/env bash
# Session 13: the streaming decode attention reads each tile's block-table entries one loop iteration
# before it needs them, on one H200 in one call: the decode attention checks of this build and
# compute-sanitizer memcheck of them; the decode attention kernel bench (`--decode-only --bench`) of
# the previous build ($DIST/old/infer_kernels_test) and this one interleaved twice; the engine checks;
# `infer_engine_test --bench llama-3.1-8b` of both builds interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_attention_fetch_ahead_h200.sh
# Writes $OUT/attention-fetch-ahead.txt. The change it measured was reverted (bench/NOTES.md, session 13):
# to rerun it, check out the commit that added this script.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/attention-fetch-ahead.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" --decode-only | grep -E "FAIL|PASSED"
  echo "== decode attention checks: exit ${PIPESTATUS[0]}"
  timeout 300 compute-sanitizer --tool memcheck --kernel-name kns=decode --print-limit 20 \
    "$DIST/infer_kernels_test" --decode-only | grep -E "ERROR SUMMARY|FAIL|PASSED"
  echo "== compute-sanitizer memcheck (decode kernels): exit ${PIPESTATUS[0]}"
  for round in 1 2; do
    for build in old new; do
      exe="$DIST/infer_kernels_test"
      [ "$build" = old ] && exe="$DIST/old/infer_kernels_test"
      echo "== decode attention kernels $build, round $round"
      "$exe" --decode-only --bench | grep -E "^ +(1|8|32) "
    done
  done
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -4
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  engine_ab llama-3.1-8b "${ROUNDS:-2}" "decode batch|pipelined|attention batch 32"
} >"$log" 2>&1
rm -f "$OUT/env.txt"
cut -c1-240 "$log"
