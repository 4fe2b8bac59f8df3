#!/usr/bin/env bash
# Session 24, one H200: a decode layer in two branches on two streams. The batch-32 step is a chain of
# ~9 kernels per layer, each waiting for the one before; cuBLASLt's GEMMs cannot start early, so every
# boundary idles SMs (session 12: the four small kernels' knock-out saved 1.12 ms, more than their
# bytes). Here o and the MLP are split in halves of k / of the FFN, one half per stream, so that one
# branch's kernels fill the SMs the other's boundaries leave idle. First the checks of the strided
# GEMM classes, SiLU * up and the add + RMSNorm (CPU reference), then 16-layer graphs of the step's
# GEMM chain at 8/16/32 rows, one chain against two branches; then the kernel and engine checks
# (RMSNorm and SiLU * up changed under them).
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_branches_h200.sh
# Needs $DIST/infer_gemm_test, infer_kernels_test, infer_engine_test. Writes $OUT/branches.{txt,tar.gz}.
set -u
source bench/dist_env.sh
ab_begin branches
{
  "$bin" --version
  echo "== infer_gemm_test --branches --bench"
  timeout 300 "$DIST/infer_gemm_test" --branches --bench 2>&1 | tee "$runs/gemm-branches.txt" | grep -v " ok  "
  echo "== exit ${PIPESTATUS[0]}"
  echo "== infer_kernels_test"
  timeout 240 "$DIST/infer_kernels_test" >"$runs/kernels.txt" 2>&1
  echo "== exit $?"
  grep -E "FAIL|PASSED|FAILED" "$runs/kernels.txt" | head -8 | cut -c1-250
  echo "== infer_engine_test"
  timeout 300 "$DIST/infer_engine_test" >"$runs/engine.txt" 2>&1
  echo "== exit $?"
  grep -E "FAIL|error|infer_engine_test" "$runs/engine.txt" | head -8 | cut -c1-250
} >>"$log" 2>&1
ab_end branches
