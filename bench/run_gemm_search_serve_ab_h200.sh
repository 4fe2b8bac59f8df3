#!/usr/bin/env bash
# Session 25: the serve benchmark's decode cases and static batch with GemmRunner's configuration
# search off (GPUSCOUT_GEMM_SEARCH=0) and on, interleaved ROUNDS times (each run builds its own
# engine): `gpuscout bench --only serve/decode,serve/static --model llama-3.1-8b`.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_gemm_search_serve_ab_h200.sh
# Writes $OUT/gemm-search-serve-ab.txt and $OUT/gemm-search-serve-ab.tar.gz (each run's result file).
set -u
source bench/dist_env.sh
ab_begin gemm-search-serve-ab
serve_ab_switch GPUSCOUT_GEMM_SEARCH serve/decode,serve/static search >>"$log" 2>&1
ab_end gemm-search-serve-ab
