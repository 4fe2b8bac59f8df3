#!/usr/bin/env bash
# The ring GEMV at half size, two blocks per SM (session 10), A/B on one H200 in one call: the
# kernel checks (the ring cases against CPU math), compute-sanitizer memcheck of the ring kernel,
# the engine checks, then `infer_engine_test --bench llama-3.1-8b` of the previous build
# ($DIST/old/infer_engine_test) and this one, interleaved ROUNDS times, with the per-call one-row
# GEMM timings (ring against cuBLASLt) and the in-step resolution's batch-1 lines.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_ring_half_h200.sh
# Writes $OUT/ring-half.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/ring-half.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" | grep -E "ring|FAIL|PASSED"
  echo "== kernel checks: exit ${PIPESTATUS[0]}"
  timeout 300 compute-sanitizer --tool memcheck --kernel-name kns=ring_gemv_kernel "$DIST/infer_kernels_test" 2>&1 |
    grep -E "ERROR SUMMARY"
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -20
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  engine_ab llama-3.1-8b "${ROUNDS:-3}" "start-up| m=1 |batch 1 context <= 2048|decode batch"
} >"$log" 2>&1
grep -E "^==|FAIL|PASSED|ERROR SUMMARY|decode batch|start-up" "$log"
