#!/usr/bin/env bash
# FP8 (E4M3) weights in the serving engine on one H200 (kind nvidia-h200), BF16 beside it in the
# same call:
#   1. infer_kernels_test (FP8 weight codes bit-exact, dynamic quantization against CUDA's own
#      conversion, the FP8 decode GEMM against a CPU product) and infer_engine_test (the tiny model
#      with FP8 weights against the CPU reference);
#   2. infer_engine_test --bench MODEL, BF16 then --fp8: decode step at batch 1/8/32 against the
#      HBM roofline of the bytes each format reads, 8k prefill, the GEMM choices;
#   3. gpuscout bench --only ...,serve --weights fp8 with the copy and BF16/FP8 GEMM rates of the
#      run (serve records; prefill % of the FP8 GEMM rate), then (SERVE_BF16=1) the same for BF16;
#   4. (FP8_70B=1) Llama-3.1-70B with FP8 weights on ONE H200 (70 GB of weights): decode and prefill.
# Usage (repository root there; DIST made here with scripts/make-device-dist.sh plus the two test
# binaries):  DIST=.devdist-fp8 bash bench/run_engine_fp8_h200.sh
# Writes under $OUT: serve-fp8.json, serve-bf16.json, serve-70b-fp8.json, summary.txt, logs.tar.gz.
set -u
OUT=${OUT:-$PWD/out}
model=${MODEL:-llama-3.1-8b}
mkdir -p "$OUT"
source bench/dist_env.sh
logs=$(mktemp -d)
{
  date -u +%FT%TZ
  "$bin" --version
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
    --format=csv
} >"$logs/env.txt" 2>&1
run() { run_logged "$logs" "$OUT/summary.txt" "$@"; }  # name, timeout, command...
tags="--tags machine:nvidia-h200,script:run_engine_fp8_h200"
run kernels_test 180 "$DIST/infer_kernels_test"
run engine_test 240 "$DIST/infer_engine_test"
grep -h -E "fp8|FP8|PASS|FAIL" "$logs/kernels_test.txt" "$logs/engine_test.txt" | tee -a "$OUT/summary.txt"
run bench_bf16 200 "$DIST/infer_engine_test" --bench "$model"
run bench_fp8 200 "$DIST/infer_engine_test" --bench "$model" --fp8
grep -h -E "weights|decode batch|prefill" "$logs/bench_bf16.txt" "$logs/bench_fp8.txt" | tee -a "$OUT/summary.txt"
formats=fp8
[ "${SERVE_BF16:-0}" = 1 ] && formats="fp8 bf16"
for w in $formats; do
  run "serve_$w" 420 "$bin" -v bench \
    --only memory/ce_copy/4GiB,gemm/bf16/m8192_n8192_k8192,gemm/fp8/m8192_n8192_k8192,serve --memory-sizes 4GiB \
    --gemm-sizes 8192 --precisions bf16,fp8 --model "$model" --weights "$w" --out "$OUT/serve-$w.json" $tags
  grep -E "serve/" "$logs/serve_$w.txt" | tail -12 | tee -a "$OUT/summary.txt"
done
if [ "${FP8_70B:-0}" = 1 ]; then
  run serve_70b_fp8 420 "$bin" -v bench --only memory/ce_copy/4GiB,gemm/fp8/m8192_n8192_k8192,serve \
    --memory-sizes 4GiB --gemm-sizes 8192 --precisions fp8 --model llama-3.1-70b --weights fp8 --tp 1 \
    --serve-batch 1,8,32 --out "$OUT/serve-70b-fp8.json" $tags
  grep -E "serve/" "$logs/serve_70b_fp8.txt" | tail -12 | tee -a "$OUT/summary.txt"
fi
tar -czf "$OUT/logs.tar.gz" -C "$logs" .
