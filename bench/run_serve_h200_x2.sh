#!/usr/bin/env bash
# Llama-3.1-70B (BF16, ~70.6 GB of weights per GPU) with tensor parallelism over 2 H200s (kind
# nvidia-h200-x2): decode roofline cases, an 8k prefill, the 32 x 512/128 static batch, then a
# Server scenario with --find-peak (p99 TTFT <= 2 s, p99 TPOT <= 100 ms, at least 15 s of arrivals per probe),
# then a Concurrency sweep under the same bounds (CONCURRENCY, default 1,4,16,64; CONCURRENCY=none skips it).
# Usage, from the repository root there:  bash bench/run_serve_h200_x2.sh
# Binary: DIST (default .devdist, made here by scripts/make-device-dist.sh and carried). The
# NVLink-multicast-off variables (NCCL_NVLS_ENABLE ...) are left as the machine sets them.
# Writes under $OUT: serve70b.json, serve70b_peak.json, serve70b_concurrency.json, serve70b_ratios.md,
# logs.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
logs=$(mktemp -d)
tags="--tags machine:nvidia-h200-x2,script:run_serve_h200_x2"
{
  date -u +%FT%TZ
  "$bin" --version
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
  nvidia-smi topo -m
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
} >"$logs/env.txt" 2>&1

start=$(date +%s)
"$bin" -v bench --only gemm/bf16/m8192_n8192_k8192,serve --gemm-sizes 8192 --precisions bf16 --gpus 0,1 --tp 2 \
  --model llama-3.1-70b --out "$OUT/serve70b.json" $tags >"$logs/serve70b.txt" 2>"$logs/serve70b.log"
echo "== 70B TP2 cases: exit $? after $(($(date +%s) - start)) s"

start=$(date +%s)
"$bin" -v bench --only serve/load --gpus 0,1 --tp 2 --model llama-3.1-70b --find-peak --rate 4 --ttft-ms 2000 \
  --tpot-ms 100 --requests 64 --duration-s 15 --out "$OUT/serve70b_peak.json" $tags \
  >"$logs/serve70b_peak.txt" 2>"$logs/serve70b_peak.log"
echo "== 70B TP2 Server --find-peak: exit $? after $(($(date +%s) - start)) s"

if [ "${CONCURRENCY:-1,4,16,64}" != none ]; then
  start=$(date +%s)
  "$bin" -v bench --only serve/load --gpus 0,1 --tp 2 --model llama-3.1-70b --concurrency "${CONCURRENCY:-1,4,16,64}" \
    --ttft-ms 2000 --tpot-ms 100 --requests 32 --duration-s 10 --out "$OUT/serve70b_concurrency.json" $tags \
    >"$logs/serve70b_concurrency.txt" 2>"$logs/serve70b_concurrency.log"
  echo "== 70B TP2 concurrency sweep: exit $? after $(($(date +%s) - start)) s"
  grep -h "in flight:" "$logs"/serve70b_concurrency.txt "$logs"/serve70b_concurrency.log
fi

cat "$logs/serve70b.txt" "$logs/serve70b_peak.txt"
# No PyTorch baseline for 70B: an empty baseline leaves those columns n/a.
: >"$logs/none.jsonl"
python3 bench/serve_compare.py "$OUT/serve70b.json" "$logs/none.jsonl" "$OUT/serve70b_peak.json" |
  tee "$OUT/serve70b_ratios.md"
tar -czf "$OUT/logs.tar.gz" -C "$logs" .
