#!/usr/bin/env bash
# Session 5: the prefill kernel and the train step's forward on one shared flash-attention core
# (backends/cuda/infer/flash_forward.cuh), against the binaries built before it, in one call on one
# H200: the kernel checks and prefill timings (old, new), the train-step test (new), and the
# train-step benchmark at 4 x 4096 (old, new).
# Usage there: bash bench/run_flash_shared_h200.sh with .devdist-q (old infer_kernels_test),
# .devdist-train (old gpuscout) and .devdist-r (new: gpuscout, infer_kernels_test, train_step_test)
# carried. Writes $OUT/shared.txt.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
log="$OUT/shared.txt"
export LD_LIBRARY_PATH="$PWD/.devdist-r/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for which in q r; do
  name=$([ $which = q ] && echo old || echo new)
  timeout 150 ".devdist-$which/infer_kernels_test" --bench >"$OUT/kernels-$name.txt" 2>&1
  echo "== infer_kernels_test ($name): exit $?" | tee -a "$log"
  grep -E "PASSED|FAILED" "$OUT/kernels-$name.txt" | tee -a "$log"
  grep -A6 "^## prefill attention" "$OUT/kernels-$name.txt" | tee -a "$log"
done
timeout 120 .devdist-r/train_step_test >"$OUT/train-test.txt" 2>&1
echo "== train_step_test (new): exit $?" | tee -a "$log"
grep -E "FAIL|passed|PASS" "$OUT/train-test.txt" | tail -4 | tee -a "$log"
for which in train r; do
  name=$([ $which = train ] && echo old || echo new)
  echo "== train-step benchmark ($name)" | tee -a "$log"
  timeout 120 ".devdist-$which/gpuscout" -v bench --only train-step --model llama-3.1-8b --train-layers 4 \
    --micro-batch 4 --seq 4096 --out "$OUT/train-$name.json" 2>&1 | grep -E "^\[gpu0\] train-step" | tee -a "$log"
done
