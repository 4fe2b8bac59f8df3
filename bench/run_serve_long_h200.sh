#!/usr/bin/env bash
# The serve benchmark at long context on one H200, beside the PyTorch baseline in the same call:
# decode at 4096 tokens of context (batch 1/8/32), the static batch of 32 x 4096/128, and prefills
# of 16k and 32k tokens, where attention is a third of the FLOPs. Then bench/serve_compare.py.
# Binary: DIST (bench/dist_env.sh). Writes $OUT/serve_long.json, torch_serve_long.jsonl,
# serve_long_ratios.md and logs.tar.gz.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
logs=$(mktemp -d)
write_env "$logs/env.txt"
isl=${ISL:-4096}
prefill=${PREFILL:-16384,32768}
start=$(date +%s)
"$bin" -v bench --only memory/ce_copy/4GiB,gemm/bf16/m8192_n8192_k8192,serve --memory-sizes 4GiB \
  --gemm-sizes 8192 --precisions bf16 --isl "$isl" --serve-prefill "$prefill" --out "$OUT/serve_long.json" \
  --tags "machine:nvidia-h200,script:run_serve_long_h200" >"$logs/serve.txt" 2>"$logs/serve.log"
echo "== serve cases: exit $? after $(($(date +%s) - start)) s"
start=$(date +%s)
PYTHONUNBUFFERED=1 python3 bench/serve_baseline_torch.py --isl "$isl" --cache-len $((isl + 256)) --prefill "$prefill" \
  >"$OUT/torch_serve_long.jsonl" 2>"$logs/torch_serve.log"
echo "== PyTorch baseline: exit $? after $(($(date +%s) - start)) s"
tail -5 "$logs/torch_serve.log"
python3 bench/serve_compare.py "$OUT/serve_long.json" "$OUT/torch_serve_long.jsonl" | tee "$OUT/serve_long_ratios.md"
tar -czf "$OUT/logs.tar.gz" -C "$logs" .
