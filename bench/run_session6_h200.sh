#!/usr/bin/env bash
# Session 6 on one H200, one call: the kernel checks (with the multi-token RoPE cases) and the
# 16 x 512 prefill-step timings, compute-sanitizer memcheck of the RoPE kernel, the engine checks
# and timing mode, then (checks passed) the serve benchmark against PyTorch in the same call
# (bench/run_serve_h200.sh with FIND_PEAK=0).
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_session6_h200.sh
# DIST holds gpuscout (scripts/make-device-dist.sh) plus infer_kernels_test and infer_engine_test.
# Writes under $OUT: checks.txt, sanitizer.txt, engine.txt, and run_serve_h200.sh's files.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
"$DIST/infer_kernels_test" --prefill-step-bench >"$OUT/checks.txt" 2>&1
checks=$?
echo "== kernel checks: exit $checks"
timeout 300 compute-sanitizer --tool memcheck --kernel-name kns=rope_store_kv --print-limit 20 \
  "$DIST/infer_kernels_test" >"$OUT/sanitizer.txt" 2>&1
echo "== memcheck (rope_store_kv): exit $?" | tee -a "$OUT/sanitizer.txt"
{
  "$DIST/infer_engine_test"
  echo "== engine checks: exit $?"
  "$DIST/infer_engine_test" --bench llama-3.1-8b
  echo "== engine timing: exit $?"
} >"$OUT/engine.txt" 2>&1
grep "==" "$OUT/engine.txt"
grep -A12 "## one prefill" "$OUT/checks.txt"
grep -E "decode batch|prefill" "$OUT/engine.txt"
if [ "$checks" = 0 ] && grep -q "engine checks: exit 0" "$OUT/engine.txt"; then
  FIND_PEAK=0 bash bench/run_serve_h200.sh
fi
