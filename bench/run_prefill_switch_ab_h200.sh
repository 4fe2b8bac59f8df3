#!/usr/bin/env bash
# One H200: prefill attention with an environment switch SWITCH (a GPUSCOUT_PREFILL_* variable) on
# against off. Kernel checks (NaN-poisoned cache slots), compute-sanitizer memcheck of them, the
# kernels alone at 512..32k (infer_kernels_test --bench), the engine checks, then the engine bench and
# the serve prefills at 8k/32k with SWITCH=0 / 1 interleaved (ROUNDS, default 2). Session 19 ran it for
# GPUSCOUT_PREFILL_RELEASE and GPUSCOUT_PREFILL_OVERLAP (both reverted since).
#   SWITCH=GPUSCOUT_PREFILL_X NAME=prefill-x DIST=.devdist bash bench/run_prefill_switch_ab_h200.sh
# Needs $DIST/infer_kernels_test and infer_engine_test. Writes $OUT/NAME.txt and the serve result
# files as $OUT/NAME.tar.gz.
set -uo pipefail
source bench/dist_env.sh
switch=${SWITCH:?SWITCH: the GPUSCOUT_PREFILL_* variable to compare}
name=${NAME:-prefill-switch}
ab_begin "$name"
{
  echo "# build $("$bin" --version | head -1); $switch=0 / 1"
  echo "== infer_kernels_test (checks) and --bench"
  timeout 300 "$DIST/infer_kernels_test" --bench | grep -vE "^PASS " |
    grep -E "prefill|FAIL|SKIP|PASSED|FAILED|q_len|wgmma|mma.sync" | head -150
  if command -v compute-sanitizer >/dev/null; then
    echo "== compute-sanitizer memcheck (kernel checks)"
    timeout 300 compute-sanitizer --tool memcheck "$DIST/infer_kernels_test" 2>&1 | grep -E "ERROR SUMMARY|FAIL" | head
  fi
  echo "== infer_engine_test (checks)"
  timeout 300 "$DIST/infer_engine_test" 2>&1 | grep -E "FAIL|^infer_engine_test"
  for round in $(seq "${ROUNDS:-2}"); do
    for value in 0 1; do
      echo "== engine bench $switch=$value, round $round"
      env "$switch=$value" timeout 200 "$DIST/infer_engine_test" --bench llama-3.1-8b | grep -E "^prefill|^decode batch"
      echo "== serve prefill 8k/32k $switch=$value, round $round"
      env "$switch=$value" timeout 200 "$bin" bench --only serve/prefill --serve-prefill 8192,32768 \
        --out "$runs/serve-prefill-$value-$round.json" 2>&1 | grep -E "serve/prefill.*(time|throughput) "
    done
  done
} >>"$log" 2>&1
ab_end "$name"
