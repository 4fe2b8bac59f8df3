#!/usr/bin/env bash
# Ran against the commits its result files name (bench/results/h200-attention-*-s12-*); the code it
# exercises (the 2-stage decode attention candidate, then the L2 prefetch) was reverted after those
# runs, as bench/NOTES.md (session 12) records.
# Session 12: the streaming decode attention with a 2-stage pipeline (three blocks per SM), on one
# H200 in one call:
#   1. infer_kernels_test --decode-only --bench: the decode attention checks (every case also on the
#      2-stage pipeline), then the kernels timed per batch and context (grids 3/SM and 4/SM on it);
#   2. compute-sanitizer memcheck of those checks;
#   3. infer_engine_test: the engine against the CPU reference;
#   4. `infer_engine_test --bench llama-3.1-8b` of the previous build ($DIST/old/infer_engine_test)
#      and this one interleaved ROUNDS times, with the attention plans the start-up tuning chose.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_attention_stages_h200.sh
# Writes $OUT/attention-stages.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/attention-stages.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" --decode-only --bench | grep -vE " ok "
  echo "== decode attention checks and timings: exit ${PIPESTATUS[0]}"
  if command -v compute-sanitizer >/dev/null; then
    timeout 240 compute-sanitizer --tool memcheck --print-limit 20 "$DIST/infer_kernels_test" --decode-only | tail -3
    echo "== compute-sanitizer memcheck: exit ${PIPESTATUS[0]}"
  fi
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -4
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  engine_ab llama-3.1-8b "${ROUNDS:-2}" "decode batch|attention batch (8|32) context <= (512|2048)"
} >"$log" 2>&1
rm -f "$OUT/env.txt"
cat "$log" | cut -c1-400
