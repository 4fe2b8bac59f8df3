#!/usr/bin/env bash
# Session 19, one H200: prefill attention's tensor-copy kernel in three forms, chosen by
# GPUSCOUT_PREFILL_RELEASE / GPUSCOUT_PREFILL_WIDE: session 18's (0/0: two warpgroups, two stages, a
# block barrier at each tile), four warpgroups sharing a ring of four with the barrier (0/1), and
# with the per-stage release (1/1). Kernel checks and memcheck, the kernel alone at 8k and 32k per
# form, the engine checks, then the engine bench and the serve prefills at 8k/32k per form,
# interleaved (ROUNDS, default 2). Needs $DIST/infer_kernels_test and infer_engine_test. Writes
# $OUT/prefill-wide.txt and the serve result files as $OUT/prefill-wide.tar.gz.
set -uo pipefail
source bench/dist_env.sh
ab_begin prefill-wide
forms="0/0 0/1 1/1"
{
  echo "# build $("$bin" --version | head -1)"
  echo "== infer_kernels_test (checks)"
  timeout 300 "$DIST/infer_kernels_test" | grep -E "FAIL|SKIP.*wgmma|PASSED|FAILED" | head -40
  if command -v compute-sanitizer >/dev/null; then
    echo "== compute-sanitizer memcheck (kernel checks)"
    timeout 300 compute-sanitizer --tool memcheck "$DIST/infer_kernels_test" 2>&1 | grep -E "ERROR SUMMARY|FAIL" | head
  fi
  for round in 1 2; do
    for form in $forms; do
      for n in 8192 32768; do
        echo "== kernel alone RELEASE/WIDE=$form, $n, round $round: $(GPUSCOUT_PREFILL_RELEASE=${form%/*} \
          GPUSCOUT_PREFILL_WIDE=${form#*/} timeout 60 "$DIST/infer_kernels_test" --prefill-profile $n | tail -1)"
      done
    done
  done
  echo "== infer_engine_test (checks)"
  timeout 300 "$DIST/infer_engine_test" 2>&1 | grep -E "FAIL|^infer_engine_test"
  for round in $(seq "${ROUNDS:-2}"); do
    for form in $forms; do
      export GPUSCOUT_PREFILL_RELEASE=${form%/*} GPUSCOUT_PREFILL_WIDE=${form#*/}
      echo "== engine bench RELEASE/WIDE=$form, round $round"
      timeout 200 "$DIST/infer_engine_test" --bench llama-3.1-8b | grep -E "^prefill"
      echo "== serve prefill 8k/32k RELEASE/WIDE=$form, round $round"
      timeout 200 "$bin" bench --only serve/prefill --serve-prefill 8192,32768 \
        --out "$runs/serve-prefill-${form/\//-}-$round.json" 2>&1 | grep -E "serve/prefill.*time "
    done
  done
} >>"$log" 2>&1
ab_end prefill-wide
