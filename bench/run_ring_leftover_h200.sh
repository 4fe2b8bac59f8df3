#!/usr/bin/env bash
# Session 11's ring GEMV (each block streams n / grid rows; the rows left over are claimed in small
# chunks), on one H200 in one call: the kernel checks (the ring cases, 40 repeated launches),
# compute-sanitizer memcheck of the ring kernel, the engine checks, `infer_engine_test --bench
# llama-3.1-8b` of the previous build ($DIST/old/infer_engine_test) and this one interleaved ROUNDS
# times, then the serve benchmark against PyTorch in the same call (FIND_PEAK=0 run_serve_h200.sh).
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_ring_leftover_h200.sh
# Writes $OUT/ring-leftover.txt and run_serve_h200.sh's files.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/ring-leftover.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" | grep -E "ring|FAIL|PASSED"
  echo "== kernel checks: exit ${PIPESTATUS[0]}"
  timeout 240 compute-sanitizer --tool memcheck --kernel-name kns=ring_gemv_kernel "$DIST/infer_kernels_test" 2>&1 |
    grep -E "ERROR SUMMARY"
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -16
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  engine_ab llama-3.1-8b "${ROUNDS:-2}" "start-up|gemm .* m=1 |batch 1 context <= 2048|decode batch"
} >"$log" 2>&1
rm -f "$OUT/env.txt"
grep -E "^==|FAIL|PASSED|ERROR SUMMARY|decode batch   1|start-up" "$log"
FIND_PEAK=0 bash bench/run_serve_h200.sh
