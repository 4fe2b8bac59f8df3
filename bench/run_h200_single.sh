#!/usr/bin/env bash
# Single-GPU measurements on the device machine, with PyTorch references timed in the same call.
# Usage (repository root on the GPU machine):  bench/run_h200_single.sh [OUTDIR]
#   OUTDIR defaults to $OUT (the device tool's output folder) or ./out.
#   Uses build-cuda/dist/gpuscout (+ build-cuda/dist/lib) when carried from the build machine and it
#   runs there; else builds with cmake into build-device/.
#   ONLY (default memory,transfer), MODE (default standard: "", or --quick/--full), GEMM=1 adds a
#   quick BF16 GEMM run when the binary has the gemm benchmark.
# Writes: gpuscout-h200.json (the tool's result), bench-summary.txt, bench-stderr.txt, devices.txt,
# torch-ref.json, env.txt, ratios.txt; prints the ratio table last.
set -u
out=${1:-${OUT:-out}}
mkdir -p "$out"
root=$(pwd)
only=${ONLY:-memory,transfer}
mode=${MODE:-}

bin=""
if [ -x build-cuda/dist/gpuscout ]; then
  export LD_LIBRARY_PATH="$root/build-cuda/dist/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  if build-cuda/dist/gpuscout --version >/dev/null 2>"$out/bench-stderr.txt"; then
    bin=build-cuda/dist/gpuscout
  else
    echo "carried binary does not run here:"; cat "$out/bench-stderr.txt"
  fi
fi
if [ -z "$bin" ]; then
  echo "building on the device machine"
  cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DGPUSCOUT_BUILD_TESTS=OFF >"$out/build.txt" 2>&1 &&
    cmake --build build-device -j"$(nproc)" >>"$out/build.txt" 2>&1 && bin=build-device/gpuscout
  [ -n "$bin" ] || { tail -30 "$out/build.txt"; exit 1; }
fi

{
  echo "date: $(date -u +%FT%TZ)"; "$bin" --version; uname -a
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,pstate,persistence_mode --format=csv
  nvidia-smi topo -m 2>/dev/null | head -5
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  ls /sys/devices/system/node | grep node
} >"$out/env.txt" 2>&1

"$bin" devices >"$out/devices.txt" 2>&1
"$bin" devices --format json >>"$out/devices.txt" 2>&1

result="$out/gpuscout-h200.json"
# shellcheck disable=SC2086
"$bin" -v bench $mode --only "$only" --out "$result" --tags machine:nvidia-h200,script:run_h200_single \
  >"$out/bench-summary.txt" 2>>"$out/bench-stderr.txt"
echo "gpuscout bench exit code: $?" >>"$out/bench-stderr.txt"
if [ "${GEMM:-0}" = 1 ] && "$bin" bench --list 2>/dev/null | grep -q '^gemm'; then
  "$bin" -v bench --quick --only gemm/bf16 --out "$out/gpuscout-h200-gemm.json" >>"$out/bench-summary.txt" \
    2>>"$out/bench-stderr.txt"
fi

# PyTorch references, same machine, same call: median of 20 CUDA-event timings after 5 warm-ups.
python3 bench/memory_reference.py "$out/torch-ref.json" 2>&1 | tail -5

python3 bench/memory_compare.py "$result" "$out/torch-ref.json" | tee "$out/ratios.txt"
