#!/usr/bin/env bash
# Session 18: prefill attention's K/V by tensor copies against cp.async. Kernel checks (both loads,
# NaN-poisoned cache slots), compute-sanitizer memcheck of the prefill cases, the kernels alone at
# 512..32k (infer_kernels_test --bench), the engine checks, then the engine bench with
# GPUSCOUT_PREFILL_TMA=0 / 1 interleaved (ROUNDS, default 2) and the serve prefills at 8k/32k.
# Needs $DIST/infer_kernels_test and infer_engine_test. Writes $OUT/prefill-tma.txt and the serve
# result files as $OUT/prefill-tma.tar.gz.
set -uo pipefail
source bench/dist_env.sh
ab_begin prefill-tma
{
  echo "# build $("$bin" --version | head -1)"
  echo "== infer_kernels_test (checks) and --bench"
  timeout 300 "$DIST/infer_kernels_test" --bench | grep -vE "^PASS " | grep -E "prefill|FAIL|SKIP|PASSED|FAILED|q_len|wgmma|mma.sync|^ +[0-9]" | head -150
  if command -v compute-sanitizer >/dev/null; then
    echo "== compute-sanitizer memcheck (kernel checks)"
    timeout 300 compute-sanitizer --tool memcheck "$DIST/infer_kernels_test" 2>&1 | grep -E "ERROR SUMMARY|FAIL" | head
  fi
  echo "== infer_engine_test (checks)"
  timeout 300 "$DIST/infer_engine_test" 2>&1 | tail -3
  for round in $(seq "${ROUNDS:-2}"); do
    for tma in 0 1; do
      echo "== engine bench GPUSCOUT_PREFILL_TMA=$tma, round $round"
      GPUSCOUT_PREFILL_TMA=$tma timeout 200 "$DIST/infer_engine_test" --bench llama-3.1-8b | grep -E "^prefill|^decode batch"
      echo "== serve prefill 8k/32k GPUSCOUT_PREFILL_TMA=$tma, round $round"
      GPUSCOUT_PREFILL_TMA=$tma timeout 200 "$bin" bench --only serve/prefill --serve-prefill 8192,32768 \
        --out "$runs/serve-prefill-tma$tma-$round.json" 2>&1 | grep -E "serve/prefill.*(time|throughput) "
    done
  done
} >>"$log" 2>&1
ab_end prefill-tma
