#!/usr/bin/env bash
# Session 13: how much of a decode step is spent outside the GPU's work, on one H200 in one call.
# `infer_engine_test --bench llama-3.1-8b` times each decode step as execute()'s wall time (metadata
# copy, graph launch, token copy, host wake-up included) and then the same step's graph replayed 64
# times back to back between two events; the difference is the host's share of a step. Also
# compute-sanitizer memcheck of the RMSNorm kernels (session 12's 128-thread blocks), which session
# 12 had no device time left for.
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_host_gap_h200.sh
# Writes $OUT/host-gap.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/host-gap.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  for round in 1 2; do
    echo "== engine timing llama-3.1-8b, round $round"
    "$DIST/infer_engine_test" --bench llama-3.1-8b | grep -E "decode batch|graph replays|prefill"
  done
  if command -v compute-sanitizer >/dev/null; then
    timeout 300 compute-sanitizer --tool memcheck --kernel-name kns=rmsnorm --print-limit 20 \
      "$DIST/infer_kernels_test" | grep -E "rmsnorm|ERROR SUMMARY|FAIL|PASSED"
    echo "== compute-sanitizer memcheck (rmsnorm kernels): exit ${PIPESTATUS[0]}"
  fi
} >"$log" 2>&1
rm -f "$OUT/env.txt"
cut -c1-240 "$log"
