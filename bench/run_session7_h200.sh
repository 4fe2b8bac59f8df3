#!/usr/bin/env bash
# Session 7 on one H200, one call: the decode attention tuning A/B (bench/run_attention_tuning_h200.sh),
# then the serve benchmark for Llama-3.1-8B against PyTorch in the same call (bench/run_serve_h200.sh,
# FIND_PEAK=0) and gpuscout's serve cases for Qwen2.5-7B (the head shape the tuning moved).
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_session7_h200.sh
# DIST holds gpuscout (scripts/make-device-dist.sh) plus infer_kernels_test and infer_engine_test.
# Writes under $OUT: attention-tuning.txt, env.txt, run_serve_h200.sh's files, serve-qwen2.5-7b.json.
set -u
OUT=${OUT:-$PWD/out}
export OUT
mkdir -p "$OUT"
source bench/dist_env.sh
ROUNDS=${ROUNDS:-2} bash bench/run_attention_tuning_h200.sh
FIND_PEAK=0 bash bench/run_serve_h200.sh
start=$(date +%s)
"$bin" -v bench --only serve --model qwen2.5-7b --out "$OUT/serve-qwen2.5-7b.json" \
  --tags machine:nvidia-h200,script:run_session7_h200 >>"$OUT/attention-tuning.txt" 2>&1
echo "== Qwen2.5-7B serve cases: exit $? after $(($(date +%s) - start)) s"
grep -E "serve/(decode|static)" "$OUT/attention-tuning.txt" | tail -8
