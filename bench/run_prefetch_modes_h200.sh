#!/usr/bin/env bash
# Session-5 experiment on one H200: the L2 weight prefetch issued as per-line prefetch.global.L2
# (mode 1) and with evict_last (mode 2) instead of one bulk prefetch per row head (mode 0, measured
# by run_session5_h200.sh): infer_engine_test --bench with budgets 0,16,0,16 MiB in each mode, plus
# the kernel tests. Usage: DIST=.devdist-s5 bash bench/run_prefetch_modes_h200.sh; writes $OUT/modes.txt.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export DIST=${DIST:-.devdist-s5}
source bench/dist_env.sh
timeout 240 "$DIST/infer_kernels_test" >"$OUT/kernels_test.txt" 2>&1
echo "kernel tests: exit $?" | tee "$OUT/modes.txt"
grep -E "FAIL|failed|passed" "$OUT/kernels_test.txt" | tee -a "$OUT/modes.txt"
for mode in 1 2; do
  echo "== mode $mode" | tee -a "$OUT/modes.txt"
  GPUSCOUT_L2_PREFETCH_MODE=$mode timeout 200 "$DIST/infer_engine_test" --bench llama-3.1-8b \
    --l2-prefetch-mb 0,16,0,16,4 2>&1 | grep -E "L2 prefetch|decode batch|prefill" | tee -a "$OUT/modes.txt"
done
