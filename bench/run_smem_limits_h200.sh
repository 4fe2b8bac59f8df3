#!/usr/bin/env bash
# Session 23, one H200: the engine and its kernels with the shared memory of smaller GPUs. Since this
# session the backend is built for sm_80 as well (A100; A10/A40/L4/L40S run that code as compute
# capability 8.6/8.9), and every kernel with a large shared-memory footprint checks what the GPU allows
# before it launches: the decode attention's streaming kernel gives way to the split one, the prefill
# attention takes its 64-query tile, the fused SwiGLU GEMM and the ring GEMV stand aside. None of those
# GPUs is here, so GPUSCOUT_SMEM_OPTIN_LIMIT (bytes) runs the H200 with their per-block limits: 166912
# (an A100's 163 KB) and 101376 (99 KB, Ampere/Ada cards other than the A100); without it, the H200's
# own 227 KB as before. Each: the kernel checks, the engine's checks against the CPU reference, and at
# 99 KB the serve benchmark's decode cases (their speed on an H200 with those kernels, not another
# GPU's). The sm_80 machine code itself cannot run here (an H200 runs sm_90 code).
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_smem_limits_h200.sh
# Needs $DIST/infer_kernels_test and $DIST/infer_engine_test. Writes $OUT/smem-limits.{txt,tar.gz}.
set -u
source bench/dist_env.sh
ab_begin smem-limits
{
  "$bin" --version
  for limit in none 166912 101376; do
    if [ "$limit" = none ]; then unset GPUSCOUT_SMEM_OPTIN_LIMIT; else export GPUSCOUT_SMEM_OPTIN_LIMIT=$limit; fi
    kernel_args=--decode-only
    [ "$limit" = none ] && kernel_args=
    echo "== GPUSCOUT_SMEM_OPTIN_LIMIT=$limit: infer_kernels_test $kernel_args"
    timeout 240 "$DIST/infer_kernels_test" $kernel_args >"$runs/kernels-$limit.txt" 2>&1
    echo "== exit $?"
    grep -E "SKIP|FAIL|PASSED|error" "$runs/kernels-$limit.txt" | sort | uniq -c | sort -rn | head -12 | cut -c1-250
    echo "== GPUSCOUT_SMEM_OPTIN_LIMIT=$limit: infer_engine_test"
    timeout 300 "$DIST/infer_engine_test" >"$runs/engine-$limit.txt" 2>&1
    echo "== exit $?"
    grep -E "FAIL|error|infer_engine_test|TP1 graphs on" "$runs/engine-$limit.txt" | head -8 | cut -c1-250
    if [ "$limit" = 101376 ]; then
      serve_ab_run "serve/decode at GPUSCOUT_SMEM_OPTIN_LIMIT=$limit" "$runs/serve-decode-$limit.json" serve/decode --
    fi
  done
} >>"$log" 2>&1
ab_end smem-limits
