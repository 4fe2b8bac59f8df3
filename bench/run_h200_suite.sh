#!/usr/bin/env bash
# The single-GPU suite on the GPU machine, with the references timed in the same call:
#   1. `gpuscout bench --quick` over every single-GPU benchmark, timed (must stay under 60 s);
#   2. gemm at 4096 and 8192 for FP32, TF32, FP16, BF16, FP8 beside bench/gemm_reference.py (PyTorch);
#   3. memory and transfer (standard mode) beside bench/memory_reference.py (PyTorch).
# Usage, from the repository root there:  bash bench/run_h200_suite.sh
# Binary: DIST (bench/dist_env.sh). gpuscout runs on PyTorch's cuBLASLt, so both GEMM sides use one
# library build. Writes the tool's JSON, PyTorch's JSON, logs and ratio tables under $OUT; prints the
# ratio tables last.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
source bench/dist_env.sh
use_torch_cublaslt
tags="--tags machine:nvidia-h200,script:run_h200_suite"
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} >"$OUT/env.txt" 2>&1
"$bin" devices >"$OUT/devices.txt" 2>&1

start_ns=$(date +%s%N)
"$bin" -v bench --quick --out "$OUT/quick.json" $tags >"$OUT/quick.txt" 2>"$OUT/quick.log"
quick_rc=$?
quick_ms=$((($(date +%s%N) - start_ns) / 1000000))

"$bin" -v bench --only gemm --gemm-sizes 4096,8192 --precisions fp32,tf32,fp16,bf16,fp8 --gemm-m 1,4096 \
  --out "$OUT/gemm.json" $tags >"$OUT/gemm.txt" 2>"$OUT/gemm.log"
gemm_rc=$?
PYTHONUNBUFFERED=1 python3 bench/gemm_reference.py --sizes 4096,8192 --precisions fp32,tf32,fp16,bf16,fp8 \
  --layouts tn >"$OUT/torch_gemm.json" 2>"$OUT/torch_gemm.log"

"$bin" -v bench --only memory,transfer --out "$OUT/memory.json" $tags >"$OUT/memory.txt" 2>"$OUT/memory.log"
memory_rc=$?
python3 bench/memory_reference.py "$OUT/torch_memory.json" >"$OUT/torch_memory.log" 2>&1

echo "== quick: exit $quick_rc after $quick_ms ms"
cat "$OUT/quick.txt"
echo "== exit codes: gemm $gemm_rc, memory/transfer $memory_rc"
python3 bench/gemm_compare.py "$OUT/gemm.json" "$OUT/torch_gemm.json" | tee "$OUT/gemm_ratios.md"
python3 bench/memory_compare.py "$OUT/memory.json" "$OUT/torch_memory.json" | tee "$OUT/memory_ratios.txt"
