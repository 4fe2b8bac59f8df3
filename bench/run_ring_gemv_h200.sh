#!/usr/bin/env bash
# The one-row ring GEMV (backends/cuda/infer/gemv_ring.cu), A/B on one H200 in one call: the kernel
# checks (its cases against CPU math), compute-sanitizer memcheck of the kernel, the engine checks,
# then the engine's timing mode for Llama-3.1-8B without it (GPUSCOUT_RING_GEMV=0: the warp-per-row
# skinny kernel) and with it, interleaved ROUNDS times; each run prints GemmRunner's per-shape
# choice at one row.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_ring_gemv_h200.sh
# DIST holds gpuscout (scripts/make-device-dist.sh) plus infer_kernels_test and infer_engine_test.
# Writes $OUT/ring-gemv.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/ring-gemv.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" | grep -E "skinny_gemm ring|FAIL|PASSED"
  echo "== kernel checks: exit ${PIPESTATUS[0]}"
  timeout 300 compute-sanitizer --tool memcheck --kernel-name kns=ring_gemv_kernel "$DIST/infer_kernels_test" 2>&1 |
    grep -E "ERROR SUMMARY"
  "$DIST/infer_engine_test" | tail -4
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  for round in $(seq "${ROUNDS:-2}"); do
    for ring in 0 1; do
      echo "== engine timing llama-3.1-8b GPUSCOUT_RING_GEMV=$ring, round $round"
      GPUSCOUT_RING_GEMV=$ring "$DIST/infer_engine_test" --bench llama-3.1-8b | grep -E "gemm .* m=1 |decode batch"
    done
  done
} >"$log" 2>&1
grep -E "^==|PASSED|FAIL|ERROR SUMMARY|m=1 |decode batch" "$log"
