#!/usr/bin/env bash
# Session 30: the pair decode attention kernel (a block per (sequence, KV head), a warp per quarter of
# its tokens; DecodeAttentionPlan::Kernel::pairs), in one call on whatever card comes:
#   1. the decode attention checks (every case also on the pair kernel, 2 and 3 stages) and
#      compute-sanitizer memcheck of them;
#   2. the kernel bench's decode table (plain launches; pairs/3 and pairs/2 columns);
#   3. Nsight Compute on the pair kernel at batch 32, 512..576 tokens (stall reasons, as
#      run_decode_attention_stalls.sh gives them for the streaming kernel);
#   4. the engine checks (the head-128 model with the pair kernel forced);
#   5. `infer_engine_test --bench llama-3.1-8b` with GPUSCOUT_DECODE_PAIR_KERNEL=0 and 1 (the pair
#      kernel withheld from, then offered to, the start-up tuning), interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_decode_pair_kernel.sh
# Writes $OUT/decode-pair-kernel.txt.
set -u
source bench/dist_env.sh
ab_begin decode-pair-kernel
{
  "$DIST/infer_kernels_test" --decode-only >"$runs/decode-checks.txt" 2>&1
  echo "== decode attention checks: exit $?; $(grep -c 'pairs.* ok ' "$runs/decode-checks.txt") pair-kernel checks ok"
  grep -E "FAIL|PASSED|SKIP.*pairs.*D (64|128)" "$runs/decode-checks.txt" | head -20
  timeout 300 compute-sanitizer --tool memcheck --kernel-name kns=decode --print-limit 20 \
    "$DIST/infer_kernels_test" --decode-only | grep -E "ERROR SUMMARY|FAIL|PASSED"
  echo "== compute-sanitizer memcheck (decode kernels): exit ${PIPESTATUS[0]}"
  "$DIST/infer_kernels_test" --decode-only --bench | sed -n '/## decode attention/,$p'
  decode_attention_stalls decode_pair_kernel "$runs/pair-kernel-ncu.txt" llama 3
  timeout 300 "$DIST/infer_engine_test" | grep -E "pairs|FAIL|PASS" | tail -8
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  engine_ab_switch GPUSCOUT_DECODE_PAIR_KERNEL "${ROUNDS:-2}" "start-up|attention batch (1|8|32) |decode batch"
} >>"$log" 2>&1
ab_end decode-pair-kernel
