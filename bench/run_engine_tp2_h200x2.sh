#!/usr/bin/env bash
# The serving engine on the 2x H200 machine (kind nvidia-h200-x2), one call: the engine checks at
# TP1 and TP2 (tiny model against the CPU reference, with the decode attention plans timed at
# start-up and the one-row ring GEMV in its GEMMs; the injected-fault checks), then the engine's
# timing mode for Llama-3.1-70B at TP2, with the ring GEMV (default) and without (GPUSCOUT_RING_GEMV=0).
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_engine_tp2_h200x2.sh
# DIST holds gpuscout (scripts/make-device-dist.sh) plus infer_engine_test.
set -u
source bench/dist_env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
timeout 240 "$DIST/infer_engine_test" 2>&1 | grep -E "TP1|TP2|PASS|FAIL|fault|hang" | head -30
for ring in 1 0; do
  echo "== Llama-3.1-70B TP2 timing, GPUSCOUT_RING_GEMV=$ring"
  GPUSCOUT_RING_GEMV=$ring timeout 200 "$DIST/infer_engine_test" --bench llama-3.1-70b --tp 2 2>&1 |
    grep -E "start-up|m=1 |attention batch (1|32) context <= 2048|decode batch"
done
