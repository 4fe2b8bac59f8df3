#!/usr/bin/env bash
# Why the batch-32 decode attention streams K/V at ~2/3 of the copy rate (session 30): the kernel
# bench's decode table (plain launches), then Nsight Compute on the streaming kernel at batch 32,
# 512..576 tokens: throughput, occupancy and the warps' stall reasons (cycles per issued
# instruction by reason), so the barrier per tile, the wait on cp.async and the memory latency can
# be told apart.
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_decode_attention_stalls.sh
# SOURCE=1 also samples the warps' stalls per SASS instruction (ncu's source page, CSV).
# Writes $OUT/decode-attention-bench.txt, $OUT/decode-attention-stalls.txt [and decode-attention-sass.csv].
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
write_env "$OUT/env.txt"
{
  cat "$OUT/env.txt"
  "$DIST/infer_kernels_test" --decode-only --bench | sed -n '/## decode attention/,$p'
} >"$OUT/decode-attention-bench.txt" 2>&1
grep -A6 "## decode attention (Llama" "$OUT/decode-attention-bench.txt"
decode_attention_stalls decode_attention_kernel "$OUT/decode-attention-stalls.txt" "${HEADS:-llama}"
command -v ncu >/dev/null || exit 0
if [ "${SOURCE:-0}" = 1 ]; then
  timeout 300 ncu --clock-control none --kernel-name regex:decode_attention_kernel --launch-skip 2 --launch-count 1 \
    --section InstructionStats --section SourceCounters --section WarpStateStats --import-source no \
    -o "$OUT/decode-attention" -f "$DIST/infer_kernels_test" --decode-profile "${HEADS:-llama}" >/dev/null 2>&1
  ncu -i "$OUT/decode-attention.ncu-rep" --page source --csv --print-source sass >"$OUT/decode-attention-sass.csv" 2>&1
  echo "source page: exit $?, $(wc -l <"$OUT/decode-attention-sass.csv") lines"
  ncu -i "$OUT/decode-attention.ncu-rep" --page details --section InstructionStats 2>&1 | grep -E "Executed|Issued" | head
  rm -f "$OUT/decode-attention.ncu-rep"
fi
