#!/usr/bin/env bash
# Session 19, one H200: prefill attention under flash-attention-3's schedule (one block per SM, no
# block barrier per tile, softmax beside the previous tile's P V, the two warpgroups taking turns at
# their MMAs) against session 18's kernel. In order of need, each step's output appended to
# $OUT/prefill-pingpong.txt as it comes (a cut run still returns what it had): kernel checks (both
# forms), the kernel alone at 8k/32k per form (GPUSCOUT_PREFILL_PINGPONG=0/1), compute-sanitizer
# memcheck, the engine checks, the serve prefills at 8k/32k per form. Needs $DIST/infer_kernels_test
# and infer_engine_test.
set -uo pipefail
source bench/dist_env.sh
ab_begin prefill-pingpong  # $OUT, and $log with the environment header
step() { echo "== $*" >>"$log"; }
echo "# build $("$bin" --version | head -1)" >>"$log"
step "infer_kernels_test (checks)"
timeout 120 "$DIST/infer_kernels_test" 2>&1 | grep -E "FAIL|ping-pong\] +ok|PASSED|FAILED" | head -30 >>"$log"
for n in 8192 32768; do
  for pp in 0 1; do
    step "kernel alone PINGPONG=$pp, $n: $(GPUSCOUT_PREFILL_PINGPONG=$pp timeout 60 "$DIST/infer_kernels_test" --prefill-profile $n | tail -1)"
  done
done
step "compute-sanitizer memcheck (kernel checks)"
timeout 120 compute-sanitizer --tool memcheck "$DIST/infer_kernels_test" 2>&1 | grep -E "ERROR SUMMARY|FAIL" | head -5 >>"$log"
step "infer_engine_test (checks)"
timeout 120 "$DIST/infer_engine_test" 2>&1 | grep -E "FAIL|^infer_engine_test" >>"$log"
for pp in 0 1; do
  step "serve prefill 8k/32k PINGPONG=$pp"
  GPUSCOUT_PREFILL_PINGPONG=$pp timeout 100 "$bin" bench --only serve/prefill --serve-prefill 8192,32768 \
    --out "$OUT/serve-prefill-pingpong$pp.json" 2>&1 | grep -E "serve/prefill.*time " >>"$log"
done
cat "$log"
