#!/usr/bin/env bash
# Session 16: the last layer of a step with prefill chunks finished for the sampling rows only
# (EngineOptions::prune_last_layer). Checks first: the engine's checks against the CPU reference
# (their steps with prefill chunks run pruned by default). Then the serve benchmark's prefill case
# and static batch with the pruning off (GPUSCOUT_PRUNE_LAST_LAYER=0) and on, interleaved ROUNDS
# times (each run builds its own engine): `gpuscout bench --only serve/prefill,serve/static --model
# llama-3.1-8b`.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_prune_last_layer_ab_h200.sh
# Writes $OUT/prune-last-layer-ab.txt and $OUT/prune-last-layer-ab.tar.gz (each run's result file).
set -u
source bench/dist_env.sh
ab_begin prune-last-layer-ab
{
  echo "== infer_engine_test (checks)"
  "$DIST/infer_engine_test" 2>&1 | grep -E "PASS|FAIL" | cut -c1-300 | tail -30
  serve_ab_switch GPUSCOUT_PRUNE_LAST_LAYER serve/prefill,serve/static prune
} >>"$log" 2>&1
ab_end prune-last-layer-ab
