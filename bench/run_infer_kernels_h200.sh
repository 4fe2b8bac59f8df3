#!/usr/bin/env bash
# The serving engine's kernels on the device machine: correctness checks, timings, then the checks
# again under compute-sanitizer (memcheck, racecheck on the attention kernels are too slow here).
# Usage (repository root on the GPU machine): bench/run_infer_kernels_h200.sh [OUTDIR]
#   Runs .kdist/infer_kernels_test (built on the build machine, carried with .kdist/lib/libfmt).
# Then PyTorch's SDPA on the prefill shape (bench/infer_attention_reference.py) in the same call.
# Writes: env.txt, infer-kernels.txt (checks + bench + PyTorch), sanitizer.txt.
set -u
out=${1:-${OUT:-out}}
mkdir -p "$out"
export LD_LIBRARY_PATH="$(pwd)/.kdist/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
bin=.kdist/infer_kernels_test
{
  echo "date: $(date -u +%FT%TZ)"; git log -1 --format='commit %h %s' 2>/dev/null; uname -a
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active --format=csv
} >"$out/env.txt" 2>&1
cat "$out/env.txt"
set -o pipefail
timeout 300 "$bin" --bench 2>&1 | tee "$out/infer-kernels.txt"
echo "exit code: $?" | tee -a "$out/infer-kernels.txt"
timeout 120 python3 bench/infer_attention_reference.py 2>&1 | tee -a "$out/infer-kernels.txt"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv >>"$out/env.txt" 2>&1
if command -v compute-sanitizer >/dev/null; then
  timeout 200 compute-sanitizer --tool memcheck --print-limit 20 "$bin" >"$out/sanitizer.txt" 2>&1
  echo "compute-sanitizer memcheck exit code: $?" >>"$out/sanitizer.txt"
  tail -4 "$out/sanitizer.txt"
fi
