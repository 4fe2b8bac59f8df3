#!/usr/bin/env bash
# Session 35: everything the static-batch target still needs from an H200, in one call (~450 s):
#   1. bench/run_kernel_trace_h200.sh with RUNS=pairs1 (the engine as shipped), for the floor that
#      bench/decode_floor.py computes from the batch-32 step;
#   2. bench/run_h200_defaults_check.sh with ROUNDS=1: the serve benchmark beside PyTorch and the A/Bs
#      of the three defaults measured on H100s only (GEMM search, small-kernel carveout, pair kernel).
# QUICK=1 runs bench/run_serve_h200.sh (FIND_PEAK=0) in place of part 2: the floor's inputs alone,
# about 150 s in all. It stops before doing anything on a card that is not an H200 (CARD=any runs it
# on whatever came).
# A call brings back at most eight files, so the parts work in a scratch folder and $OUT gets the
# files the floor needs (trace summary, serve.json, torch_serve.jsonl, serve_ratios.md), the two
# logs, and one archive of the rest.
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_session35_h200.sh
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
if [ "${CARD:-h200}" != any ] && [[ "$card" != *H200* ]]; then
  echo "this card is '$card', not an H200: nothing run (CARD=any runs it anyway)"
  exit 0
fi
final=${OUT:-$PWD/out}
mkdir -p "$final"
work=$(mktemp -d)
# Leaves time to package what ran even when a part runs long.
OUT="$work/trace" SKIP_UNTRACED=1 NO_RAW=1 RUNS=pairs1 timeout 200 \
  bash bench/run_kernel_trace_h200.sh >"$final/trace.log" 2>&1
echo "trace rc $?" >>"$final/trace.log"
if [ -n "${QUICK:-}" ]; then
  OUT="$work/defaults" FIND_PEAK=0 timeout 360 bash bench/run_serve_h200.sh >"$final/defaults.log" 2>&1
else
  OUT="$work/defaults" ROUNDS=${ROUNDS:-1} CARD=${CARD:-h200} timeout 360 \
    bash bench/run_h200_defaults_check.sh >"$final/defaults.log" 2>&1
fi
echo "defaults rc $?" >>"$final/defaults.log"
for f in trace/kernel-trace-pairs1.txt defaults/serve.json defaults/torch_serve.jsonl \
  defaults/serve_ratios.md; do
  [ -f "$work/$f" ] && mv "$work/$f" "$final/"
done
tar -czf "$final/session35-rest.tar.gz" -C "$work" .
tail -30 "$final/defaults.log"
