#!/usr/bin/env bash
# Session 25: FP8 weights on one H200 with the current engine (last measured in session 2, before the
# ring GEMV, programmatic launch, tuned attention plans and the pruned last layer):
#   1. Llama-3.1-70B in BF16 on one GPU: must stop with the engine's "does not fit" message;
#   2. Llama-3.1-8B with --weights fp8: decode b1/8/32, 8k prefill, static batch, with the copy and
#      FP8 GEMM rates of the same run;
#   3. Llama-3.1-70B with --weights fp8 --tp 1: the same cases.
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_fp8_serve_h200.sh
# Writes $OUT/fp8-serve.txt and $OUT/serve-{llama-3.1-8b,llama-3.1-70b}-fp8.json.
set -u
source bench/dist_env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
log="$OUT/fp8-serve.txt"
write_env "$log"
tags="--tags machine:nvidia-h200,script:run_fp8_serve_h200"
{
  echo "== llama-3.1-70b bf16 tp1 (expected: does not fit)"
  "$bin" bench --only serve/decode --model llama-3.1-70b --out "$OUT/serve-70b-bf16-tp1.json" $tags 2>&1 | tail -5
  echo "== exit ${PIPESTATUS[0]}"
  rm -f "$OUT/serve-70b-bf16-tp1.json"
  for model in llama-3.1-8b llama-3.1-70b; do
    echo "== $model fp8 tp1"
    s=$(date +%s)
    "$bin" -v bench --only memory/ce_copy/4GiB,gemm/fp8/m8192_n8192_k8192,serve --memory-sizes 4GiB \
      --gemm-sizes 8192 --precisions fp8 --model "$model" --weights fp8 --tp 1 \
      --out "$OUT/serve-$model-fp8.json" $tags 2>&1 | grep -E "^\[gpu0\] (serve|gemm|memory)|error|failed" | cut -c1-250
    echo "== exit ${PIPESTATUS[0]} after $(($(date +%s) - s)) s"
  done
} >>"$log" 2>&1
cat "$log"
