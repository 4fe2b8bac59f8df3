#!/usr/bin/env bash
# Session 6: the flash kernels' shared K/V tile loop and fragment-row store (flash_forward.cuh),
# against the binaries before them, in one call on one H200: kernel checks and prefill attention
# timings (old, new, twice), train_step_test (new), the train-step benchmark at 4 x 4096 (old, new;
# the new one also reports executed_flops_rate as the flash kernels' tiles).
# The change was reverted (1aff96c): build NEW at 8789eeb, OLD at 958dd56, OLD_BIN at 7ce8fa3.
# Usage there: OLD=.devdist-m OLD_BIN=.devdist NEW=.devdist-c bash bench/run_flash_helpers_h200.sh
# (OLD: infer_kernels_test; OLD_BIN: gpuscout; NEW: gpuscout with lib/, infer_kernels_test,
# train_step_test). Writes $OUT/flash.txt and $OUT/train-{old,new}.json.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
log="$OUT/flash.txt"
export LD_LIBRARY_PATH="$PWD/$NEW/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for round in a b; do
  for v in OLD NEW; do
    timeout 150 "${!v}/infer_kernels_test" --bench >"$OUT/kernels.txt" 2>&1
    echo "== infer_kernels_test $v $round: exit $?" | tee -a "$log"
    grep -E "PASSED|FAILED" "$OUT/kernels.txt" | tee -a "$log"
    grep -A6 "^## prefill attention" "$OUT/kernels.txt" | tee -a "$log"
  done
done
rm -f "$OUT/kernels.txt"
timeout 120 "$NEW/train_step_test" >"$OUT/train-test.txt" 2>&1
echo "== train_step_test (new): exit $?" | tee -a "$log"
grep -E "FAIL|PASS" "$OUT/train-test.txt" | tail -3 | tee -a "$log"
rm -f "$OUT/train-test.txt"
for v in OLD_BIN NEW; do
  name=$([ $v = OLD_BIN ] && echo old || echo new)
  echo "== train-step benchmark ($name)" | tee -a "$log"
  timeout 150 "${!v}/gpuscout" -v bench --only train-step --model llama-3.1-8b --train-layers 4 \
    --micro-batch 4 --seq 4096 --out "$OUT/train-$name.json" 2>&1 | grep -E "train-step" | tee -a "$log"
done
