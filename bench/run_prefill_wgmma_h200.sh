#!/usr/bin/env bash
# Session 14: prefill attention on warpgroup MMA (attention_prefill_wgmma.cu), on one H200 in one call:
#   1. infer_kernels_test: every kernel check (each prefill case on the automatic choice, mma.sync and
#      wgmma), then compute-sanitizer memcheck of them with only the wgmma kernel instrumented;
#   2. infer_kernels_test --bench: the prefill attention table (each kernel, 512 to 16k tokens) and
#      --prefill-step-bench: the 16 x 512 step's kernels alone;
#   3. infer_engine_test (engine against the CPU reference), then `infer_engine_test --bench
#      llama-3.1-8b` with GPUSCOUT_PREFILL_WGMMA=0 (the mma.sync kernel) and 1, interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_prefill_wgmma_h200.sh
# Writes $OUT/prefill-wgmma.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/prefill-wgmma.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  timeout 300 "$DIST/infer_kernels_test" | grep -E "prefill|FAIL|PASSED|SKIP"
  echo "== kernel checks: exit ${PIPESTATUS[0]}"
  if command -v compute-sanitizer >/dev/null; then
    timeout 240 compute-sanitizer --tool memcheck --kernel-name kns=prefill_wgmma_kernel --print-limit 20 \
      "$DIST/infer_kernels_test" | tail -3
    echo "== compute-sanitizer memcheck (wgmma kernel): exit ${PIPESTATUS[0]}"
  fi
  timeout 300 "$DIST/infer_kernels_test" --bench | grep -A14 "## prefill attention"
  timeout 200 "$DIST/infer_kernels_test" --prefill-step-bench | grep -E "prefill attention|sum per layer"
  timeout 300 "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -4
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  for round in $(seq "${ROUNDS:-2}"); do
    for wgmma in 0 1; do
      echo "== engine timing, GPUSCOUT_PREFILL_WGMMA=$wgmma, round $round"
      GPUSCOUT_PREFILL_WGMMA=$wgmma timeout 200 "$DIST/infer_engine_test" --bench llama-3.1-8b |
        grep -E "decode batch|prefill"
    done
  done
} >"$log" 2>&1
rm -f "$OUT/env.txt"
cut -c1-200 "$log"
