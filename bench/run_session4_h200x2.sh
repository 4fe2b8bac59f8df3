#!/usr/bin/env bash
# One call on the 2x H200 machine (kind nvidia-h200-x2) for what session 4 changed, built from one
# committed tree:
#   1. the kernel tests (decode attention: automatic choice, streaming and split kernels; FP8) and
#      the engine tests (tiny model vs the CPU reference, TP1 and TP2, BF16 and FP8 weights, a
#      failing and a hanging rank);
#   2. bench/run_serve_h200.sh on GPU 0 without --find-peak: the serve cases and the PyTorch
#      CUDA-graph baseline in the same call (the static-batch ratio with the new decode attention);
#   3. Llama-3.1-70B with FP8 weights at TP2: decode, prefill and the static batch;
#   4. the multi-GPU GPU tests for collectives (single process and mpirun: NCCL's algorithm and
#      protocol must be known) and all_gather/broadcast's algorithm at 8 B, 1 MiB and 1 GiB.
# Usage, repository root there:  DIST=.devdist-s4 bash bench/run_session4_h200x2.sh
# DIST: scripts/make-device-dist.sh output plus infer_kernels_test and infer_engine_test. Leaves
# under $OUT: serve.json, torch_serve.jsonl, serve-70b-fp8-tp2.json, collectives-algo.json,
# ratios.md, steps.txt, all.tar.gz.
set -uo pipefail
FINAL=${OUT:-$PWD/out}
OUT=$(mktemp -d)
export DIST=${DIST:-.devdist-s4}
mkdir -p "$FINAL"
source bench/dist_env.sh
step() { echo "== $1: exit $2 after $(($(date +%s) - $3)) s" | tee -a "$OUT/steps.txt"; }
tags="--tags machine:nvidia-h200-x2,script:run_session4_h200x2"

s=$(date +%s)
timeout 240 "$DIST/infer_kernels_test" >"$OUT/kernels_test.txt" 2>&1
step "kernel tests" $? "$s"
s=$(date +%s)
timeout 300 "$DIST/infer_engine_test" >"$OUT/engine_test.txt" 2>&1
step "engine tests (TP1, TP2, FP8, faults)" $? "$s"
timeout 120 "$DIST/infer_engine_test" --bench llama-3.1-8b --knock-out attention >"$OUT/knockout_attention.txt" 2>&1

s=$(date +%s)
CUDA_VISIBLE_DEVICES=0 MACHINE=nvidia-h200-x2-gpu0 FIND_PEAK=0 OUT="$OUT/serve" bash bench/run_serve_h200.sh \
  >"$OUT/serve.txt" 2>&1
step "serve + PyTorch baseline (GPU 0)" $? "$s"

s=$(date +%s)
timeout 420 "$bin" -v bench --only memory/ce_copy/4GiB,gemm/fp8/m8192_n8192_k8192,serve --memory-sizes 4GiB \
  --gemm-sizes 8192 --precisions fp8 --model llama-3.1-70b --weights fp8 --tp 2 --serve-batch 1,8,32 \
  --out "$OUT/serve-70b-fp8-tp2.json" $tags >"$OUT/serve_70b.txt" 2>"$OUT/serve_70b.log"
step "Llama-3.1-70B FP8 TP2" $? "$s"

for what in collectives mpi; do
  s=$(date +%s)
  timeout 300 bash tests/gpu/check_multi_gpu.sh "$bin" "$what" ON >"$OUT/multi_$what.txt" 2>&1
  step "check_multi_gpu.sh $what" $? "$s"
done
s=$(date +%s)
timeout 180 "$bin" -v bench --only collectives --coll-ops all_gather,broadcast --coll-sizes 8,1MiB,1GiB \
  --out "$OUT/collectives-algo.json" $tags >"$OUT/collectives_algo.txt" 2>&1
step "all_gather/broadcast algorithm" $? "$s"

grep -h -E "PASS|FAIL|fault|ok   " "$OUT/engine_test.txt" | head -20
grep -h -E "FAILED|PASSED|FAIL " "$OUT/kernels_test.txt"
grep -h -E "decode batch" "$OUT/knockout_attention.txt"
cat "$OUT/serve/serve_ratios.md" 2>/dev/null | tee "$FINAL/ratios.md"
grep -E "serve/(decode|prefill|static)" "$OUT/serve_70b.txt" | grep -E "throughput|output_tokens_per_s " | head
cat "$OUT/steps.txt"
cp "$OUT/serve/serve.json" "$OUT/serve/torch_serve.jsonl" "$OUT/serve-70b-fp8-tp2.json" "$OUT/collectives-algo.json" \
  "$OUT/steps.txt" "$FINAL/" 2>/dev/null
tar -czf "$FINAL/all.tar.gz" -C "$OUT" .
