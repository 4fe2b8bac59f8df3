#!/usr/bin/env bash
# Session 19, one H200: Nsight Compute on the prefill attention kernel (tensor-copy loads) at
# q_len = context = 8192 and 32768 (infer_kernels_test --prefill-profile N: 3 warm-ups, 3 timed
# launches; ncu profiles the 4th launch with the full section set). Needs $DIST/infer_kernels_test.
# Writes $OUT/prefill-profile.txt (the kernel times, then each profile's details).
set -uo pipefail
source bench/dist_env.sh
ab_begin prefill-profile
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
{
  echo "# build $("$bin" --version | head -1); ncu: ${ncu:-none}"
  for n in 8192 32768; do
    echo "== infer_kernels_test --prefill-profile $n"
    timeout 120 "$DIST/infer_kernels_test" --prefill-profile "$n" | tail -2
    [ -n "$ncu" ] || continue
    echo "== ncu --set full, q_len = context = $n"
    timeout 240 "$ncu" --set full --kernel-name regex:prefill_wgmma --launch-skip 3 --launch-count 1 \
      "$DIST/infer_kernels_test" --prefill-profile "$n" 2>&1 | grep -vE "^==PROF==|^ *-+ *$" | head -400
  done
} >>"$log" 2>&1
ab_end prefill-profile
