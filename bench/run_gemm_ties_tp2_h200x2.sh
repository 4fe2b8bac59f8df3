#!/usr/bin/env bash
# The in-step GEMM tie resolution at TP2 (kind nvidia-h200-x2), one call: the engine checks at TP1
# and TP2 (their graphs go through the resolution on both ranks; the injected-fault checks), then
# Llama-3.1-70B at TP2 in the engine's timing mode with the resolution, on this build and the
# previous one ($DIST/old, when there), and with NO_TIES=1 also without it (--no-gemm-ties),
# printing start-up, the in-step lines and the decode steps.
# Usage (repository root on the GPU machine): DIST=.devdist [NO_TIES=1] bash bench/run_gemm_ties_tp2_h200x2.sh
# DIST holds gpuscout (scripts/make-device-dist.sh) plus infer_engine_test [and old/infer_engine_test].
# Writes $OUT/gemm-ties-tp2.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
exec > >(tee "$OUT/gemm-ties-tp2.txt") 2>&1
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
timeout 300 "$DIST/infer_engine_test" 2>&1 | grep -E "TP1|TP2|PASS|FAIL|fault|hang" | head -40
# The resolution on this build and, where $DIST/old/infer_engine_test exists, on the previous one
# (start-up A/B); NO_TIES=1 adds this build without it.
for build in new old; do
  exe="$DIST/infer_engine_test"
  [ "$build" = old ] && exe="$DIST/old/infer_engine_test"
  [ -x "$exe" ] || continue
  echo "== Llama-3.1-70B TP2 timing resolved, $build build"
  timeout 240 "$exe" --bench llama-3.1-70b --tp 2 2>&1 | grep -E "start-up|in-step|decode batch"
done
if [ -n "${NO_TIES:-}" ]; then
  echo "== Llama-3.1-70B TP2 timing --no-gemm-ties"
  timeout 240 "$DIST/infer_engine_test" --bench llama-3.1-70b --tp 2 --no-gemm-ties 2>&1 |
    grep -E "start-up|in-step|decode batch"
fi
