#!/usr/bin/env bash
# Decode attention merge A/B on one H200, one call: the new build's kernel checks and memcheck of the
# decode kernels, then the decode attention timings (infer_kernels_test --decode-only --bench) and the
# engine's timing mode for Llama-3.1-8B and Qwen2.5-7B, old (OLD) and new (NEW) binaries interleaved.
# Usage (repository root on the GPU machine): DIST=.devdist OLD=.devdist NEW=.devdist-m \
#   bash bench/run_decode_merge_h200.sh   (DIST: libraries; OLD/NEW: infer_kernels_test, infer_engine_test)
# Writes $OUT/merge.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/merge.txt"
write_env "$log.env"
{
  cat "$log.env"
  rm -f "$log.env"
  echo "== checks (new)"
  "$NEW/infer_kernels_test" | grep -E "decode|FAIL|PASSED"
  echo "== memcheck, decode kernels (new)"
  timeout 200 compute-sanitizer --tool memcheck --kernel-name kns=decode --print-limit 20 \
    "$NEW/infer_kernels_test" --decode-only 2>&1 | tail -3
  for round in a b; do
    for v in OLD NEW; do
      echo "== kernels $v $round"
      "${!v}/infer_kernels_test" --decode-only --bench | grep -A6 "^## decode attention"
    done
  done
  for round in a b; do
    for model in llama-3.1-8b qwen2.5-7b; do
      for v in OLD NEW; do
        echo "== engine $model $v $round"
        "${!v}/infer_engine_test" --bench "$model" | grep -E "decode batch"
      done
    done
  done
} >"$log" 2>&1
grep -E "^==|PASSED|FAIL|ERROR SUMMARY|^ +(1|8|32) |decode batch" "$log"
