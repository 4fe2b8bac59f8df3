#!/usr/bin/env bash
# The 1-row stream GEMV (backends/cuda/infer/gemv_stream.cu) on one H200, one call: its checks and
# the runner's (infer_gemm_test --stream-bench, which then times the 1-row candidates as
# GemmRunner::tune does, with plain and with programmatic launches), compute-sanitizer memcheck of the kernel, the engine checks
# with the runner's timed choice and with the kernel forced, then the engine's timing mode under
# three ways of choosing its GEMMs (see below), interleaved, ROUNDS times.
# Needs the binaries of commit 764e8fb (the experiment; reverted after it).
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_stream_gemv_h200.sh
# DIST holds gpuscout (scripts/make-device-dist.sh) plus infer_gemm_test and infer_engine_test.
# Writes $OUT/stream-gemv.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/stream-gemv.txt"
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_gemm_test" --stream-bench
  echo "== gemm checks and bench: exit $?"
  timeout 300 compute-sanitizer --tool memcheck --kernel-name kns=stream_gemv --print-limit 20 \
    "$DIST/infer_gemm_test" --kernel-only | tail -5
  echo "== memcheck (stream_gemv): exit ${PIPESTATUS[0]}"
  "$DIST/infer_engine_test" | tail -4
  echo "== engine checks (timed choice): exit ${PIPESTATUS[0]}"
  GPUSCOUT_STREAM_GEMV=1 "$DIST/infer_engine_test" | tail -4
  echo "== engine checks (GPUSCOUT_STREAM_GEMV=1): exit ${PIPESTATUS[0]}"
  # The engine's timing mode under each GEMM-choice configuration, interleaved, ROUNDS times:
  #   alone: tune as in sessions 1-6 (each candidate alone, plain launches; no stream GEMV)
  #   chain: tune after an RMSNorm in the engine's launch mode, the stream GEMV a candidate
  #   chain-nostream: the same without the stream GEMV
  for round in $(seq "${ROUNDS:-2}"); do
    for config in alone chain chain-nostream; do
      echo "== engine timing, $config, round $round"
      case $config in
        alone) env GPUSCOUT_GEMM_TUNE=alone GPUSCOUT_STREAM_GEMV=0 "$DIST/infer_engine_test" --bench llama-3.1-8b ;;
        chain) "$DIST/infer_engine_test" --bench llama-3.1-8b ;;
        chain-nostream) env GPUSCOUT_STREAM_GEMV=0 "$DIST/infer_engine_test" --bench llama-3.1-8b ;;
      esac
    done
  done
} >"$log" 2>&1
grep -E "^==|FAILED|PASSED|decode batch|prefill|^qkv|^o |^gate_up|^down|^lm_head|m=1 " "$log"
