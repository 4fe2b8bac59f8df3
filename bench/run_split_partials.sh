#!/usr/bin/env bash
# Session 36: bench/probe/split_partials_probe.cu on whatever card came, at 32, 16 and 8 decode rows
# (~1 min). Writes $OUT/split-partials.txt. Usage (repository root on the GPU machine):
#   bash bench/run_split_partials.sh
set -u
out=${OUT:-$PWD/out}
mkdir -p "$out"
log="$out/split-partials.txt"
{
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
  nvcc -O3 -std=c++17 -arch=sm_90 bench/probe/split_partials_probe.cu -lcublasLt -o /tmp/split_partials_probe ||
    { echo "build failed"; exit 1; }
  for rows in ${ROWS:-32 16 8}; do
    timeout 120 /tmp/split_partials_probe "$rows" 32 7
    echo "rows $rows rc $?"
  done
} >"$log" 2>&1
cat "$log"
