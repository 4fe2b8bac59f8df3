#!/usr/bin/env bash
# Session 37: the measurements an H100 calibration table (data/calibration/h100.toml) needs beyond
# session 28's decode GEMMs and HBM arrays (bench/results/h100-gemm-decode-s28-20261207.json,
# h100-memory-s28-20261207.json), the same runs the H200 table was made of:
#   1. gpuscout bench --only gemm: every precision at 4096/8192/16384 and the model-shaped cases (the
#      compute-bound curves by m);
#   2. gpuscout bench --only gemm at 256 and 512 rows, BF16 and FP8 (the prefill-chunk end of the curve);
#   3. gpuscout bench --only memory,transfer (HBM by size, pinned and pageable host copies).
# Usage (repository root on the GPU machine): DIST=.devdist bash bench/run_h100_calibration.sh
# Writes $OUT/h100-gemm-standard.json, $OUT/h100-gemm-mid-m.json, $OUT/h100-memory-transfer.json and
# $OUT/calibration.txt (the environment, each part's exit status and time) and each part's log.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
tags="--tags machine:${MACHINE:-nvidia-h100-x1},script:run_h100_calibration"
log="$OUT/calibration.txt"
write_env "$log"
part() {  # NAME LIMIT ARGS...: one gpuscout bench run under `timeout LIMIT`
  local name=$1 limit=$2 s
  shift 2
  s=$(date +%s)
  timeout "$limit" "$bin" -v bench "$@" --out "$OUT/h100-$name.json" $tags >"$OUT/$name.log" 2>&1
  echo "== $name: exit $? after $(($(date +%s) - s)) s"
  tail -4 "$OUT/$name.log" | cut -c1-300
}
{
  part gemm-standard 300 --only gemm
  part gemm-mid-m 120 --only gemm --gemm-m 256,512 --gemm-sizes 8192 --precisions bf16,fp8
  part memory-transfer 180 --only memory,transfer
} >>"$log" 2>&1
cat "$log"
