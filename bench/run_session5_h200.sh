#!/usr/bin/env bash
# One call on one H200 (kind nvidia-h200) for the L2 weight prefetch of session 5:
#   1. the kernel tests (prefetch leaves the row kernels' outputs unchanged) and the engine tests
#      (tiny model vs the CPU reference, with the default prefetch);
#   2. the engine's decode/prefill timing (infer_engine_test --bench) with prefetch budgets
#      0,16,0,16,8,32 MiB per GEMM, one engine each in turn: an interleaved A/B in one process
#      (and 0,16 with FP8 weights);
#   3. bench/run_serve_h200.sh without --find-peak (the serve cases with the default prefetch and the
#      PyTorch CUDA-graph baseline in the same call), then the same serve cases with prefetch off.
# Usage, repository root there:  DIST=.devdist-s5 bash bench/run_session5_h200.sh
# DIST: scripts/make-device-dist.sh output plus infer_kernels_test and infer_engine_test. Leaves
# under $OUT: serve.json, serve-prefetch-off.json, torch_serve.jsonl, ratios.md, engine-ab.txt,
# summary.txt, all.tar.gz.
set -uo pipefail
FINAL=${OUT:-$PWD/out}
OUT=$(mktemp -d)
export DIST=${DIST:-.devdist-s5}
mkdir -p "$FINAL"
source bench/dist_env.sh
summary="$OUT/summary.txt"
tags="--tags machine:nvidia-h200,script:run_session5_h200"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv >"$OUT/env.txt" 2>&1

run_logged "$OUT" "$summary" kernels_test 240 "$DIST/infer_kernels_test"
run_logged "$OUT" "$summary" engine_test 300 "$DIST/infer_engine_test"
run_logged "$OUT" "$summary" engine-ab 420 "$DIST/infer_engine_test" --bench llama-3.1-8b \
  --l2-prefetch-mb 0,16,0,16,8,32
run_logged "$OUT" "$summary" engine-ab-fp8 240 "$DIST/infer_engine_test" --bench llama-3.1-8b --fp8 \
  --l2-prefetch-mb 0,16

s=$(date +%s)
MACHINE=nvidia-h200 FIND_PEAK=0 OUT="$OUT/serve" bash bench/run_serve_h200.sh >"$OUT/serve.txt" 2>&1
echo "serve + PyTorch baseline: exit $? ($(($(date +%s) - s)) s)" | tee -a "$summary"
run_logged "$OUT" "$summary" serve-prefetch-off 300 "$bin" -v bench \
  --only memory/ce_copy/4GiB,gemm/bf16/m8192_n8192_k8192,serve --memory-sizes 4GiB --gemm-sizes 8192 \
  --precisions bf16 --model llama-3.1-8b --l2-prefetch-mb 0 --out "$OUT/serve-prefetch-off.json" $tags

grep -h -E "FAIL|failures|passed" "$OUT/kernels_test.txt" | tail -5
grep -h -E "l2 prefetch" "$OUT/kernels_test.txt"
grep -h -E "PASS|FAIL|ok   " "$OUT/engine_test.txt" | tail -8
grep -h -E "L2 prefetch|decode batch|prefill" "$OUT/engine-ab.txt" "$OUT/engine-ab-fp8.txt" | tee "$FINAL/engine-ab.txt"
cat "$OUT/serve/serve_ratios.md" 2>/dev/null | tee "$FINAL/ratios.md"
grep -h -E "serve/(decode|prefill|static)" "$OUT/serve-prefetch-off.txt" | head -12
cat "$summary"
cp "$OUT/serve/serve.json" "$OUT/serve/torch_serve.jsonl" "$OUT/serve-prefetch-off.json" "$summary" "$FINAL/" \
  2>/dev/null
tar -czf "$FINAL/all.tar.gz" -C "$OUT" .
