#!/usr/bin/env bash
# Session 12: the RoPE + KV store kernel on 16-byte vectors, on one H200 in one call:
#   1. infer_kernels_test: every kernel check (the RoPE cases: vector, pair and scalar paths);
#   2. compute-sanitizer memcheck of the same checks;
#   3. the 16 x 512 prefill step's kernels alone, previous build ($DIST/old/infer_kernels_test) and
#      this one, interleaved twice;
#   4. infer_engine_test (engine against the CPU reference), then `infer_engine_test --bench
#      llama-3.1-8b` of the previous build and this one interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_rope_vec8_h200.sh
# Writes $OUT/rope-vec8.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/rope-vec8.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" | grep -E "rope|FAIL|PASSED"
  echo "== kernel checks: exit ${PIPESTATUS[0]}"
  if command -v compute-sanitizer >/dev/null; then
    timeout 200 compute-sanitizer --tool memcheck --print-limit 20 "$DIST/infer_kernels_test" | tail -3
    echo "== compute-sanitizer memcheck: exit ${PIPESTATUS[0]}"
  fi
  prefill_kernels_ab 2
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -4
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  engine_ab llama-3.1-8b "${ROUNDS:-2}" "decode batch|prefill"
} >"$log" 2>&1
rm -f "$OUT/env.txt"
cut -c1-200 "$log"
