#!/usr/bin/env bash
# gpuscout's gemm benchmark and PyTorch's matrix products on the same GPU, in one call, so the two
# see the same card, clocks and cuBLASLt. Run on the GPU machine from the repository root:
#
#   bash bench/run_gemm_h200.sh [quick|standard|full] [gpuscout list flags, e.g. --gemm-sizes=8192]
#
# Binary: DIST (bench/dist_env.sh: made here by scripts/make-device-dist.sh, carried), run on
# PyTorch's cuBLASLt so both sides use one library build. Writes under $OUT (default ./out): the
# tool's result JSON, PyTorch's JSON, logs, GPU state, and prints the ratio table last.
set -uo pipefail
MODE=${1:-standard}
shift || true
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
TORCH_SIZES=${TORCH_SIZES:-4096,8192,16384}
TORCH_PRECISIONS=${TORCH_PRECISIONS:-fp32,tf32,fp16,bf16,fp8,int8}
TORCH_LAYOUTS=${TORCH_LAYOUTS:-both}
log() { echo "[run_gemm] $*" >&2; }

{
  nvidia-smi
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active --format=csv
} >"$OUT/gpu_state.txt" 2>&1

source bench/dist_env.sh
use_torch_cublaslt

# Clocks and power once a second while everything runs (throttling explains most surprises).
nvidia-smi dmon -s pc -d 1 >"$OUT/dmon.log" 2>&1 &
DMON=$!

log "gpuscout gemm ($MODE) ..."
start=$(date +%s)
case "$MODE" in quick) MODE_FLAG=--quick ;; full) MODE_FLAG=--full ;; *) MODE_FLAG= ;; esac
"$bin" -v bench --only gemm $MODE_FLAG --out "$OUT/gpuscout_gemm.json" "$@" >"$OUT/gpuscout.log" 2>&1
rc=$?
log "gpuscout exit code $rc after $(($(date +%s) - start)) s"
tail -5 "$OUT/gpuscout.log" >&2

log "PyTorch reference ..."
start=$(date +%s)
PYTHONUNBUFFERED=1 python3 bench/gemm_reference.py --sizes "$TORCH_SIZES" --precisions "$TORCH_PRECISIONS" \
  --layouts "$TORCH_LAYOUTS" >"$OUT/torch_gemm.json" 2>"$OUT/torch.log"
log "PyTorch exit code $? after $(($(date +%s) - start)) s"

kill "$DMON" 2>/dev/null
wait "$DMON" 2>/dev/null

# Non-square records in brief, then the ratio table last.
python3 - "$OUT/gpuscout_gemm.json" <<'EOF' >&2
import json, sys
doc = json.load(open(sys.argv[1]))
bad = [r for r in doc["records"] if r["outcome"] != "passed"]
for r in bad:
    print(f"  {r['key']}: {r['outcome']} {r.get('reason', '')[:160]}")
llm = [r for r in doc["records"] if "layer" in r["params"] and r["outcome"] == "passed"]
for r in llm:
    tp = next(m for m in r["metrics"] if m["name"] == "throughput")
    print(f"  {r['key']}: {tp['value']:.1f} {tp['unit']}")
EOF
python3 bench/gemm_compare.py "$OUT/gpuscout_gemm.json" "$OUT/torch_gemm.json" | tee "$OUT/ratio_table.md"
exit "$rc"
