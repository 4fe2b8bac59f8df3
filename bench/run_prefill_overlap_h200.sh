#!/usr/bin/env bash
# Session 19, one H200: prefill attention with the softmax of each tile overlapping the P V of the
# tile before in the same warpgroup (one block per SM, four stages) against session 18's kernel. Kernel
# checks (both, NaN-poisoned cache slots), compute-sanitizer memcheck, the kernels alone at 512..32k
# (infer_kernels_test --bench), the engine checks, then the engine bench and the serve prefills at
# 8k/32k with GPUSCOUT_PREFILL_OVERLAP=0 / 1 interleaved (ROUNDS, default 2). Needs $DIST/infer_kernels_test
# and infer_engine_test. Writes $OUT/prefill-overlap.txt and the serve result files as $OUT/prefill-overlap.tar.gz.
set -uo pipefail
source bench/dist_env.sh
ab_begin prefill-overlap
{
  echo "# build $("$bin" --version | head -1)"
  echo "== infer_kernels_test (checks) and --bench"
  timeout 300 "$DIST/infer_kernels_test" --bench | grep -vE "^PASS " |
    grep -E "prefill|FAIL|SKIP|PASSED|FAILED|q_len|wgmma|mma.sync|overlap" | head -150
  if command -v compute-sanitizer >/dev/null; then
    echo "== compute-sanitizer memcheck (kernel checks)"
    timeout 300 compute-sanitizer --tool memcheck "$DIST/infer_kernels_test" 2>&1 | grep -E "ERROR SUMMARY|FAIL" | head
  fi
  echo "== infer_engine_test (checks)"
  timeout 300 "$DIST/infer_engine_test" 2>&1 | grep -E "FAIL|^infer_engine_test"
  for round in $(seq "${ROUNDS:-2}"); do
    for overlap in 0 1; do
      echo "== engine bench GPUSCOUT_PREFILL_OVERLAP=$overlap, round $round"
      GPUSCOUT_PREFILL_OVERLAP=$overlap timeout 200 "$DIST/infer_engine_test" --bench llama-3.1-8b |
        grep -E "^prefill|^decode batch"
      echo "== serve prefill 8k/32k GPUSCOUT_PREFILL_OVERLAP=$overlap, round $round"
      GPUSCOUT_PREFILL_OVERLAP=$overlap timeout 200 "$bin" bench --only serve/prefill --serve-prefill 8192,32768 \
        --out "$runs/serve-prefill-overlap$overlap-$round.json" 2>&1 | grep -E "serve/prefill.*(time|throughput) "
    done
  done
} >>"$log" 2>&1
ab_end prefill-overlap
