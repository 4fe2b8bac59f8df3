#!/usr/bin/env bash
# Session 5, second call on one H200 (kind nvidia-h200): the engine tests (now with FP8 weights and
# QKV biases together), then bench/run_serve_h200.sh for Qwen2.5-7B (MODEL=qwen2.5-7b: the serve
# cases and the PyTorch CUDA-graph baseline with QKV biases in the same call), Mistral-7B-v0.1 and
# Qwen2.5-7B with FP8 weights (serve cases only).
# Usage, repository root there:  DIST=.devdist-q bash bench/run_session5b_h200.sh
# Leaves under $OUT: serve.json, torch_serve.jsonl, ratios.md (Qwen2.5-7B), serve-mistral-7b.json,
# serve-qwen2.5-7b-fp8.json, summary.txt, logs.tar.gz.
set -uo pipefail
FINAL=${OUT:-$PWD/out}
OUT=$(mktemp -d)
export DIST=${DIST:-.devdist-q}
mkdir -p "$FINAL"
source bench/dist_env.sh
summary="$OUT/summary.txt"
tags="--tags machine:nvidia-h200,script:run_session5b_h200"
serve_flags=(--only memory/ce_copy/4GiB,gemm/bf16/m8192_n8192_k8192,gemm/fp8/m8192_n8192_k8192,serve
  --memory-sizes 4GiB --gemm-sizes 8192 --precisions bf16,fp8)

run_logged "$OUT" "$summary" engine_test 300 "$DIST/infer_engine_test"
s=$(date +%s)
MODEL=qwen2.5-7b MACHINE=nvidia-h200 FIND_PEAK=0 OUT="$OUT/serve" bash bench/run_serve_h200.sh >"$OUT/serve-qwen.txt" 2>&1
echo "serve qwen2.5-7b + PyTorch baseline: exit $? ($(($(date +%s) - s)) s)" | tee -a "$summary"
# Mistral 7B v0.1: the engine serves up to its 4096-token sliding window, so a 4000-token prefill.
run_logged "$OUT" "$summary" serve-mistral-7b 300 "$bin" -v bench "${serve_flags[@]}" --model mistral-7b-v0.1 \
  --serve-prefill 4000 --out "$OUT/serve-mistral-7b.json" $tags
run_logged "$OUT" "$summary" serve-qwen2.5-7b-fp8 300 "$bin" -v bench "${serve_flags[@]}" --model qwen2.5-7b \
  --weights fp8 --out "$OUT/serve-qwen2.5-7b-fp8.json" $tags

grep -h -E "PASS|FAIL" "$OUT/engine_test.txt" | tail -8
cat "$OUT/serve/serve_ratios.md" 2>/dev/null | tee "$FINAL/ratios.md"
grep -h -E "^\[gpu" "$OUT"/serve-mistral-7b.txt "$OUT"/serve-qwen2.5-7b-fp8.txt | grep -E "decode|prefill|static"
cat "$summary"
cp "$OUT/serve/serve.json" "$OUT/serve/torch_serve.jsonl" "$OUT"/serve-*.json "$summary" "$FINAL/" 2>/dev/null
tar -czf "$FINAL/logs.tar.gz" -C "$OUT" .
