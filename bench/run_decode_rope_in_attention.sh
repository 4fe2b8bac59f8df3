#!/usr/bin/env bash
# Session 31: RoPE and the K/V store inside the pair decode attention kernel (GPUSCOUT_DECODE_FUSED_ROPE=1;
# launch_decode_attention_with_rope), in one call on whatever card comes:
#   1. the decode attention checks (the fused kernel bitwise against the RoPE kernel + pair kernel, head
#      sizes 128 and 64, block sizes 16 and 7, with and without QKV biases) and compute-sanitizer
#      memcheck of them;
#   2. the kernel bench's decode table (plain launches; rope+p/2 and p/2+rope columns);
#   3. the engine checks (the head-128 model with the fused path forced, also with QKV biases);
#   4. `infer_engine_test --bench llama-3.1-8b` with the switch =0 and =1, interleaved ROUNDS times;
#   5. SERVE=1: the serve benchmark's decode cases and static batch with the switch =0 and =1,
#      interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_decode_rope_in_attention.sh
# Writes $OUT/decode-rope-in-attention.txt and $OUT/decode-rope-in-attention.tar.gz (check logs, result files).
set -u
source bench/dist_env.sh
ab_begin decode-rope-in-attention
{
  "$DIST/infer_kernels_test" --decode-only >"$runs/decode-checks.txt" 2>&1
  echo "== decode attention checks: exit $?"
  grep -E "FAIL|PASSED|RoPE in attention" "$runs/decode-checks.txt" | cut -c1-160 | head -40
  timeout 300 compute-sanitizer --tool memcheck --kernel-name kns=decode --print-limit 20 \
    "$DIST/infer_kernels_test" --decode-only | grep -E "ERROR SUMMARY|FAIL|PASSED"
  echo "== compute-sanitizer memcheck (decode kernels): exit ${PIPESTATUS[0]}"
  "$DIST/infer_kernels_test" --decode-only --bench | sed -n '/## decode attention/,$p'
  timeout 400 "$DIST/infer_engine_test" >"$runs/engine-checks.txt" 2>&1
  echo "== engine checks: exit $?"
  grep -E "rope|FAIL|PASS" "$runs/engine-checks.txt" | cut -c1-200 | tail -16
  engine_ab_switch GPUSCOUT_DECODE_FUSED_ROPE "${ROUNDS:-2}" "start-up|attention batch (1|8|32) |decode batch"
  if [ "${SERVE:-0}" = 1 ]; then
    serve_ab_switch GPUSCOUT_DECODE_FUSED_ROPE serve/decode,serve/static rope
  fi
} >>"$log" 2>&1
ab_end decode-rope-in-attention
