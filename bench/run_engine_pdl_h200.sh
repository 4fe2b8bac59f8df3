#!/usr/bin/env bash
# Programmatic dependent launch (PDL) in the serving engine, A/B in one call on the H200 machine:
# the engine and kernel correctness tests (TP2 and the injected-fault checks when 2 GPUs are
# visible), then the engine's timing mode for MODEL with PDL on and off, twice each, interleaved.
# Usage (repository root on the GPU machine; DIST made here with scripts/make-device-dist.sh plus
# the two test binaries copied into it):
#   DIST=.devdist bash bench/run_engine_pdl_h200.sh OUTDIR [MODEL]
set -u
out=${1:-${OUT:-out}}
model=${2:-llama-3.1-8b}
source bench/dist_env.sh
mkdir -p "$out"
write_env "$out/env.txt"
run() { run_logged "$out" "$out/summary.txt" "$@"; }  # name, timeout, command...
run engine_test 240 "$DIST/infer_engine_test"
run kernels_test 180 "$DIST/infer_kernels_test"
for round in a b; do
  run "bench_pdl_$round" 200 "$DIST/infer_engine_test" --bench "$model"
  run "bench_nopdl_$round" 200 "$DIST/infer_engine_test" --bench "$model" --no-pdl
done
grep -H -E "decode|prefill|programmatic" "$out"/bench_*.txt | tee -a "$out/summary.txt"
# KNOCKOUT=1: per-layer kernels left out one group at a time (timing attribution, tokens meaningless).
if [ "${KNOCKOUT:-0}" = 1 ]; then
  for ko in none norms rope attention silu norms,rope,attention,silu; do
    run "knockout_$ko" 200 "$DIST/infer_engine_test" --bench "$model" --knock-out "$ko"
  done
  grep -H -E "decode batch" "$out"/knockout_*.txt | tee -a "$out/summary.txt"
fi
