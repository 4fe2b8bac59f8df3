#!/usr/bin/env bash
# Session 25: more interleaved rounds of the configuration search off / on (GPUSCOUT_GEMM_SEARCH=0/1),
# in both harnesses: `infer_engine_test --bench llama-3.1-8b` (decode lines and start-up; ENGINE_ROUNDS,
# default 4) and the serve benchmark's decode cases and static batch (SERVE_ROUNDS, default 2).
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_gemm_search_rounds_h200.sh
# Writes $OUT/gemm-search-rounds.txt and $OUT/gemm-search-rounds.tar.gz (the serve runs' result files).
set -u
source bench/dist_env.sh
ab_begin gemm-search-rounds
{
  for round in $(seq "${ENGINE_ROUNDS:-4}"); do
    for value in 0 1; do
      echo "== engine timing GPUSCOUT_GEMM_SEARCH=$value, round $round"
      GPUSCOUT_GEMM_SEARCH=$value "$DIST/infer_engine_test" --bench llama-3.1-8b 2>&1 |
        grep -E "start-up|^decode batch" | cut -c1-200
      nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
    done
  done
  ROUNDS=${SERVE_ROUNDS:-2} serve_ab_switch GPUSCOUT_GEMM_SEARCH serve/decode,serve/static search
} >>"$log" 2>&1
ab_end gemm-search-rounds
