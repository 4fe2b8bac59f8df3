#!/usr/bin/env bash
# Session 13: the step's copies off the stream, on one H200 in one call: the engine checks of this
# build (every token the host gets now comes from the argmax kernel's write to mapped memory); then
# `infer_engine_test --bench llama-3.1-8b` of the previous build ($DIST/old/infer_engine_test) and
# this one interleaved ROUNDS times; then the serve benchmark's decode and static cases of both
# builds ($DIST/old/gpuscout against $DIST/gpuscout, pipelined stepping) interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_copy_stream_h200.sh
# Writes $OUT/copy-stream.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/copy-stream.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_engine_test" | grep -E "pipelined|FAIL|PASS$|infer_engine_test" | cut -c1-160
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  engine_ab llama-3.1-8b "${ROUNDS:-2}" "decode batch|graph replays|pipelined"
  for round in $(seq "${ROUNDS:-2}"); do
    for build in old new; do
      exe="$bin"
      [ "$build" = old ] && exe="$PWD/$DIST/old/gpuscout"
      echo "== serve $build, round $round"
      "$exe" -v bench --only serve/copy,serve/decode,serve/static --model llama-3.1-8b --out "$OUT/serve-$build-$round.json" \
        --tags machine:nvidia-h200,script:run_copy_stream_h200 2>&1 | grep -E "^\[gpu0\] serve/(copy|decode|static)"
    done
  done
} >"$log" 2>&1
rm -f "$OUT/env.txt"
cut -c1-260 "$log"
