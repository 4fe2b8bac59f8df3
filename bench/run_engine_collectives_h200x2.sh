#!/usr/bin/env bash
# One call on the 2x H200 machine (kind nvidia-h200-x2), everything session 3 claims:
#   1. bench/run_engine_pdl_h200.sh: engine and kernel correctness (TP1, TP2, a failing and a hanging
#      rank), then the engine's decode timing with programmatic dependent launch on and off;
#   2. bench/run_serve_h200.sh on GPU 0 without --find-peak: the serve cases and the PyTorch
#      baseline in the same call, and their ratios;
#   3. gpuscout's NCCL collectives (one process, both GPUs) and bench/collectives_reference_torch.py
#      (torch.distributed, the same sizes) back to back, compared by bench/collectives_compare.py;
#   4. the README's main job (scripts/main-job.sh) on its GPU path: bench --quick, advise, report.
# Usage, repository root there:  DIST=.devdist bash bench/run_engine_collectives_h200x2.sh
# DIST holds gpuscout, infer_engine_test, infer_kernels_test and lib/ (scripts/make-device-dist.sh
# plus the two test binaries). Works in a scratch folder, then leaves under $OUT (the device tool
# returns at most 8 files): serve.json, torch_serve.jsonl, collectives.json, collectives_torch.json,
# main-job-bench.json, ratios.md (serve and collectives), steps.txt and all.tar.gz (every log).
set -uo pipefail
FINAL=${OUT:-$PWD/out}
OUT=$(mktemp -d)
export DIST=${DIST:-.devdist}
mkdir -p "$OUT/collectives" "$FINAL"
source bench/dist_env.sh
step() { echo "== $1: exit $2 after $(($(date +%s) - $3)) s" | tee -a "$OUT/steps.txt"; }

s=$(date +%s)
bash bench/run_engine_pdl_h200.sh "$OUT/engine" llama-3.1-8b >/dev/null 2>&1
step "engine tests + PDL A/B" $? "$s"

s=$(date +%s)
CUDA_VISIBLE_DEVICES=0 MACHINE=nvidia-h200-x2-gpu0 FIND_PEAK=0 OUT="$OUT/serve" bash bench/run_serve_h200.sh \
  >"$OUT/serve.txt" 2>&1
step "serve + PyTorch baseline (GPU 0)" $? "$s"

c="$OUT/collectives"
sizes=8,1KiB,1MiB,64MiB,1GiB,8GiB
s=$(date +%s)
timeout 240 "$bin" -v bench --only collectives --coll-ops all_reduce,all_gather,reduce_scatter,alltoall,sendrecv,broadcast \
  --coll-sizes $sizes --coll-dtypes float --out "$c/gpuscout.json" --tags machine:nvidia-h200-x2,mode:single_process \
  >"$c/gpuscout.txt" 2>"$c/gpuscout.log"
step "gpuscout collectives" $? "$s"
s=$(date +%s)
timeout 240 python3 bench/collectives_reference_torch.py --nproc 2 --sizes 8,1K,1M,64M,1G,8G --out "$c/torch.json" \
  >"$c/torch.txt" 2>&1
step "torch collectives" $? "$s"
python3 bench/collectives_compare.py "$c/gpuscout.json" "$c/torch.json" --format md >"$c/ratios.md" 2>&1
cat "$c/ratios.md"

s=$(date +%s)
GPUSCOUT="$bin" timeout 300 bash scripts/main-job.sh "$OUT/main-job" >"$OUT/main-job.txt" 2>&1
step "main job (GPU path)" $? "$s"
tail -15 "$OUT/main-job.txt"
cat "$OUT/steps.txt"
grep -h -E "ok   rank|FAIL|PASS|fault" "$OUT/engine/engine_test.txt"
grep -h -E "decode|fused|m=1 " "$OUT/engine/bench_pdl_a.txt"
cp "$OUT/serve/serve.json" "$OUT/serve/torch_serve.jsonl" "$OUT/steps.txt" "$FINAL/"
cp "$c/gpuscout.json" "$FINAL/collectives.json"
cp "$c/torch.json" "$FINAL/collectives_torch.json"
cp "$OUT/main-job/bench.json" "$FINAL/main-job-bench.json"
cat "$OUT/serve/serve_ratios.md" "$c/ratios.md" >"$FINAL/ratios.md"
tar -czf "$FINAL/all.tar.gz" -C "$OUT" .
