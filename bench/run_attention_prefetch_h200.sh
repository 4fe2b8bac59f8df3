#!/usr/bin/env bash
# Decode attention with the older K/V rows requested before pdl_wait (session 9), A/B on one H200 in
# one call: the decode attention checks, compute-sanitizer memcheck of both decode kernels, the
# engine checks (now also with each decode kernel forced into the graphs), then the engine's timing
# mode for Llama-3.1-8B, the previous build ($DIST/old/infer_engine_test) and this one interleaved
# ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_attention_prefetch_h200.sh
# DIST holds gpuscout (scripts/make-device-dist.sh), infer_kernels_test, infer_engine_test and
# old/infer_engine_test. Writes $OUT/attention-prefetch.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/attention-prefetch.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" --decode-only | grep -E "FAIL|PASS" | tail -3
  echo "== decode attention checks: exit ${PIPESTATUS[0]}"
  timeout 300 compute-sanitizer --tool memcheck --kernel-name kns=decode "$DIST/infer_kernels_test" --decode-only \
    2>&1 | grep -E "ERROR SUMMARY"
  "$DIST/infer_engine_test" | grep -E "attention|PASS|FAIL" | tail -12
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  engine_ab llama-3.1-8b "${ROUNDS:-3}" "decode batch|prefill"
} >"$log" 2>&1
grep -E "^==|PASS|FAIL|ERROR SUMMARY|decode batch|prefill" "$log"
