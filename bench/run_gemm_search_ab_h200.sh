#!/usr/bin/env bash
# Session 25: cuBLASLt configurations beyond its heuristic's eight (GemmRunner's configuration search,
# GPUSCOUT_GEMM_SEARCH; bench/probe/lt_tactics_probe.cu found them).
# Checks first: infer_gemm_test (the runner at 1..64 rows, every cuBLASLt candidate at 8 and 32 rows
# against the CPU reference) and the engine's checks against the CPU reference with the search on
# (on by default in build 7fa6fdf, where this first ran; off by default from then to session 29, on
# again since). Then `infer_engine_test --bench llama-3.1-8b` with the search off and on, interleaved
# ROUNDS times (each run builds its own engine; start-up time, decode steps, prefill, mixed steps).
# Session 27 ran it again with cuBLASLt's runner-up in the in-step resolution (on by default since),
# where a searched pick is timed in whole steps against the heuristic's best.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_gemm_search_ab_h200.sh
# Writes $OUT/gemm-search-ab.txt.
set -u
source bench/dist_env.sh
ab_begin gemm-search-ab
{
  echo "== infer_gemm_test (checks)"
  "$DIST/infer_gemm_test" 2>&1 | grep -E "FAIL|runner|tune:|PASSED|FAILED" | cut -c1-400 | tail -60
  echo "== infer_engine_test (checks)"
  GPUSCOUT_GEMM_SEARCH=1 "$DIST/infer_engine_test" 2>&1 | grep -E "PASS|FAIL" | cut -c1-300 | tail -30
  engine_ab_switch GPUSCOUT_GEMM_SEARCH "${ROUNDS:-2}" "start-up|decode batch|graph replays|prefill|static|device|in-step batch (8|32)"
} >>"$log" 2>&1
cut -c1-300 "$log"
