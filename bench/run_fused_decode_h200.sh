#!/usr/bin/env bash
# Batch-1 decode as one persistent kernel (backends/cuda/infer/decode_fused.cu), A/B on one H200
# in one call: the engine checks (tiny model against the CPU reference; its batch-1 steps run the
# fused kernel at TP1), compute-sanitizer memcheck of the fused kernel inside those checks, then
# the engine's timing mode for Llama-3.1-8B with the fused kernel (fused) and without
# (--no-fused-decode: unfused), interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_fused_decode_h200.sh
# DIST holds gpuscout (scripts/make-device-dist.sh) plus infer_engine_test. Writes $OUT/fused-decode.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/fused-decode.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_engine_test" | tail -12
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  if [ "${MEMCHECK:-1}" = 1 ]; then
    timeout 600 compute-sanitizer --tool memcheck --kernel-name kns=fused_decode_kernel \
      "$DIST/infer_engine_test" 2>&1 | grep -E "ERROR SUMMARY|single|mixed|PASS|FAIL" | head -12
    echo "== memcheck of the fused kernel: exit ${PIPESTATUS[0]}"
  fi
  for round in $(seq "${ROUNDS:-2}"); do
    for model in ${MODELS:-llama-3.1-8b}; do
      for mode in ${MODES:-unfused fused}; do
        echo "== engine timing $model $mode, round $round"
        case $mode in
          unfused) "$DIST/infer_engine_test" --bench "$model" --no-fused-decode ;;
          *) "$DIST/infer_engine_test" --bench "$model" ;;
        esac | grep -E "start-up|fused decode|decode batch|prefill"
      done
    done
  done
} >"$log" 2>&1
grep -E "^==|PASS|FAIL|ERROR SUMMARY|fused decode|decode batch" "$log"
