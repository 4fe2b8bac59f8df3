#!/usr/bin/env bash
# The LM-head GEMM (N = vocab 128256, K = hidden) through `gpuscout bench --only gemm`, for the speed
# model's weight-stream curve past the largest layer it had (gate_up, 235 MB): Llama-3.1-8B (1.05 GB of
# BF16 weights) and Llama-3.1-70B (2.1 GB), BF16 and FP8, decode to prefill token counts, with the
# 8192 square as the in-call reference. One call on one H200:
#   scripts/make-device-dist.sh build .devdist && strip .devdist/gpuscout
#   DIST=.devdist bash bench/run_gemm_lm_head_h200.sh          (carry .devdist)
# Writes under $OUT: env.txt, gemm-lm-head-{8b,70b}.json and .txt, summary.txt.
set -u
out=${OUT:-out}
mkdir -p "$out"
source bench/dist_env.sh
write_env "$out/env.txt"
cat "$out/env.txt"
for model in 8b 70b; do
  sizes=8192
  [ "$model" = 70b ] && sizes=none
  run_logged "$out" "$out/summary.txt" "gemm-lm-head-$model" 280 \
    "$bin" -v bench --only gemm --gemm-model "llama-3.1-$model" --gemm-shapes lm_head \
    --gemm-m 1,8,32,128,512,4096,16384 --gemm-sizes "$sizes" --precisions bf16,fp8 \
    --out "$out/gemm-lm-head-$model.json"
  grep -E "^gemm/" "$out/gemm-lm-head-$model.txt"
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv >>"$out/env.txt" 2>&1
cat "$out/summary.txt"
