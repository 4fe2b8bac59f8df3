#!/usr/bin/env bash
# Session 5: decode attention's split kernel merging in its last split (no merge kernel), on one
# H200: the kernel tests (every decode attention case), their timings (--decode-only --bench), the
# engine tests, then the engine's decode steps for Llama-3.1-8B and Qwen2.5-7B (the split kernel
# runs below 64 (sequence, KV head) pairs: batch 1 for both, batch 8 for Qwen).
# Usage there: DIST=.devdist-q bash bench/run_decode_merge_h200.sh; writes $OUT/merge.txt.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export DIST=${DIST:-.devdist-q}
source bench/dist_env.sh
log="$OUT/merge.txt"
timeout 240 "$DIST/infer_kernels_test" >"$OUT/kernels_test.txt" 2>&1
echo "kernel tests: exit $?" | tee "$log"
grep -E "FAIL|PASSED|FAILED" "$OUT/kernels_test.txt" | tail -4 | tee -a "$log"
timeout 120 "$DIST/infer_kernels_test" --decode-only --bench 2>&1 | grep -A6 "^## decode attention" | tee -a "$log"
timeout 120 "$DIST/infer_engine_test" 2>&1 | grep -E "PASS|FAIL" | tail -8 | tee -a "$log"
for m in llama-3.1-8b qwen2.5-7b llama-3.1-8b qwen2.5-7b; do
  echo "== $m" | tee -a "$log"
  timeout 100 "$DIST/infer_engine_test" --bench $m 2>&1 | grep -E "decode batch" | tee -a "$log"
done
