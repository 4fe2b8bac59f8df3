#!/usr/bin/env bash
# Early PDL trigger A/B on one H200, in one call: the latency-bound kernels between GEMMs let the
# next kernel launch at their start (GPUSCOUT_PDL_EARLY_TRIGGER=1, the DIST build) or after their
# wait (=0, the LATE build), each with the timed GEMM choice and with the skinny kernel forced for
# every GEMM of <= 8 rows (GPUSCOUT_DECODE_GEMM=skinny), interleaved over two rounds; then the
# knock-out of all four small-kernel groups for both extremes, and Qwen2.5-7B once each.
# The experiment was reverted (1131ef2): build both binaries at d618fa8, the early one as is and
# the late one with -DGPUSCOUT_PDL_EARLY_TRIGGER=0 for the two kernel files.
# Usage (repository root on the GPU machine; both dists made here with scripts/make-device-dist.sh
# plus tests/gpu binaries; LATE only needs infer_engine_test):
#   DIST=.devdist-e LATE=.devdist-l bash bench/run_pdl_trigger_h200.sh OUTDIR
set -u
out=${1:-${OUT:-out}}
LATE=${LATE:-.devdist-l}
source bench/dist_env.sh
mkdir -p "$out"
write_env "$out/env.txt"
run() { run_logged "$out" "$out/summary.txt" "$@"; }  # name, timeout, command...
run engine_test 240 "$DIST/infer_engine_test"
run kernels_test 180 "$DIST/infer_kernels_test"
for round in a b; do
  for trigger in late early; do
    dir=$DIST
    [ "$trigger" = late ] && dir=$LATE
    run "bench_${trigger}_tuned_$round" 120 "$dir/infer_engine_test" --bench llama-3.1-8b
    run "bench_${trigger}_skinny_$round" 120 env GPUSCOUT_DECODE_GEMM=skinny "$dir/infer_engine_test" --bench llama-3.1-8b
  done
done
run ko_late_tuned 120 "$LATE/infer_engine_test" --bench llama-3.1-8b --knock-out norms,rope,attention,silu
run ko_early_skinny 120 env GPUSCOUT_DECODE_GEMM=skinny "$DIST/infer_engine_test" --bench llama-3.1-8b \
  --knock-out norms,rope,attention,silu
run qwen_late_tuned 120 "$LATE/infer_engine_test" --bench qwen2.5-7b
run qwen_early_tuned 120 "$DIST/infer_engine_test" --bench qwen2.5-7b
run qwen_early_skinny 120 env GPUSCOUT_DECODE_GEMM=skinny "$DIST/infer_engine_test" --bench qwen2.5-7b
grep -H -E "decode batch|prefill" "$out"/bench_*.txt "$out"/ko_*.txt "$out"/qwen_*.txt | sed "s|$out/||" |
  tee -a "$out/summary.txt"
grep -H "gemm " "$out"/bench_early_skinny_a.txt "$out"/bench_late_tuned_a.txt | sed "s|$out/||" >>"$out/summary.txt"
