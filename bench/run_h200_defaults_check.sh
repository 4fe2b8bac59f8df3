#!/usr/bin/env bash
# Sessions 29 and 30 left three engine defaults measured on H100s only: the cuBLASLt configuration
# search (GPUSCOUT_GEMM_SEARCH), the small kernels on the GEMMs' shared-memory carveout
# (GPUSCOUT_SMALL_KERNEL_CARVEOUT) and the pair decode attention kernel offered to the start-up
# tuning (GPUSCOUT_DECODE_PAIR_KERNEL). One call on an H200 measures all three and the serve
# benchmark as shipped (about 230 s with ROUNDS=1, 400 s with 2, on an H100):
#   1. bench/run_serve_h200.sh with FIND_PEAK=0: decode, prefill and static batch beside PyTorch;
#   2. bench/run_decode_pair_serve_ab.sh, ROUNDS (default 2) interleaved rounds of the serve
#      benchmark's decode cases and static batch with the pair kernel withheld and offered;
#   3. bench/run_gemm_search_serve_ab_h200.sh, the same with the search off and on;
#   4. bench/run_small_kernel_carveout_ab.sh, ROUNDS interleaved engine benches with the carveout
#      switch off and on.
# It stops before doing anything on a card that is not an H200 (CARD=any runs it on whatever came).
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_h200_defaults_check.sh
# Writes under $OUT the files of the four scripts, the A/Bs' result-file archives in one
# (defaults-ab-runs.tar.gz): eight in all.
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
if [ "${CARD:-h200}" != any ] && [[ "$card" != *H200* ]]; then
  echo "this card is '$card', not an H200: nothing run (CARD=any runs it anyway)"
  exit 0
fi
echo "== card: $card"
FIND_PEAK=0 bash bench/run_serve_h200.sh 2>&1 | tail -24
echo "== pair kernel A/B (serve)"
ROUNDS=${ROUNDS:-2} bash bench/run_decode_pair_serve_ab.sh 2>&1 | grep -E "^==|decode/|static/" | cut -c1-200
echo "== search A/B (serve)"
ROUNDS=${ROUNDS:-2} bash bench/run_gemm_search_serve_ab_h200.sh 2>&1 | grep -E "^==|decode/|static/" | cut -c1-200
echo "== carveout A/B (engine bench)"
ROUNDS=${ROUNDS:-2} bash bench/run_small_kernel_carveout_ab.sh 2>&1 | grep -E "^==|decode batch" | cut -c1-120
# A call brings back at most eight files: the A/Bs' result-file archives go back as one.
(cd "${OUT:-$PWD/out}" && tar czf defaults-ab-runs.tar.gz ./*-ab.tar.gz && rm -f ./*-ab.tar.gz)
