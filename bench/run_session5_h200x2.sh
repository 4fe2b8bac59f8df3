#!/usr/bin/env bash
# Session 5 on the 2x H200 machine (kind nvidia-h200-x2; one H200 runs all but step 4):
#   1. the kernel tests (RoPE + KV store with and without a QKV bias) and the engine tests (the tiny
#      model with QKV biases against the CPU reference; TP2 too when two GPUs are visible);
#   2. bench/run_serve_h200.sh on GPU 0 without --find-peak: Llama-3.1-8B with the new prefill
#      attention kernel, and the PyTorch CUDA-graph baseline in the same call;
#   3. gpuscout bench --only serve --model qwen2.5-7b on GPU 0: decode at batch 1/8/32 against the
#      HBM roofline, the 8k prefill against the run's BF16 GEMM, the 32 x 512/128 static batch;
#   4. with two GPUs: Qwen2.5-72B at TP2, the same cases.
# Usage, repository root there:  DIST=.devdist-q bash bench/run_session5_h200x2.sh
# DIST: scripts/make-device-dist.sh output plus infer_kernels_test and infer_engine_test. Leaves
# under $OUT: serve.json, torch_serve.jsonl, ratios.md, serve-qwen2.5-7b.json, serve-qwen2.5-72b-tp2.json
# (two GPUs), summary.txt, logs.tar.gz.
set -uo pipefail
FINAL=${OUT:-$PWD/out}
OUT=$(mktemp -d)
export DIST=${DIST:-.devdist-q}
mkdir -p "$FINAL"
source bench/dist_env.sh
summary="$OUT/summary.txt"
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
machine=$([ "$gpus" -ge 2 ] && echo nvidia-h200-x2 || echo nvidia-h200)
tags="--tags machine:$machine,script:run_session5_h200x2"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
  --format=csv >"$OUT/env.txt" 2>&1

run_logged "$OUT" "$summary" kernels_test 240 "$DIST/infer_kernels_test"
run_logged "$OUT" "$summary" engine_test 300 "$DIST/infer_engine_test"
s=$(date +%s)
CUDA_VISIBLE_DEVICES=0 MACHINE=$machine-gpu0 FIND_PEAK=0 OUT="$OUT/serve" bash bench/run_serve_h200.sh \
  >"$OUT/serve-llama.txt" 2>&1
echo "serve llama-3.1-8b + PyTorch baseline (GPU 0): exit $? ($(($(date +%s) - s)) s)" | tee -a "$summary"
run_logged "$OUT" "$summary" serve-qwen2.5-7b 420 env CUDA_VISIBLE_DEVICES=0 "$bin" -v bench \
  --only memory/ce_copy/4GiB,gemm/bf16/m8192_n8192_k8192,serve --memory-sizes 4GiB --gemm-sizes 8192 \
  --precisions bf16 --model qwen2.5-7b --out "$OUT/serve-qwen2.5-7b.json" $tags
if [ "$gpus" -ge 2 ]; then
  run_logged "$OUT" "$summary" serve-qwen2.5-72b-tp2 540 "$bin" -v bench \
    --only memory/ce_copy/4GiB,gemm/bf16/m8192_n8192_k8192,serve --memory-sizes 4GiB --gemm-sizes 8192 \
    --precisions bf16 --model qwen2.5-72b --tp 2 --out "$OUT/serve-qwen2.5-72b-tp2.json" $tags
fi

grep -h -E "rope_store_kv|FAILED|PASSED" "$OUT/kernels_test.txt"
grep -h -E "PASS|FAIL" "$OUT/engine_test.txt" | tail -12
grep -h -E "^\[gpu|serve/(decode|prefill|static)" "$OUT"/serve-qwen*.txt | grep -v "^serve/" | head -20
cat "$OUT/serve/serve_ratios.md" 2>/dev/null | tee "$FINAL/ratios.md"
cat "$summary"
cp "$OUT"/serve-qwen*.json "$OUT/serve/serve.json" "$OUT/serve/torch_serve.jsonl" "$summary" "$FINAL/" 2>/dev/null
tar -czf "$FINAL/logs.tar.gz" -C "$OUT" .
