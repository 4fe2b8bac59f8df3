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
if ! command -v ncu >/dev/null; then
  echo "no ncu on this machine" | tee "$OUT/decode-attention-stalls.txt"
  exit 0
fi
# --clock-control none: the card's own clocks, as in a step (ncu locks them to base by default).
timeout 300 ncu --clock-control none --kernel-name regex:decode_attention_kernel --launch-skip 2 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
  --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
  "$DIST/infer_kernels_test" --decode-profile "${HEADS:-llama}" >"$OUT/decode-attention-stalls.txt" 2>&1
echo "ncu exit code: $?" >>"$OUT/decode-attention-stalls.txt"
grep -E "Duration|DRAM Throughput|Eligible|Active Warps|stalled|ncu exit|ERR" "$OUT/decode-attention-stalls.txt" |
  awk '!/stalled/ || $NF + 0 >= 0.05' | head -40
if [ "${SOURCE:-0}" = 1 ]; then
  timeout 300 ncu --clock-control none --kernel-name regex:decode_attention_kernel --launch-skip 2 --launch-count 1 \
    --section InstructionStats --section SourceCounters --section WarpStateStats --import-source no \
    -o "$OUT/decode-attention" -f "$DIST/infer_kernels_test" --decode-profile "${HEADS:-llama}" >/dev/null 2>&1
  ncu -i "$OUT/decode-attention.ncu-rep" --page source --csv --print-source sass >"$OUT/decode-attention-sass.csv" 2>&1
  echo "source page: exit $?, $(wc -l <"$OUT/decode-attention-sass.csv") lines"
  ncu -i "$OUT/decode-attention.ncu-rep" --page details --section InstructionStats 2>&1 | grep -E "Executed|Issued" | head
  rm -f "$OUT/decode-attention.ncu-rep"
fi
