#!/usr/bin/env bash
# Session 27: the o projection's weights prefetched into the L2 during a decode step's RoPE kernel
# (GPUSCOUT_L2_PREFETCH=1) or decode attention (=2), K/V loaded evict-first meanwhile. The kernel
# timeline (session 26) showed attention streaming K/V at ~67% of the copy rate and the o GEMM after
# it at ~78%: HBM time unused in the one, weight bytes the other could find in the L2.
# Checks first: the engine's scenarios against the CPU reference with each value; then
# `infer_engine_test --bench MODEL` with 0, 1 and 2, interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 [MODEL=llama-3.1-8b] [CHECKS=0]
#   bash bench/run_l2_prefetch_ab_h200.sh
# Writes $OUT/l2-prefetch-ab.txt. The switch is gone since (no gain; bench/NOTES.md, session 27): run it
# with a build of commit 2972bb1.
set -u
source bench/dist_env.sh
model=${MODEL:-llama-3.1-8b}
ab_begin l2-prefetch-ab
{
  if [ "${CHECKS:-1}" = 1 ]; then
    for value in 1 2; do
      echo "== infer_engine_test (checks, GPUSCOUT_L2_PREFETCH=$value) $(date -u +%T)"
      GPUSCOUT_L2_PREFETCH=$value timeout 400 "$DIST/infer_engine_test" 2>&1 | grep -E "PASS|FAIL|rror" |
        cut -c1-300 | tail -40
    done
  fi
  for round in $(seq "${ROUNDS:-2}"); do
    for value in 0 1 2; do
      echo "== engine timing $model GPUSCOUT_L2_PREFETCH=$value, round $round $(date -u +%T)"
      GPUSCOUT_L2_PREFETCH=$value timeout 300 "$DIST/infer_engine_test" --bench "$model" 2>&1 |
        grep -E "device|start-up|decode batch|graph replays|prefill|in-step batch (1|8|16|32)|rror" | cut -c1-400
    done
  done
  echo "== done $(date -u +%T)"
} >>"$log" 2>&1
cut -c1-400 "$log"
