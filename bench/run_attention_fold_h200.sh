#!/usr/bin/env bash
# The batch-1 attention chain folded into one kernel (session 10): the split decode kernel at 128
# threads merging in its last split, and RoPE + the KV store done inside it in decode-only steps.
# One H200, one call: the kernel checks (decode attention cases, the RoPE fold against the RoPE
# kernel + split kernel bit for bit), compute-sanitizer memcheck of the split kernel, the engine
# checks, the decode attention kernels timed alone (previous build and this one), then
# `infer_engine_test --bench llama-3.1-8b` of the previous build, this one with --no-rope-fold, and
# this one, interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_attention_fold_h200.sh
# DIST holds gpuscout (scripts/make-device-dist.sh), infer_kernels_test, infer_engine_test and
# old/infer_engine_test, old/infer_kernels_test. Writes $OUT/attention-fold.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/attention-fold.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" | grep -E "decode|RoPE|rope|FAIL|PASSED"
  echo "== kernel checks: exit ${PIPESTATUS[0]}"
  timeout 300 compute-sanitizer --tool memcheck --kernel-name kns=decode_split_kernel "$DIST/infer_kernels_test" \
    --decode-only 2>&1 | grep -E "ERROR SUMMARY|FAIL"
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL"
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  for build in old new; do
    exe="$DIST/infer_kernels_test"
    [ "$build" = old ] && exe="$DIST/old/infer_kernels_test"
    echo "== decode attention alone, $build"
    "$exe" --decode-only --bench | grep -vE " ok  "
  done
  for round in $(seq "${ROUNDS:-2}"); do
    for variant in old no-rope-fold new; do
      echo "== engine timing llama-3.1-8b $variant, round $round"
      case $variant in
        old) "$DIST/old/infer_engine_test" --bench llama-3.1-8b ;;
        no-rope-fold) "$DIST/infer_engine_test" --bench llama-3.1-8b --no-rope-fold ;;
        new) "$DIST/infer_engine_test" --bench llama-3.1-8b ;;
      esac | grep -E "start-up|batch 1 context <= 2048|decode batch|prefill"
    done
  done
} >"$log" 2>&1
grep -E "^==|FAIL|ERROR SUMMARY|decode batch|start-up" "$log"
