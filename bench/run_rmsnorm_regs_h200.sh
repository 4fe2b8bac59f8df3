#!/usr/bin/env bash
# Session 11: the RMSNorm kernel with the row kept in registers, on one H200 in one call: the kernel
# checks, the engine checks, `infer_engine_test --bench llama-3.1-8b` of the previous build
# ($DIST/old/infer_engine_test) and this one interleaved ROUNDS times, then the serve benchmark
# against PyTorch in the same call (FIND_PEAK=0 run_serve_h200.sh).
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_rmsnorm_regs_h200.sh
# Writes $OUT/rmsnorm-regs.txt and run_serve_h200.sh's files.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/rmsnorm-regs.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" | grep -E "rmsnorm|FAIL|PASSED"
  echo "== kernel checks: exit ${PIPESTATUS[0]}"
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -3
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  engine_ab llama-3.1-8b "${ROUNDS:-2}" "start-up|decode batch"
} >"$log" 2>&1
rm -f "$OUT/env.txt"
grep -E "^==|FAIL|PASSED|decode batch" "$log"
FIND_PEAK=0 bash bench/run_serve_h200.sh
