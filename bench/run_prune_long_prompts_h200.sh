#!/usr/bin/env bash
# Session 16: the pruned last layer (EngineOptions::prune_last_layer) where prompts span several
# chunks: the engine's checks first (their long-chunks scenario has steps whose chunks complete no
# prompt), then an offline load of 16 prompts of 12000 tokens (8 output tokens each) under a step
# budget of 4096 tokens, so two of each prompt's three chunks sample nothing, with the pruning off
# (GPUSCOUT_PRUNE_LAST_LAYER=0) and on, interleaved ROUNDS times:
# `gpuscout bench --only serve/load --model llama-3.1-8b --scenario offline --requests 16 --isl 12000
# --osl 8 --max-step-tokens 4096`.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_prune_long_prompts_h200.sh
# Writes $OUT/prune-long-prompts.txt and $OUT/prune-long-prompts.tar.gz (each run's result file).
set -u
source bench/dist_env.sh
ab_begin prune-long-prompts
{
  echo "== infer_engine_test (checks)"
  "$DIST/infer_engine_test" 2>&1 | grep -E "PASS|FAIL" | cut -c1-300 | tail -30
  for round in $(seq "${ROUNDS:-2}"); do
    for prune in 0 1; do
      echo "== GPUSCOUT_PRUNE_LAST_LAYER=$prune, round $round"
      GPUSCOUT_PRUNE_LAST_LAYER=$prune "$bin" -v bench --only serve/load --model llama-3.1-8b --scenario offline \
        --requests 16 --isl 12000 --osl 8 --max-step-tokens 4096 --out "$runs/prune$prune-$round.json" \
        --tags "machine:nvidia-h200,script:$(basename "$0" .sh)" 2>&1 | grep -E "^\[gpu0\] serve/load"
      echo "== exit ${PIPESTATUS[0]}"
    done
  done
} >>"$log" 2>&1
ab_end prune-long-prompts
