#!/usr/bin/env bash
# Session 23, one H200: the decode attention's streaming kernel with each block on whole (sequence, KV
# head) pairs, so that no pair is merged from several blocks (attention_decode.cu,
# DecodeAttentionPlan::whole_pairs). Its checks and the kernels' timings alone (infer_kernels_test
# --decode-only --bench), compute-sanitizer memcheck of the checks, the engine's checks against the CPU
# reference (the plan forced in two scenarios), then -- only when all pass -- the engine's decode steps
# with the whole-pairs candidate offered to the start-up tuning or not (GPUSCOUT_DECODE_PAIRS=1 / 0),
# interleaved ENGINE_ROUNDS times, and SERVE_ROUNDS interleaved rounds of `gpuscout bench --only
# serve/decode,serve/static --model llama-3.1-8b` likewise.
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_decode_pairs_h200.sh
# Needs $DIST/infer_kernels_test and $DIST/infer_engine_test. Writes $OUT/decode-pairs-ab.{txt,tar.gz}.
set -u
source bench/dist_env.sh
ab_begin decode-pairs-ab
{
  "$bin" --version
  echo "== infer_kernels_test --decode-only --bench"
  timeout 300 "$DIST/infer_kernels_test" --decode-only --bench >"$runs/kernels.txt" 2>&1
  kernel_rc=$?
  grep -vE " ok +" "$runs/kernels.txt" | cut -c1-300
  echo "checks passed: $(grep -cE " ok +" "$runs/kernels.txt")"
  echo "== exit $kernel_rc"
  if [ "${MEMCHECK:-1}" = 1 ]; then
    echo "== compute-sanitizer memcheck infer_kernels_test --decode-only"
    timeout 240 compute-sanitizer --tool memcheck "$DIST/infer_kernels_test" --decode-only >"$runs/memcheck.txt" 2>&1
    echo "== exit $?"
    grep -E "ERROR SUMMARY|FAIL|error" "$runs/memcheck.txt" | head -20
  fi
  echo "== infer_engine_test (checks)"
  timeout 300 "$DIST/infer_engine_test" >"$runs/engine-checks.txt" 2>&1
  engine_rc=$?
  grep -E "whole pairs|FAIL|error|infer_engine_test" "$runs/engine-checks.txt" | cut -c1-300
  echo "== exit $engine_rc"
  if [ "$kernel_rc" = 0 ] && [ "$engine_rc" = 0 ]; then
    for round in $(seq "${ENGINE_ROUNDS:-1}"); do
      for value in 0 1; do
        echo "== infer_engine_test --bench llama-3.1-8b, GPUSCOUT_DECODE_PAIRS=$value, round $round"
        GPUSCOUT_DECODE_PAIRS=$value timeout 240 "$DIST/infer_engine_test" --bench llama-3.1-8b \
          >"$runs/engine-bench-$value-$round.txt" 2>&1
        echo "== exit $?"
        grep -E "attention batch (1|8|32) context <= 2048|^decode batch|start-up" "$runs/engine-bench-$value-$round.txt" | cut -c1-400
      done
    done
    ROUNDS=${SERVE_ROUNDS:-0} serve_ab_switch GPUSCOUT_DECODE_PAIRS serve/decode,serve/static pairs
  else
    echo "== checks failed: no A/B"
  fi
} >>"$log" 2>&1
ab_end decode-pairs-ab
