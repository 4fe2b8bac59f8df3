#!/usr/bin/env bash
# Ran against commit 563e095 (bench/results/*-s12-*); the code it exercises (the small-m TMA variants,
# infer_engine_test --no-lt-pdl) was reverted after those runs, as bench/NOTES.md (session 12) records.
# Session 12: the small-m GEMM's TMA variants (5, 6) on one H200 in one call:
#   1. infer_gemm_test: every variant against the CPU reference (rows 1..64, splits, residual,
#      repeats, guard row), the runner, the cuBLASLt early-start probe and its late-writer check;
#   2. compute-sanitizer memcheck of the direct kernel checks;
#   3. GPUSCOUT_SMALL_M_GEMM=1 infer_gemm_test --bench: per Llama-3.1-8B shape and 8/16/32/64 rows,
#      each variant's best split against cuBLASLt's best candidate;
#   4. infer_engine_test (tiny model against the CPU reference) with GPUSCOUT_SMALL_M_GEMM=1;
#   5. `infer_engine_test --bench llama-3.1-8b` with GPUSCOUT_SMALL_M_GEMM=0 and 1, interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_small_m_tma_h200.sh
# Writes $OUT/small-m-tma.txt and $OUT/gemm-bench.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/small-m-tma.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_gemm_test" >"$OUT/gemm-checks.txt" 2>&1
  echo "== gemm checks: exit $?"
  grep -E "FAIL|PASSED|cuBLASLt|programmatic" "$OUT/gemm-checks.txt" | head -60
  grep -cE " v[56] .* ok " "$OUT/gemm-checks.txt" | sed 's/^/TMA variant checks passed: /'
  if command -v compute-sanitizer >/dev/null; then
    timeout 240 compute-sanitizer --tool memcheck --print-limit 20 "$DIST/infer_gemm_test" --kernel-only >"$OUT/sanitizer.txt" 2>&1
    echo "== compute-sanitizer memcheck: exit $?"
    tail -3 "$OUT/sanitizer.txt"
  fi
  GPUSCOUT_SMALL_M_GEMM=1 "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -4
  echo "== engine checks with GPUSCOUT_SMALL_M_GEMM=1: exit ${PIPESTATUS[0]}"
  for round in $(seq "${ROUNDS:-2}"); do
    for small_m in 0 1; do
      echo "== engine timing llama-3.1-8b GPUSCOUT_SMALL_M_GEMM=$small_m, round $round"
      GPUSCOUT_SMALL_M_GEMM=$small_m "$DIST/infer_engine_test" --bench llama-3.1-8b |
        grep -E "start-up|decode batch|prefill|m=(16|32) "
    done
  done
} >"$log" 2>&1
rm -f "$OUT/env.txt"
grep -E "^==|FAIL|PASSED|passed:|decode batch|ERROR SUMMARY" "$log"
GPUSCOUT_SMALL_M_GEMM=1 timeout 300 "$DIST/infer_gemm_test" --bench >"$OUT/gemm-bench.txt" 2>&1
echo "infer_gemm_test --bench: exit $?"
sed -n '/# bench/,$p' "$OUT/gemm-bench.txt"
