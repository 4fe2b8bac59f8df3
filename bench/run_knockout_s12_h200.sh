#!/usr/bin/env bash
# Session 12: where the decode step and the 16 x 512 prefill step go now, on one H200 in one call:
#   1. infer_kernels_test --prefill-step-bench: each kernel of a 16 x 512-token prefill step alone;
#   2. `infer_engine_test --bench llama-3.1-8b` in full, then with each small-kernel group knocked out
#      (norms, rope, attention, silu), then all four (timing attribution of decode steps only).
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_knockout_s12_h200.sh
# Writes $OUT/knockout.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/knockout.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" --prefill-step-bench | sed -n '/prefill step/,$p'
  echo "== prefill-step bench: exit ${PIPESTATUS[0]}"
  for ko in "" norms rope attention silu norms,rope,attention,silu; do
    echo "== engine timing llama-3.1-8b knock-out '${ko:-none}'"
    # shellcheck disable=SC2046
    "$DIST/infer_engine_test" --bench llama-3.1-8b $( [ -n "$ko" ] && echo --knock-out "$ko" ) | grep -E "decode batch|prefill"
  done
} >"$log" 2>&1
rm -f "$OUT/env.txt"
cat "$log"
