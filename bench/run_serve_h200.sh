#!/usr/bin/env bash
# The serve benchmark on one H200 (kind nvidia-h200), with the PyTorch baseline timed in the same call:
#   1. gpuscout bench --only memory/ce_copy/4GiB,gemm/bf16/m8192_n8192_k8192,serve --model llama-3.1-8b:
#      the copy and BF16 GEMM rates of this run, then decode at batch 1/8/32 (% of the HBM roofline),
#      the 8k prefill (% of the GEMM rate: same run), the 32 x 512/128 static batch;
#   2. bench/serve_baseline_torch.py (the decoder in PyTorch, decode steps replayed from CUDA graphs,
#      each batch with both forms of decode attention; the faster is the baseline);
#   3. a Server scenario with --find-peak for the 8B (p99 TTFT <= 1 s, p99 TPOT <= 50 ms; every probe
#      issues arrivals for at least 15 s: with only 128 requests even an unbounded rate drains
#      within a loose TTFT bound, as the first run of this script showed with a "peak" of 32768/s);
#   4. bench/serve_compare.py: the ratios issue 6 asks for (batch-1 % of roofline, batch-32 end to
#      end vs PyTorch, prefill % of the GEMM rate, peak rate).
# Usage, from the repository root there:  bash bench/run_serve_h200.sh
# Binary: DIST (default .devdist, made here by scripts/make-device-dist.sh and carried).
# Writes under $OUT: serve.json, serve_peak.json, torch_serve.jsonl, serve_ratios.md, logs.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
logs=$(mktemp -d)
# MACHINE: the machine tag of the result files (the x2 machine runs it on GPU 0); by default the first
# GPU's name as nvidia-smi gives it, in lower case with dashes (an nvidia-h200 call can get an H100,
# and the tag should say which card ran). FIND_PEAK=0 skips step 3.
# PREFILL: the prefill case's prompt tokens (default 8192; Mistral-7B's 8192-token context needs 8191,
# since the prefill samples one token).
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr 'A-Z ' 'a-z-')
tags="--tags machine:${MACHINE:-${card:-unknown}},script:run_serve_h200"
model=${MODEL:-llama-3.1-8b}
{
  date -u +%FT%TZ
  "$bin" --version
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} >"$logs/env.txt" 2>&1

start=$(date +%s)
"$bin" -v bench --only memory/ce_copy/4GiB,gemm/bf16/m8192_n8192_k8192,serve --memory-sizes 4GiB \
  --gemm-sizes 8192 --precisions bf16 --model "$model" --serve-prefill "${PREFILL:-8192}" --out "$OUT/serve.json" $tags \
  >"$logs/serve.txt" 2>"$logs/serve.log"
echo "== serve cases: exit $? after $(($(date +%s) - start)) s"

start=$(date +%s)
PYTHONUNBUFFERED=1 python3 bench/serve_baseline_torch.py --model "$model" --prefill "${PREFILL:-8192}" >"$OUT/torch_serve.jsonl" 2>"$logs/torch_serve.log"
echo "== PyTorch baseline: exit $? after $(($(date +%s) - start)) s"

if [ "${FIND_PEAK:-1}" = 1 ]; then
start=$(date +%s)
"$bin" -v bench --only serve/load --model "$model" --find-peak --rate 16 --ttft-ms 1000 --tpot-ms 50 \
  --requests 128 --duration-s 15 --out "$OUT/serve_peak.json" $tags >"$logs/serve_peak.txt" 2>"$logs/serve_peak.log"
echo "== Server --find-peak: exit $? after $(($(date +%s) - start)) s"
fi

cat "$logs/serve.txt" "$logs/serve_peak.txt" 2>/dev/null
peak=()
[ -f "$OUT/serve_peak.json" ] && peak=("$OUT/serve_peak.json")
python3 bench/serve_compare.py "$OUT/serve.json" "$OUT/torch_serve.jsonl" "${peak[@]}" |
  tee "$OUT/serve_ratios.md"
tar -czf "$OUT/logs.tar.gz" -C "$logs" .
