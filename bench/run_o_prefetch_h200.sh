#!/usr/bin/env bash
# The o projection's weights prefetched into L2 by the batch-1 split attention (session 10), one
# H200, one call: the kernel checks (the split kernel's cases run with a prefetch range), memcheck
# of the split kernel, the engine checks, then `infer_engine_test --bench llama-3.1-8b` with
# --no-o-prefetch and without, interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_o_prefetch_h200.sh
# Writes $OUT/o-prefetch.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/o-prefetch.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" | grep -E "decode|FAIL|PASSED"
  echo "== kernel checks: exit ${PIPESTATUS[0]}"
  timeout 300 compute-sanitizer --tool memcheck --kernel-name kns=decode_split_kernel "$DIST/infer_kernels_test" \
    --decode-only 2>&1 | grep -E "ERROR SUMMARY|FAIL"
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL"
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  for round in $(seq "${ROUNDS:-3}"); do
    for variant in no-o-prefetch o-prefetch; do
      echo "== engine timing llama-3.1-8b $variant, round $round"
      flags=""
      [ "$variant" = no-o-prefetch ] && flags="--no-o-prefetch"
      "$DIST/infer_engine_test" --bench llama-3.1-8b $flags | grep -E "start-up|batch 1 context <= 2048|decode batch"
    done
  done
} >"$log" 2>&1
grep -E "^==|FAIL|ERROR SUMMARY|decode batch" "$log"
