#!/usr/bin/env bash
# The one-row ring GEMV with rows handed out in chunks (session 11): each block's first chunk a fixed
# share of n / grid rows, the rest in small chunks from an atomic counter. On one H200 in one call:
# the kernel checks (the ring cases, 40 repeated launches) at three first-chunk shares,
# compute-sanitizer memcheck of the ring kernel, the engine checks, then `infer_engine_test --bench
# llama-3.1-8b` of the previous build ($DIST/old/infer_engine_test, every block owning n / grid
# rows) and of this one at several GPUSCOUT_RING_FIRST_SHARE / GPUSCOUT_RING_CHUNK_KB settings,
# interleaved ROUNDS times.
# Usage (repository root on the GPU machine): DIST=.devdist ROUNDS=2 bash bench/run_ring_chunks_h200.sh
# Writes $OUT/ring-chunks.txt.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
log="$OUT/ring-chunks.txt"
write_env "$OUT/env.txt"
# name:first share:chunk KB
variants="old:-:- share1:1:16 share1-8k:1:8 share0.75:0.75:16 share0.5:0.5:16 share0:0:16"
{
  cat "$OUT/env.txt"
  for share in 0.75 0 1; do
    echo "== kernel checks, GPUSCOUT_RING_FIRST_SHARE=$share"
    GPUSCOUT_RING_FIRST_SHARE=$share "$DIST/infer_kernels_test" | grep -E "ring|FAIL|PASSED"
    echo "== kernel checks: exit ${PIPESTATUS[0]}"
  done
  timeout 300 compute-sanitizer --tool memcheck --kernel-name kns=ring_gemv_kernel "$DIST/infer_kernels_test" 2>&1 |
    grep -E "ERROR SUMMARY"
  "$DIST/infer_engine_test" | grep -E "PASS|FAIL" | tail -16
  echo "== engine checks: exit ${PIPESTATUS[0]}"
  for round in $(seq "${ROUNDS:-2}"); do
    for v in $variants; do
      IFS=: read -r name share kb <<<"$v"
      echo "== engine timing llama-3.1-8b $name (share $share, chunk $kb KB), round $round"
      if [ "$name" = old ]; then
        "$DIST/old/infer_engine_test" --bench llama-3.1-8b
      else
        GPUSCOUT_RING_FIRST_SHARE=$share GPUSCOUT_RING_CHUNK_KB=$kb "$DIST/infer_engine_test" --bench llama-3.1-8b
      fi | grep -E "start-up|gemm .* m=1 |batch 1 context <= 2048|decode batch"
    done
  done
} >"$log" 2>&1
grep -E "^==|FAIL|PASSED|ERROR SUMMARY|decode batch   1|start-up" "$log"
