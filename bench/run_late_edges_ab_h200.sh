#!/usr/bin/env bash
# Session 15: cuBLASLt GEMMs behind programmatic graph edges from a late RMSNorm / SiLU kernel
# (GemmRunner's late edges; reverted after this A/B, so a later build has no such edges and the
# switch does nothing). Checks first (infer_gemm_test, the engine's checks against the CPU reference,
# which capture graphs with the edges), then the serve benchmark's decode cases and static batch with
# the edges off (GPUSCOUT_LT_LATE_EDGES=0) and on, interleaved ROUNDS times (each run builds its own
# engine): `gpuscout bench --only serve/decode,serve/static --model llama-3.1-8b`.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=3 bash bench/run_late_edges_ab_h200.sh
# Writes $OUT/late-edges-ab.txt and $OUT/late-edges-ab.tar.gz (each run's result file).
set -u
source bench/dist_env.sh
ab_begin late-edges-ab
{
  echo "== infer_gemm_test"
  "$DIST/infer_gemm_test" 2>&1 | grep -E "FAIL|late edge|PASSED|FAILED" | cut -c1-300 | tail -12
  echo "== infer_engine_test (checks)"
  "$DIST/infer_engine_test" 2>&1 | grep -E "PASS|FAIL|late edge" | cut -c1-300 | tail -30
  serve_ab_switch GPUSCOUT_LT_LATE_EDGES serve/decode,serve/static edges
} >>"$log" 2>&1
ab_end late-edges-ab
